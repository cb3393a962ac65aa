/*
 * ptree_persist.c - the process tree as snapshots, restores and migrations see it:
 * every process's clock page brought up to date, the listening sockets stopped and
 * the connections shut down around a migration's end, and a saved tree put back (its
 * processes, its zombies, who is whose child).
 *
 * Locking as in ptree.c: tree->lock guards the relations and is never taken while
 * holding a process's lock.
 */
#include "fdtable.h"
#include "lx.h"
#include "proc.h"
#include "ptree.h"
#include "../../base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a migration's switch does to each host stream socket of the guest's. */
typedef void ptree_stream_fn(int host, bool listening, void *ctx);

struct ptree_listeners {
	int *fds, max, n;
};

/* A child's clock page is its own copy (lx_fork_memory), which the first process's
 * refresh does not reach; it is made the process's own again before the write, for a
 * snapshot may hold it (aspace_hold). */
static void ptree_clock_refresh(struct lx_proc *q)
{
	if (q->ended || q->vfork_parent || pthread_mutex_trylock(&q->lock))
		return;
	if (q->clock.data &&
	    gmem_user_ptr(q->mem, q->mm.vdso_base - PAGE_SIZE, PAGE_SIZE) == q->clock.data)
		lx_clock_refresh(q);
	pthread_mutex_unlock(&q->lock);
}

void lx_tree_clock_refresh(struct lx_proc *first)
{
	struct lx_tree *t = first->tree;

	lx_clock_refresh(first);
	if (!t || pthread_mutex_trylock(&t->lock))
		return;
	for (int i = 0; i < LX_MAX_PROCS; i++)
		if (t->procs[i] && t->procs[i] != first)
			ptree_clock_refresh(t->procs[i]);
	pthread_mutex_unlock(&t->lock);
}

/* @fn on every stream socket of every process of @first's tree (its lock held). */
static void ptree_streams(struct lx_proc *first, ptree_stream_fn *fn, void *ctx)
{
	struct lx_tree *t = first->tree;
	struct lx_proc *one[1] = { first };
	struct lx_proc **procs = t ? t->procs : one;
	int n = t ? LX_MAX_PROCS : 1;

	if (t)
		pthread_mutex_lock(&t->lock);
	for (int i = 0; i < n; i++) {
		if (procs[i])
			lx_fd_lock(procs[i]);
		for (int fd = 0; procs[i] && fd < procs[i]->fdt.n_files; fd++) {
			int host = procs[i]->fdt.files[fd].host_fd, type = 0, on = 0;
			socklen_t len = sizeof(type);

			if (host < 0 ||
			    getsockopt(host, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_STREAM)
				continue;
			len = sizeof(on);
			if (getsockopt(host, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0)
				fn(host, on != 0, ctx);
		}
		if (procs[i])
			lx_fd_unlock(procs[i]);
	}
	if (t)
		pthread_mutex_unlock(&t->lock);
}

/* A listening socket out of LISTEN, still bound: the port is free for another
 * listener with SO_REUSEADDR (the destination's; the kernel wants it on both), and
 * listen() takes it back. */
static void ptree_listener_stop(int host, bool listening, void *ctx)
{
	struct ptree_listeners *l = ctx;

	if (!listening || l->n == l->max)
		return;
	setsockopt(host, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	if (shutdown(host, SHUT_RD) == 0)
		l->fds[l->n++] = host;
}

int lx_tree_listeners_stop(struct lx_proc *first, int *fds, int max)
{
	struct ptree_listeners l = { .fds = fds, .max = max };

	ptree_streams(first, ptree_listener_stop, &l);
	return l.n;
}

/* A connected TCP socket shut down both ways; *@ctx counts them. */
static void ptree_conn_shutdown(int host, bool listening, void *ctx)
{
	int domain = 0;
	socklen_t len = sizeof(domain);

	if (listening || getsockopt(host, SOL_SOCKET, SO_DOMAIN, &domain, &len) ||
	    (domain != AF_INET && domain != AF_INET6))
		return;
	if (shutdown(host, SHUT_RDWR) == 0)
		(*(int *)ctx)++;
}

int lx_tree_conns_shutdown(struct lx_proc *first)
{
	int n = 0;

	ptree_streams(first, ptree_conn_shutdown, &n);
	return n;
}

void lx_listeners_resume(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (listen(fds[i], SOMAXCONN) < 0)
			log_warn("a guest listening socket could not listen again after a failed "
				 "migration: %s (its port is taken?)", strerror(errno));
}

/* The pid's process in @t (tree->lock held), or NULL. */
static struct lx_proc *ptree_by_pid(struct lx_tree *t, int pid)
{
	for (int i = 0; i < LX_MAX_PROCS; i++)
		if (t->procs[i] && t->procs[i]->pid == pid)
			return t->procs[i];
	return NULL;
}

int lx_tree_restore_add(struct lx_tree *t, struct lx_proc *q, const struct lx_tree_place *at)
{
	int slot, rc = 0;

	pthread_mutex_lock(&t->lock);
	slot = lx_tree_slot(t);
	if (slot < 0 || at->pid < 1 || ptree_by_pid(t, at->pid))
		rc = slot < 0 ? slot : -EINVAL;
	if (!rc) {
		q->pid = at->pid;
		q->tree = t;
		q->ppid = at->ppid;
		q->pgid = at->pgid;
		q->sid = at->sid;
		q->parent = NULL; /* lx_tree_restore_link, once every process is in */
		t->procs[slot] = q;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int lx_tree_restore_zombie(struct lx_tree *t, const struct lx_tree_place *at, int wstatus)
{
	struct lx_proc *z;
	int rc = lx_proc_blank(&z);

	if (rc)
		return rc;
	z->ended = z->released = true;
	z->wstatus = wstatus;
	z->term_sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
	z->exit_status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + z->term_sig;
	rc = lx_tree_restore_add(t, z, at);
	if (rc)
		lx_proc_destroy(z);
	return rc;
}

void lx_tree_restore_link(struct lx_tree *t, int next_id)
{
	pthread_mutex_lock(&t->lock);
	for (int i = 1; i < LX_MAX_PROCS; i++) {
		struct lx_proc *q = t->procs[i];

		if (!q)
			continue;
		/* A parent that is not in the image (it ended first) is the first process,
		 * which adopts orphans. */
		q->parent = ptree_by_pid(t, q->ppid);
		if (!q->parent || q->parent == q) {
			q->parent = t->procs[0];
			q->ppid = t->procs[0]->pid;
		}
		if (q->pid >= next_id)
			next_id = q->pid + 1;
	}
	if (next_id > t->next_id)
		t->next_id = next_id;
	pthread_mutex_unlock(&t->lock);
}

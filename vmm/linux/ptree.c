/*
 * ptree.c - the processes of one VM: fork's copy of a process, who is whose child,
 * the status an ended child leaves for its parent (SIGCHLD; wait4 and waitid are
 * sys_proc.c's), vfork, and kill to other processes. The tree as snapshots and
 * migrations see it is ptree_persist.c's.
 *
 * The first process has the parent, process group and session ccvm itself has, as it
 * always did; its children and theirs get ids from one counter shared with threads, as
 * Linux's pids and tids share one space. A process started from outside (a container
 * runtime's exec) joins the tree with no parent and a session of its own, and is
 * reaped as it ends. A process that ends stays, a zombie with its
 * files closed, until its parent waits for it, unless the parent ignores SIGCHLD; its
 * own children go to the first process, which is what a container's init is to them.
 *
 * Locking: tree->lock guards the relations and is never taken while holding a
 * process's lock. A parent waiting in wait4 sleeps on its own sigcond; an ending child
 * bumps the parent's child_events and then queues SIGCHLD, which broadcasts it.
 * Memory is not this file's: a forked process's address space is the VM's to give
 * (docs/processes.md).
 */
#include "ptree.h"
#include "call.h"
#include "fdtable.h"
#include "lx.h"
#include "path.h"
#include "proc.h"
#include "shm.h"
#include "signal.h"
#include "signalfd.h"
#include "../../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int lx_tree_init(struct lx_tree *t, struct lx_proc *first, int max)
{
	memset(t, 0, sizeof(*t));
	if (max < 1 || max > LX_MAX_PROCS)
		return -EINVAL;
	pthread_mutex_init(&t->lock, NULL);
	t->max = max;
	t->procs[0] = first;
	t->next_id = first->next_tid;
	first->tree = t;
	first->parent = NULL;
	first->ppid = getppid();
	first->pgid = getpgrp();
	first->sid = getsid(0);
	return 0;
}

void lx_tree_fini(struct lx_tree *t)
{
	/* Past the VM's end no thread runs: every process but the first (the VM's to
	 * destroy) is the tree's to free, zombies nobody waited for and children the first
	 * process's end left running alike. */
	for (int i = 1; i < LX_MAX_PROCS; i++)
		if (t->procs[i])
			lx_proc_destroy(t->procs[i]);
	for (int i = 0; i < LX_MAX_PROCS; i++)
		if (t->procs[i])
			t->procs[i]->tree = NULL;
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

int lx_new_id(struct lx_proc *p)
{
	struct lx_tree *t = p->tree;
	int id;

	if (!t)
		return __atomic_fetch_add(&p->next_tid, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&t->lock);
	id = t->next_id++;
	pthread_mutex_unlock(&t->lock);
	/* A snapshot saves next_tid as the first id no thread of @p has. */
	for (int cur = __atomic_load_n(&p->next_tid, __ATOMIC_RELAXED); cur <= id;)
		if (__atomic_compare_exchange_n(&p->next_tid, &cur, id + 1, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			break;
	return id;
}

int lx_tree_count(struct lx_tree *t)
{
	int n = 0;

	if (!t->max)
		return 1; /* no tree (before the VM starts): its one process */
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < LX_MAX_PROCS; i++)
		n += t->procs[i] != NULL;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* A free slot for a new process, or -EAGAIN past --max-procs (tree->lock held). */
int lx_tree_slot(struct lx_tree *t)
{
	int n = 0, free_slot = -1;

	for (int i = 0; i < LX_MAX_PROCS; i++) {
		if (t->procs[i])
			n++;
		else if (free_slot < 0)
			free_slot = i;
	}
	return n >= t->max || free_slot < 0 ? -EAGAIN : free_slot;
}

/* What every new process takes from the one it comes from, @from (from->lock held):
 * its memory until it gets its own, hooks, seccomp profile, network rules, clock,
 * limits. */
static void ptree_inherit(struct lx_proc *from, struct lx_proc *c)
{
	c->mem = from->mem;
	c->hooks = from->hooks;
	c->filter = from->filter;
	c->net = from->net;
	c->clock = from->clock;
	memcpy(c->rlim, from->rlim, sizeof(c->rlim));
}

/* The parts of @parent a child inherits, copied into @c (parent->lock held). */
static int ptree_copy(struct lx_proc *parent, struct lx_proc *c)
{
	int rc;

	ptree_inherit(parent, c);
	memcpy(c->exe, parent->exe, sizeof(c->exe));
	memcpy(c->comm, parent->comm, sizeof(c->comm));
	memcpy(c->sigact, parent->sigact, sizeof(c->sigact));
	c->mm = parent->mm;
	rc = vma_map_copy(&c->mm.map, &parent->mm.map);
	if (!rc)
		rc = lx_fs_copy(&c->fs, &parent->fs);
	if (!rc)
		rc = lx_fd_fork(parent, c, lx_sigfd_fork_dup);
	if (rc || !parent->n_mfiles)
		return rc;
	c->mfiles = calloc((size_t)parent->n_mfiles, sizeof(*c->mfiles));
	c->mfile_paths = calloc((size_t)parent->n_mfiles, sizeof(*c->mfile_paths));
	if (!c->mfiles || !c->mfile_paths)
		return -ENOMEM;
	for (int i = 0; i < parent->n_mfiles; i++) {
		c->mfiles[i] = parent->mfiles[i] < 0 ? -1 :
			       fcntl(parent->mfiles[i], F_DUPFD_CLOEXEC, 3);
		c->n_mfiles++;
		if (parent->mfiles[i] >= 0 && c->mfiles[i] < 0)
			return -errno;
		if (parent->mfile_paths[i] &&
		    !(c->mfile_paths[i] = strdup(parent->mfile_paths[i])))
			return -ENOMEM;
	}
	return 0;
}

void lx_proc_destroy(struct lx_proc *p)
{
	if (!p)
		return;
	lx_tree_forget(p);
	lx_proc_free(p);
}

/* @c into tree @t with a new pid, its first thread's id the same, as @parent's child
 * (NULL: a process from outside, in a session of its own); tree->lock not held. 0, or
 * -EAGAIN past --max-procs, said once. */
static int ptree_insert(struct lx_tree *t, struct lx_proc *c, struct lx_proc *parent)
{
	int slot;

	pthread_mutex_lock(&t->lock);
	slot = lx_tree_slot(t);
	if (slot < 0) {
		pthread_mutex_unlock(&t->lock);
		if (!__atomic_exchange_n(&t->cap_logged, true, __ATOMIC_RELAXED))
			log_warn("process refused: the guest already has %d processes (those not "
				 "yet waited for included), the most --max-procs %d allows (fork "
				 "returns EAGAIN)", t->max, t->max);
		return slot;
	}
	c->pid = t->next_id++;
	c->next_tid = c->pid + 1;
	c->sigthr[0].tid = c->pid;
	c->tree = t;
	c->parent = parent;
	c->ppid = parent ? parent->pid : 0;
	c->pgid = parent ? parent->pgid : c->pid;
	c->sid = parent ? parent->sid : c->pid;
	t->procs[slot] = c;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int lx_proc_fork(struct lx_proc *parent, struct lx_proc **out)
{
	struct lx_tree *t = parent->tree;
	struct lx_proc *c;
	int rc;

	if (!t)
		return -ENOSYS;
	rc = lx_proc_blank(&c);
	if (rc)
		return rc;
	pthread_mutex_lock(&parent->lock);
	rc = ptree_copy(parent, c);
	pthread_mutex_unlock(&parent->lock);
	if (!rc)
		rc = ptree_insert(t, c, parent);
	if (rc)
		goto err;
	*out = c;
	return 0;
err:
	lx_proc_destroy(c);
	return rc;
}

/* What a process started from outside takes from the first process @init
 * (init->lock held). Its memory map is empty: the program it runs is loaded later. */
static int ptree_spawn_copy(struct lx_proc *init, struct lx_proc *c)
{
	ptree_inherit(init, c);
	c->fastio_wanted = init->fastio_wanted;
	return lx_fs_copy(&c->fs, &init->fs);
}

/* Descriptors 0, 1 and 2 of @c: copies of host descriptors @fds. */
static int ptree_spawn_fds(struct lx_proc *c, const int fds[3])
{
	int rc = lx_fd_init_empty(c);

	for (int fd = 0; !rc && fd < 3; fd++) {
		int host = fcntl(fds[fd], F_DUPFD_CLOEXEC, 3);

		if (host < 0)
			return -errno;
		rc = lx_fd_install_at(c, host, fd, false);
		if (rc < 0)
			close(host);
		else
			rc = 0;
	}
	return rc;
}

int lx_spawn_new(struct lx_proc *init, const char *cwd, const int fds[3], struct lx_proc **out)
{
	struct lx_tree *t = init->tree;
	struct lx_proc *c;
	int rc, dir;

	if (!t)
		return -ENOSYS;
	rc = lx_proc_blank(&c);
	if (rc)
		return rc;
	c->spawned = true;
	pthread_mutex_lock(&init->lock);
	rc = ptree_spawn_copy(init, c);
	pthread_mutex_unlock(&init->lock);
	/* The directory is looked up as the guest would chdir to it: in its root. */
	if (!rc)
		rc = lx_fs_open(NULL, &c->fs, cwd, O_RDONLY | O_DIRECTORY, 0, &dir);
	if (!rc) {
		close(dir);
		rc = lx_fs_set_cwd(&c->fs, cwd);
	}
	if (!rc)
		rc = ptree_spawn_fds(c, fds);
	if (!rc)
		rc = ptree_insert(t, c, NULL);
	if (rc) {
		lx_proc_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Does @parent want no zombies: SIGCHLD ignored, or SA_NOCLDWAIT? */
static bool ptree_autoreap(struct lx_proc *parent)
{
	bool ign;

	pthread_mutex_lock(&parent->lock);
	ign = parent->sigact[SIGCHLD].handler == (uint64_t)(uintptr_t)SIG_IGN ||
	      (parent->sigact[SIGCHLD].flags & SA_NOCLDWAIT);
	pthread_mutex_unlock(&parent->lock);
	return ign;
}

/* The siginfo of SIGCHLD and waitid for a child @pid that ended with @wstatus (0 pid:
 * none yet, all zero). */
siginfo_t lx_tree_child_info(int pid, int wstatus)
{
	siginfo_t info;

	memset(&info, 0, sizeof(info));
	if (!pid)
		return info;
	info.si_signo = SIGCHLD;
	info.si_pid = pid;
	info.si_uid = getuid();
	if (WIFEXITED(wstatus)) {
		info.si_code = CLD_EXITED;
		info.si_status = WEXITSTATUS(wstatus);
	} else {
		info.si_code = WCOREDUMP(wstatus) ? CLD_DUMPED : CLD_KILLED;
		info.si_status = WTERMSIG(wstatus);
	}
	return info;
}

/* SIGCHLD for @parent about a child @pid, which ended with @wstatus. */
static void ptree_sigchld(struct lx_proc *parent, int pid, int wstatus)
{
	siginfo_t info = lx_tree_child_info(pid, wstatus);

	(void)lx_sig_send(parent, 0, &info); /* broadcasts its sigcond, queued or not */
}

/* Remove @p from the tree (tree->lock held). */
void lx_tree_unlink(struct lx_tree *t, struct lx_proc *p)
{
	for (int i = 0; i < LX_MAX_PROCS; i++)
		if (t->procs[i] == p)
			t->procs[i] = NULL;
}

void lx_tree_forget(struct lx_proc *p)
{
	struct lx_tree *t = p->tree;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	lx_tree_unlink(t, p);
	for (int i = 0; i < LX_MAX_PROCS; i++) /* its children lose their parent */
		if (t->procs[i] && t->procs[i]->parent == p)
			t->procs[i]->parent = NULL;
	pthread_mutex_unlock(&t->lock);
	p->tree = NULL;
}

/* @p's children, ended ones too, become the first process's (tree->lock held).
 * Returns true when an ended one came along: the first process has one to wait for. */
static bool ptree_orphans(struct lx_tree *t, struct lx_proc *p)
{
	struct lx_proc *init = t->procs[0];
	bool zombie = false;

	for (int i = 1; i < LX_MAX_PROCS; i++) {
		struct lx_proc *q = t->procs[i];

		if (!q || q->parent != p)
			continue;
		q->parent = init == p ? NULL : init;
		q->ppid = init == p || !init ? 1 : init->pid;
		zombie |= q->ended;
	}
	return zombie && init && init != p;
}

/* One vfork child of @parent no longer runs in its memory: the parent may go on. */
static void ptree_vfork_done(struct lx_proc *parent)
{
	pthread_mutex_lock(&parent->lock);
	parent->vfork_children--;
	pthread_cond_broadcast(&parent->sigcond);
	pthread_mutex_unlock(&parent->lock);
}

void lx_proc_ended(struct lx_proc *p, int wstatus)
{
	struct lx_tree *t = p->tree;
	struct lx_proc *parent, *init, *vfork_parent = p->vfork_parent;
	bool reap, orphan_zombie;
	int pid = p->pid;

	if (!t)
		return;
	lx_proc_release(p);
	pthread_mutex_lock(&t->lock);
	parent = p->parent;
	pthread_mutex_unlock(&t->lock);
	/* One started from outside has nobody here to wait for it. */
	reap = parent ? ptree_autoreap(parent) : p->spawned;
	/* Once a zombie, @p is its parent's to reap at any moment: nothing here touches it
	 * after this, but for freeing it when nobody will wait. */
	pthread_mutex_lock(&t->lock);
	p->wstatus = wstatus;
	orphan_zombie = ptree_orphans(t, p);
	init = t->procs[0];
	parent = p->parent;
	if (reap)
		lx_tree_unlink(t, p);
	p->ended = true;
	p->vfork_parent = NULL;
	pthread_mutex_unlock(&t->lock);
	if (vfork_parent) /* as lx_vfork_release, with @p no longer to be touched */
		ptree_vfork_done(vfork_parent);
	if (orphan_zombie) {
		__atomic_add_fetch(&init->child_events, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&init->lock);
		pthread_cond_broadcast(&init->sigcond);
		pthread_mutex_unlock(&init->lock);
	}
	if (parent) {
		/* Either way a wait4 in the parent looks again: at a zombie, or at no child. */
		__atomic_add_fetch(&parent->child_events, 1, __ATOMIC_RELEASE);
		ptree_sigchld(parent, pid, wstatus);
	}
	if (reap)
		lx_proc_destroy(p);
}

/* ---- vfork ---- */

void lx_vfork_release(struct lx_proc *child)
{
	struct lx_proc *parent = child->vfork_parent;

	if (!parent)
		return;
	child->vfork_parent = NULL;
	ptree_vfork_done(parent);
}

/* The parent sleeps until its vfork children let go of its memory. Signals wait: the
 * child runs on the parent's stack, so the parent must not run before (Linux's vfork
 * waits killably only). */
static void ptree_vfork_wait(struct lx_call *c)
{
	struct lx_proc *p = c->p;

	lx_wait_begin(c);
	pthread_mutex_lock(&p->lock);
	while (p->vfork_children > 0)
		pthread_cond_wait(&p->sigcond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	lx_wait_end(c);
}

/* A child of the calling process (lx_proc_fork), its pid stored at @tid_at in the
 * parent's memory (0: nowhere), and in @cl its first thread: where the call returns,
 * with 0, on @stack (0: the caller's) and the caller's mask and TLS. Its pid, or
 * -errno with nothing left of it. */
static int ptree_child(struct lx_call *c, uint64_t stack, uint64_t tid_at, struct lx_clone *cl,
		       struct lx_proc **child)
{
	int pid, rc = lx_proc_fork(c->p, child);

	if (rc)
		return rc;
	pid = (*child)->pid;
	if (tid_at && lx_copy_out(c, tid_at, &pid, sizeof(pid))) {
		lx_proc_destroy(*child);
		return -EFAULT;
	}
	*cl = (struct lx_clone){ .regs = *c->regs };
	lx_thread_init(*child, &cl->thread, NULL);
	cl->thread.sigmask = c->t->sigmask;
	cl->regs.rax = 0; /* the child's return value */
	if (stack)
		cl->regs.rsp = stack;
	cl->fs_base = c->segs->fs_base;
	cl->gs_base = c->segs->gs_base;
	return pid;
}

int64_t lx_vfork(struct lx_call *c, uint64_t stack, uint64_t tid_at)
{
	struct lx_proc *p = c->p, *child;
	struct lx_clone cl;
	int pid, rc;

	if (!p->tree || !p->hooks || !p->hooks->process_create || !p->hooks->process_space)
		return -ENOSYS;
	pid = ptree_child(c, stack, tid_at, &cl, &child);
	if (pid < 0)
		return pid;
	child->vfork_parent = p;
	pthread_mutex_lock(&p->lock);
	p->vfork_children++;
	pthread_mutex_unlock(&p->lock);
	rc = p->hooks->process_create(c->t->vcpu, &cl, child);
	if (rc) {
		lx_vfork_release(child);
		lx_proc_destroy(child);
		return rc;
	}
	ptree_vfork_wait(c);
	return pid;
}

/* A process of its own with a copy-on-write copy of its parent's memory. */
int64_t lx_fork(struct lx_call *c, const struct lx_fork_req *req)
{
	struct lx_proc *p = c->p, *child;
	struct lx_clone cl;
	int pid, rc;

	if (!p->tree || !p->hooks || !p->hooks->process_fork)
		return -ENOSYS;
	pid = ptree_child(c, req->stack, req->flags & CLONE_PARENT_SETTID ? req->parent_tid : 0,
			  &cl, &child);
	if (pid < 0)
		return pid;
	if (req->flags & CLONE_CHILD_CLEARTID)
		cl.thread.clear_child_tid = req->child_tid;
	if (req->flags & CLONE_CHILD_SETTID)
		cl.child_tid_at = req->child_tid;
	if (req->flags & CLONE_SETTLS)
		cl.fs_base = req->tls;
	rc = p->hooks->process_fork(c->t->vcpu, &cl, child);
	if (rc) {
		lx_proc_destroy(child);
		return rc;
	}
	return pid;
}

int lx_fork_memory(struct lx_proc *child, const struct lx_clone *cl)
{
	int pid = child->pid, rc;

	/* A user address that cannot be written is a block past --mem-total: the child's
	 * copy of it cannot be made, which fork reports as Linux does a lack of memory. */
	if (cl->child_tid_at && gmem_copy_out(child->mem, cl->child_tid_at, &pid, sizeof(pid)))
		return gmem_user_range_ok(child->mem, cl->child_tid_at, sizeof(pid)) ? -ENOMEM :
										       -EFAULT;
	/* The monitor refreshes the parent's clock page in place: the child's is a copy
	 * of its own (mapped now, so that no write of the parent's reaches it later). */
	lx_clock_map(child);
	/* Shared mappings, over the child's copy of their blocks (vm_process_fork). */
	lx_shm_lock();
	rc = lx_shm_map_all(child);
	lx_shm_unlock();
	return rc ? rc : lx_fastio_fork(child, child->parent);
}

/* ---- kill ---- */

int lx_tree_kill(struct lx_proc *p, int pid, const siginfo_t *info)
{
	struct lx_tree *t = p->tree;
	int n = 0, self = 0, group = pid == 0 ? p->pgid : -pid;

	if (pid == INT32_MIN)
		return -ESRCH;
	/* Under the tree's lock (a process's lock may be taken inside it): no target can
	 * be reaped and freed meanwhile. Signal 0 only asks whether they exist. */
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < LX_MAX_PROCS; i++) {
		struct lx_proc *q = t->procs[i];

		if (!q || q->ended ||
		    !(pid > 0 ? q->pid == pid : pid == -1 ? i != 0 : q->pgid == group))
			continue;
		if (q == p) {
			self = 1;
			continue;
		}
		n++;
		if (info->si_signo)
			(void)lx_sig_send(q, 0, info);
	}
	pthread_mutex_unlock(&t->lock);
	return self ? 1 : n ? 0 : -ESRCH;
}

/*
 * sys_proc.c - the process calls on the tree: wait4 and waitid (a parent takes an
 * ended child's status, or waits for one), and the ids of processes, groups and
 * sessions (getppid, getpgid, getsid, getpgrp, setpgid, setsid).
 *
 * The tree is ptree.c's: under tree->lock, never taken while holding a process's
 * lock. A parent waiting in wait4 sleeps on its own sigcond; an ending child bumps the
 * parent's child_events and then queues SIGCHLD, which broadcasts it.
 */
#include "sys.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PTREE_WAIT4_OPTS (WNOHANG | WUNTRACED | WCONTINUED | __WNOTHREAD | __WCLONE | __WALL)

#define PTREE_WAITID_OPTS (WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT | \
			   __WNOTHREAD | __WCLONE | __WALL)

enum ptree_who { PT_PID, PT_PGID, PT_ANY };

struct ptree_want {
	enum ptree_who who;
	int id;
	bool nohang, nowait;
};

static bool ptree_match(const struct lx_proc *q, const struct ptree_want *w)
{
	switch (w->who) {
	case PT_PID:
		return q->pid == w->id;
	case PT_PGID:
		return q->pgid == w->id;
	default:
		return true;
	}
}

/* An ended child of @p that @w wants: reaped (taken out of the tree, its pid and
 * status in *@pid, *@wstatus) unless @w->nowait. 1 found, 0 only live ones match,
 * -ECHILD none matches. */
static int ptree_find(struct lx_proc *p, const struct ptree_want *w, int *pid, int *wstatus)
{
	struct lx_tree *t = p->tree;
	struct lx_proc *found = NULL;
	bool any = false;

	if (!t)
		return -ECHILD;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < LX_MAX_PROCS && !found; i++) {
		struct lx_proc *q = t->procs[i];

		if (!q || q->parent != p || !ptree_match(q, w))
			continue;
		any = true;
		if (q->ended)
			found = q;
	}
	if (found) {
		*pid = found->pid;
		*wstatus = found->wstatus;
		if (!w->nowait)
			lx_tree_unlink(t, found);
	}
	pthread_mutex_unlock(&t->lock);
	if (found && !w->nowait)
		lx_proc_destroy(found);
	return found ? 1 : any ? 0 : -ECHILD;
}

/* Wait as @w says: 0 with *@pid 0 (WNOHANG, none ended yet), 0 with the child's pid
 * and status, or -errno (-ECHILD, a restart code when a signal came first). */
static int ptree_wait(struct lx_call *c, const struct ptree_want *w, int *pid, int *wstatus)
{
	struct lx_proc *p = c->p;

	for (;;) {
		uint64_t seen = __atomic_load_n(&p->child_events, __ATOMIC_ACQUIRE);
		int rc = ptree_find(p, w, pid, wstatus);

		if (rc)
			return rc < 0 ? rc : 0;
		if (w->nohang) {
			*pid = 0;
			return 0;
		}
		rc = lx_sig_wait_event(c, &p->child_events, seen, LX_ERESTARTSYS);
		if (rc)
			return rc;
	}
}

/* A zeroed struct rusage at @uaddr when asked for: ccvm does not account a child's
 * time apart from the VM's. */
static int ptree_rusage(struct lx_call *c, uint64_t uaddr)
{
	struct rusage ru;

	if (!uaddr)
		return 0;
	memset(&ru, 0, sizeof(ru));
	return lx_copy_out(c, uaddr, &ru, sizeof(ru));
}

int64_t sys_wait4(struct lx_call *c)
{
	int upid = (int)c->a[0]; /* a pid_t: libc leaves the register's upper half as it is */
	struct ptree_want w = { .nohang = c->a[2] & WNOHANG };
	int pid = 0, wstatus = 0, rc;

	if ((uint32_t)c->a[2] & ~(uint32_t)PTREE_WAIT4_OPTS || upid == INT32_MIN)
		return -EINVAL;
	if (upid > 0)
		w = (struct ptree_want){ PT_PID, upid, w.nohang, false };
	else if (upid == 0)
		w = (struct ptree_want){ PT_PGID, c->p->pgid, w.nohang, false };
	else if (upid < -1)
		w = (struct ptree_want){ PT_PGID, -upid, w.nohang, false };
	else
		w.who = PT_ANY;
	rc = ptree_wait(c, &w, &pid, &wstatus);
	if (rc)
		return rc;
	if (pid && c->a[1] && lx_copy_out(c, c->a[1], &wstatus, sizeof(wstatus)))
		return -EFAULT;
	if (pid && ptree_rusage(c, c->a[3]))
		return -EFAULT;
	return pid;
}

int64_t sys_waitid(struct lx_call *c)
{
	uint64_t opts = (uint32_t)c->a[3];
	struct ptree_want w = { .nohang = opts & WNOHANG, .nowait = opts & WNOWAIT };
	int pid = 0, wstatus = 0, rc;
	siginfo_t info;

	if (opts & ~(uint64_t)PTREE_WAITID_OPTS || !(opts & (WEXITED | WSTOPPED | WCONTINUED)))
		return -EINVAL;
	switch ((int)c->a[0]) {
	case P_ALL:
		w.who = PT_ANY;
		break;
	case P_PID:
	case P_PGID:
		if ((int)c->a[1] < 0 || ((int)c->a[1] == 0 && c->a[0] == P_PID))
			return -EINVAL;
		w.who = c->a[0] == P_PID ? PT_PID : PT_PGID;
		w.id = (int)c->a[1] ? (int)c->a[1] : c->p->pgid;
		break;
	default:
		return -EINVAL; /* P_PIDFD: ccvm offers no pidfds */
	}
	/* Only stops or continues asked for: ccvm never stops a process, so there is
	 * nothing to wait for but whether such a child exists. */
	if (!(opts & WEXITED))
		w.nohang = w.nowait = true;
	rc = ptree_wait(c, &w, &pid, &wstatus);
	if (!(opts & WEXITED))
		pid = 0;
	if (rc)
		return rc;
	info = lx_tree_child_info(pid, wstatus);
	if (c->a[2] && lx_copy_out(c, c->a[2], &info, sizeof(info)))
		return -EFAULT;
	if (ptree_rusage(c, c->a[4]))
		return -EFAULT;
	return 0;
}

/* The process with pid @pid that @p may see (itself, or any in its VM), or NULL
 * (tree->lock held when there is a tree). */
static struct lx_proc *ptree_find_pid(struct lx_proc *p, int pid)
{
	if (!pid || pid == p->pid)
		return p;
	for (int i = 0; p->tree && i < LX_MAX_PROCS; i++)
		if (p->tree->procs[i] && p->tree->procs[i]->pid == pid)
			return p->tree->procs[i];
	return NULL;
}

static void ptree_lock(struct lx_proc *p)
{
	if (p->tree)
		pthread_mutex_lock(&p->tree->lock);
}

static void ptree_unlock(struct lx_proc *p)
{
	if (p->tree)
		pthread_mutex_unlock(&p->tree->lock);
}

int64_t sys_getppid(struct lx_call *c)
{
	int64_t ppid;

	if (!c->p->tree)
		return getppid();
	ptree_lock(c->p);
	ppid = c->p->ppid;
	ptree_unlock(c->p);
	return ppid;
}

/* The group (or session, @sid) of process @pid in the VM (0: the caller): -ESRCH for
 * any other. */
static int64_t ptree_ids(struct lx_call *c, uint64_t pid, bool sid)
{
	struct lx_proc *q;
	int64_t id = -ESRCH;

	if (!c->p->tree)
		return pid && pid != (uint64_t)c->p->pid ? -ESRCH : sid ? getsid(0) : getpgid(0);
	if (pid > INT32_MAX)
		return -ESRCH;
	ptree_lock(c->p);
	q = ptree_find_pid(c->p, (int)pid);
	if (q && !q->ended)
		id = sid ? q->sid : q->pgid;
	ptree_unlock(c->p);
	return id;
}

int64_t sys_getpgid(struct lx_call *c)
{
	return ptree_ids(c, (uint32_t)c->a[0], false);
}

int64_t sys_getsid(struct lx_call *c)
{
	return ptree_ids(c, (uint32_t)c->a[0], true);
}

int64_t sys_getpgrp(struct lx_call *c)
{
	return ptree_ids(c, 0, false);
}

/* setpgid(pid, pgid): the caller or a child of it, in the caller's session, into a
 * group of that session or a new one named after the process. */
int64_t sys_setpgid(struct lx_call *c)
{
	int64_t pid = (int)c->a[0], pgid = (int)c->a[1]; /* pid_t: the registers' low halves */
	struct lx_proc *q;
	int64_t rc = 0;

	if (pid < 0 || pgid < 0 || pid > INT32_MAX || pgid > INT32_MAX)
		return -EINVAL;
	if (!c->p->tree)
		return lx_unsupported(c);
	ptree_lock(c->p);
	q = ptree_find_pid(c->p, (int)pid);
	if (!q || q->ended || (q != c->p && q->parent != c->p))
		rc = -ESRCH;
	else if (q->sid != c->p->sid || q->sid == q->pid)
		rc = -EPERM; /* another session's, or a session leader */
	if (!rc) {
		int want = pgid ? (int)pgid : q->pid;
		bool exists = want == q->pid;

		for (int i = 0; !exists && i < LX_MAX_PROCS; i++) {
			struct lx_proc *o = c->p->tree->procs[i];

			exists = o && !o->ended && o->pgid == want && o->sid == c->p->sid;
		}
		if (exists)
			q->pgid = want;
		else
			rc = -EPERM;
	}
	ptree_unlock(c->p);
	return rc;
}

int64_t sys_setsid(struct lx_call *c)
{
	struct lx_proc *p = c->p;
	int64_t rc;
	bool leader = false;

	if (!p->tree)
		return lx_unsupported(c);
	ptree_lock(p);
	for (int i = 0; i < LX_MAX_PROCS; i++) {
		struct lx_proc *o = p->tree->procs[i];

		leader |= o && !o->ended && o->pgid == p->pid;
	}
	if (leader) {
		rc = -EPERM; /* it leads a group already: a session cannot take it */
	} else {
		p->sid = p->pgid = p->pid;
		rc = p->pid;
	}
	ptree_unlock(p);
	return rc;
}

int64_t sys_execve(struct lx_call *c)
{
	return lx_execve(c);
}

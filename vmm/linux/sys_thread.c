/*
 * sys_thread.c - threads: clone, clone3, set_tid_address, exit and exit_group; vfork
 * and posix_spawn's clone, and fork, handed to ptree.c.
 *
 * A guest thread is a vCPU on its own host thread (the VM makes it through the
 * thread_create hook), so threads run truly in parallel and a thread blocked in a
 * host call blocks only itself. Only what pthread_create asks for is accepted: a new
 * thread sharing memory, files, fs and signal handlers with its creator
 * (CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD), with the TLS and tid
 * word options. vfork, and clone with CLONE_VM | CLONE_VFORK (posix_spawn, python's
 * subprocess), make a child process in the parent's memory until it execs
 * (ptree.c). fork, and clone without CLONE_VM, make a child process whose memory
 * shares its parent's copy-on-write (ptree.c, docs/processes.md); what they cannot
 * offer (a shared descriptor table or working directory without shared memory, a
 * vfork with a copy) answers ENOSYS with a log line, as a kernel without the
 * feature would (glibc then tries clone where it tried clone3). A thread's exit clears and wakes its
 * tid word (what pthread_join sleeps on) and releases the robust locks it held, as
 * Linux does; the last thread's exit, or exit_group, ends its process, and the first
 * process's ends the VM.
 */
#include "sys.h"
#include "../../base/log.h"

#include <sched.h>
#include <signal.h>
#include <string.h>

/* What makes a clone a thread, and what else a thread's creator may ask for. */
#define LX_CLONE_THREAD (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD)
#define LX_CLONE_OPTIONS                                                                  \
	(CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID |        \
	 CLONE_CHILD_SETTID | CLONE_DETACHED)
#define LX_CLONE_CSIGNAL 0xff /* legacy clone: the exit signal, meaningless for threads */

/* struct clone_args (linux/sched.h) as clone3 reads it: the first version's 64 bytes
 * and the later fields, which must be unused here. */
struct lx_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size, cgroup;
};

#define LX_CLONE_ARGS_SIZE_VER0 64
#define LX_CLONE_ARGS_MAX 4096 /* Linux refuses larger clone_args (PAGE_SIZE) */

struct lx_clone_req {
	uint64_t flags, stack, parent_tid, child_tid, tls;
};

/* What a fork-like clone (no CLONE_VM) may ask for. */
#define LX_CLONE_FORK_OPTIONS                                                             \
	(CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID |        \
	 CLONE_CHILD_SETTID | CLONE_DETACHED)

static int64_t lx_clone_refuse(struct lx_call *c, uint64_t flags)
{
	if ((flags & LX_CLONE_THREAD) == LX_CLONE_THREAD)
		return -EINVAL;
	if (lx_first_time(c))
		log_warn("guest called %s with flags %#llx: ccvm makes threads, vfork children "
			 "and fork children (a copy of the memory, files and working directory); "
			 "not this mix, returning ENOSYS (libc then tries clone)",
			 lx_syscall_name((unsigned)c->nr), (unsigned long long)flags);
	return -ENOSYS;
}

/* Write the new thread's id where CLONE_PARENT_SETTID / CLONE_CHILD_SETTID ask: before
 * the thread runs, as Linux does (glibc's thread descriptor reads it). */
static int lx_clone_store_tid(struct lx_call *c, uint64_t gva, int tid)
{
	int32_t *w = lx_uptr(c, gva, sizeof(*w));

	if (!w)
		return -EFAULT;
	__atomic_store_n(w, tid, __ATOMIC_RELEASE);
	return 0;
}

/* What vfork and posix_spawn's clone ask for: a process in the parent's memory, the
 * parent waiting (CLONE_VFORK), a child's exit signal in the low byte. */
#define LX_CLONE_VFORK (CLONE_VM | CLONE_VFORK)

static int64_t lx_clone(struct lx_call *c, const struct lx_clone_req *req)
{
	struct lx_clone cl = { .regs = *c->regs };
	struct lx_thread *t = &cl.thread;
	int rc;

	if ((req->flags & (LX_CLONE_VFORK | CLONE_THREAD | CLONE_SIGHAND)) == LX_CLONE_VFORK &&
	    !(req->flags & ~(uint64_t)(LX_CLONE_VFORK | CLONE_PARENT_SETTID)))
		return lx_vfork(c, req->stack, req->flags & CLONE_PARENT_SETTID ? req->parent_tid : 0);
	if (!(req->flags & ~(uint64_t)LX_CLONE_FORK_OPTIONS))
		return lx_fork(c, &(struct lx_fork_req){ .flags = req->flags, .stack = req->stack,
							 .parent_tid = req->parent_tid,
							 .child_tid = req->child_tid, .tls = req->tls });
	if ((req->flags & LX_CLONE_THREAD) != LX_CLONE_THREAD ||
	    (req->flags & ~(uint64_t)(LX_CLONE_THREAD | LX_CLONE_OPTIONS)))
		return lx_clone_refuse(c, req->flags);
	if (!c->p->hooks || !c->p->hooks->thread_create)
		return -ENOSYS;
	lx_thread_init(c->p, t, NULL);
	t->tid = lx_new_id(c->p);
	t->sigmask = c->t->sigmask;
	if (req->flags & CLONE_CHILD_CLEARTID)
		t->clear_child_tid = req->child_tid;
	rc = 0;
	if (req->flags & CLONE_PARENT_SETTID)
		rc = lx_clone_store_tid(c, req->parent_tid, t->tid);
	if (!rc && req->flags & CLONE_CHILD_SETTID)
		rc = lx_clone_store_tid(c, req->child_tid, t->tid);
	if (rc)
		return rc;
	cl.regs.rax = 0; /* the child's return value */
	if (req->stack)
		cl.regs.rsp = req->stack;
	cl.fs_base = req->flags & CLONE_SETTLS ? req->tls : c->segs->fs_base;
	cl.gs_base = c->segs->gs_base;
	rc = lx_sig_thread_add(c->p, t->tid);
	if (rc)
		return rc;
	rc = c->p->hooks->thread_create(c->t->vcpu, &cl);
	if (rc)
		lx_sig_thread_remove(c->p, t->tid);
	return rc ? rc : t->tid;
}

int64_t sys_clone(struct lx_call *c)
{
	/* x86-64 order: flags, stack, parent_tid, child_tid, tls. */
	struct lx_clone_req req = { .flags = c->a[0] & ~(uint64_t)LX_CLONE_CSIGNAL,
				    .stack = c->a[1], .parent_tid = c->a[2],
				    .child_tid = c->a[3], .tls = c->a[4] };

	return lx_clone(c, &req);
}

int64_t sys_clone3(struct lx_call *c)
{
	struct lx_clone_args args = { 0 };
	uint64_t size = c->a[1];
	uint8_t u[LX_CLONE_ARGS_MAX];

	if (size < LX_CLONE_ARGS_SIZE_VER0)
		return -EINVAL;
	if (size > sizeof(u))
		return -E2BIG;
	if (lx_copy_in(c, u, c->a[0], size))
		return -EFAULT;
	/* A newer libc's extra fields are fine while zero (Linux' rule for growing structs). */
	for (uint64_t i = sizeof(args); i < size; i++)
		if (u[i])
			return -E2BIG;
	memcpy(&args, u, size < sizeof(args) ? size : sizeof(args));
	/* pidfd is read only with CLONE_PIDFD (refused): glibc leaves it uninitialised. */
	/* A child process may name its exit signal (SIGCHLD is what its parent gets);
	 * a thread may not. */
	if ((args.exit_signal && (args.flags & CLONE_THREAD)) || args.exit_signal > LX_CLONE_CSIGNAL ||
	    args.set_tid || args.set_tid_size ||
	    (args.stack && !args.stack_size) || (!args.stack && args.stack_size))
		return (args.flags & LX_CLONE_THREAD) == LX_CLONE_THREAD ?
			       -EINVAL :
			       lx_clone_refuse(c, args.flags);
	return lx_clone(c, &(struct lx_clone_req){ .flags = args.flags,
						   .stack = args.stack + args.stack_size,
						   .parent_tid = args.parent_tid,
						   .child_tid = args.child_tid, .tls = args.tls });
}

int64_t sys_fork(struct lx_call *c)
{
	return lx_fork(c, &(struct lx_fork_req){ 0 });
}

int64_t sys_vfork(struct lx_call *c)
{
	return lx_vfork(c, 0, 0);
}

int64_t sys_set_tid_address(struct lx_call *c)
{
	c->t->clear_child_tid = c->a[0];
	return c->t->tid;
}

int64_t sys_exit(struct lx_call *c)
{
	/* The thread ends; the VM ends with the last one (vmm/threads.c), with this status. */
	c->p->exit_status = (int)(c->a[0] & 0xff);
	lx_futex_exit_robust(c->p, c->t->robust_list, c->t->tid);
	lx_futex_clear_tid(c->p, c->t->clear_child_tid);
	lx_sig_thread_remove(c->p, c->t->tid);
	c->action = LX_EXIT_THREAD;
	return 0;
}

int64_t sys_exit_group(struct lx_call *c)
{
	c->p->exit_status = (int)(c->a[0] & 0xff);
	c->action = LX_EXIT_GROUP;
	return 0;
}

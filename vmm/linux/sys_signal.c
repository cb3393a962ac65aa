/*
 * sys_signal.c - the signal system calls: their arguments read once and decoded, then
 * the signal objects called (signal.c: queues, masks, waits; sigframe.c: frames,
 * rt_sigreturn, sigaltstack; signalfd.c; ptree.c for kill to other processes).
 *
 * kill, tgkill, tkill and the sigqueueinfo calls send; rt_sigaction, rt_sigprocmask
 * and rt_sigpending read and change a process's or thread's signal state; pause,
 * rt_sigsuspend and rt_sigtimedwait wait for one. Without delivery (a VM that gives no
 * FPU hooks), a signal the guest sends itself takes its default action.
 */
#include "sys.h"
#include "../../base/log.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#define LX_NSEC_PER_SEC 1000000000LL

/* Without delivery, a signal the guest sends itself takes its default action: one
 * that is ignored or harmless does nothing, one that is fatal ends the VM as it would
 * end the process. */
static int64_t lx_sig_default_self(struct lx_call *c, int sig)
{
	uint64_t handler;

	pthread_mutex_lock(&c->p->lock);
	handler = c->p->sigact[sig].handler;
	pthread_mutex_unlock(&c->p->lock);
	if (handler == (uint64_t)(uintptr_t)SIG_IGN && sig != SIGKILL)
		return 0;
	if (handler != (uint64_t)(uintptr_t)SIG_DFL && sig != SIGKILL)
		log_warn("guest sent itself signal %d, which has a handler; signal delivery "
			 "is not supported yet, so the default action is taken", sig);
	if (!lx_sig_kills(sig))
		return 0;
	c->p->exit_status = 128 + sig;
	c->p->term_sig = sig;
	c->action = LX_EXIT_GROUP;
	return 0;
}

/* Send @info to the process (@tid 0) or thread @tid, from the guest itself. */
static int64_t lx_sig_send_own(struct lx_call *c, int tid, siginfo_t *info)
{
	int sig = info->si_signo;
	bool on = lx_sig_on(c->p);

	if (sig < 0 || sig > LX_NSIG)
		return -EINVAL;
	if (tid && tid != c->t->tid && !(on && lx_sig_thread_known(c->p, tid)))
		return -ESRCH;
	if (sig == 0) /* only asks whether the target exists */
		return 0;
	return on ? lx_sig_send(c->p, tid, info) : lx_sig_default_self(c, sig);
}

int64_t sys_kill(struct lx_call *c)
{
	int pid = (int)c->a[0]; /* a pid_t: the register's low half */
	siginfo_t info = lx_sig_user_info(c, (int)c->a[1], SI_USER);
	int64_t rc;

	if (pid == c->p->pid || (!c->p->tree && (pid == 0 || pid == -1)))
		return lx_sig_send_own(c, 0, &info);
	if (info.si_signo < 0 || info.si_signo > LX_NSIG)
		return -EINVAL;
	/* Another process of the VM, a group, or all of them (ptree.c); itself last, so
	 * that a signal that ends it does so as the call returns. */
	rc = lx_tree_kill(c->p, pid, &info);
	if (rc == 1)
		return lx_sig_send_own(c, 0, &info);
	return rc;
}

int64_t sys_tgkill(struct lx_call *c)
{
	siginfo_t info = lx_sig_user_info(c, (int)c->a[2], SI_TKILL);

	if ((int64_t)c->a[0] <= 0 || (int64_t)c->a[1] <= 0 || c->a[1] > INT32_MAX)
		return -EINVAL;
	if ((int64_t)c->a[0] != c->p->pid)
		return -ESRCH;
	return lx_sig_send_own(c, (int)c->a[1], &info);
}

int64_t sys_tkill(struct lx_call *c)
{
	siginfo_t info = lx_sig_user_info(c, (int)c->a[1], SI_TKILL);

	if ((int64_t)c->a[0] <= 0 || c->a[0] > INT32_MAX)
		return -EINVAL;
	return lx_sig_send_own(c, (int)c->a[0], &info);
}

/* rt_sigqueueinfo and rt_tgsigqueueinfo: the guest's own siginfo, read once. Linux
 * refuses a code that poses as the kernel's or kill's only towards another process,
 * and the guest has none. */
static int64_t lx_sig_queueinfo(struct lx_call *c, int tid, uint64_t sig, uint64_t uinfo)
{
	siginfo_t info;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	if (lx_copy_in(c, &info, uinfo, sizeof(info)))
		return -EFAULT;
	if (sig > LX_NSIG)
		return -EINVAL;
	info.si_signo = (int)sig;
	return lx_sig_send_own(c, tid, &info);
}

int64_t sys_rt_sigqueueinfo(struct lx_call *c)
{
	if ((int64_t)c->a[0] != c->p->pid)
		return -ESRCH;
	return lx_sig_queueinfo(c, 0, c->a[1], c->a[2]);
}

int64_t sys_rt_tgsigqueueinfo(struct lx_call *c)
{
	if ((int64_t)c->a[0] <= 0 || (int64_t)c->a[1] <= 0 || c->a[1] > INT32_MAX)
		return -EINVAL;
	if ((int64_t)c->a[0] != c->p->pid)
		return -ESRCH;
	return lx_sig_queueinfo(c, (int)c->a[1], c->a[2], c->a[3]);
}

int64_t sys_rt_sigaction(struct lx_call *c)
{
	uint64_t sig = c->a[0];
	struct lx_sigaction act, old;

	if (c->a[3] != LX_SIGSET_SIZE)
		return -EINVAL;
	if (sig < 1 || sig > LX_NSIG)
		return -EINVAL;
	if (c->a[1] && lx_copy_in(c, &act, c->a[1], sizeof(act)))
		return -EFAULT;
	if (c->a[2] && !gmem_user_range_ok(c->p->mem, c->a[2], sizeof(old)))
		return -EFAULT;
	if (c->a[1] && (sig == SIGKILL || sig == SIGSTOP))
		return -EINVAL;
	pthread_mutex_lock(&c->p->lock);
	old = c->p->sigact[sig];
	if (c->a[1])
		c->p->sigact[sig] = act;
	pthread_mutex_unlock(&c->p->lock);
	return c->a[2] ? lx_copy_out(c, c->a[2], &old, sizeof(old)) : 0;
}

int64_t sys_rt_sigprocmask(struct lx_call *c)
{
	uint64_t set, old = c->t->sigmask, mask;

	if (c->a[3] != LX_SIGSET_SIZE)
		return -EINVAL;
	if (c->a[1] && lx_copy_in(c, &set, c->a[1], sizeof(set)))
		return -EFAULT;
	if (c->a[1]) {
		switch (c->a[0]) {
		case SIG_BLOCK:
			mask = old | set;
			break;
		case SIG_UNBLOCK:
			mask = old & ~set;
			break;
		case SIG_SETMASK:
			mask = set;
			break;
		default:
			return -EINVAL;
		}
		lx_sig_set_mask(c->t, mask);
	}
	return c->a[2] ? lx_copy_out(c, c->a[2], &old, sizeof(old)) : 0;
}

int64_t sys_rt_sigpending(struct lx_call *c)
{
	uint64_t set;

	if (c->a[1] > LX_SIGSET_SIZE)
		return -EINVAL;
	pthread_mutex_lock(&c->p->lock);
	set = lx_sig_pending(c->t, c->t->sigmask);
	pthread_mutex_unlock(&c->p->lock);
	return lx_copy_out(c, c->a[0], &set, c->a[1]);
}

int64_t sys_pause(struct lx_call *c)
{
	if (!lx_sig_on(c->p)) {
		/* Nothing can wake it: the thread sleeps until the VM ends, its vCPU
		 * blocked (pauses and snapshots go ahead; a restored one pauses again). */
		lx_wait_begin(c);
		for (;;) {
			struct timespec hour = { .tv_sec = 3600 };

			nanosleep(&hour, NULL);
		}
	}
	lx_sig_wait(c, lx_sig_allowed(c->t), NULL);
	return -EINTR; /* the signal is taken as the call returns */
}

int64_t sys_rt_sigsuspend(struct lx_call *c)
{
	struct lx_thread *t = c->t;
	uint64_t mask;
	int rc;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	rc = lx_sigset_in(c, c->a[0], c->a[1], &mask);
	if (rc)
		return rc;
	t->saved_mask = t->sigmask;
	t->restore_mask = true;
	lx_sig_set_mask(t, mask);
	lx_sig_wait(c, lx_sig_allowed(t), NULL);
	return -EINTR;
}

/* A relative timeout as host monotonic time in @until; NULL when there is none. */
static int lx_sig_deadline(struct lx_call *c, uint64_t uts, struct timespec *until,
			   struct timespec **out)
{
	int64_t ns, now;
	int rc;

	*out = NULL;
	if (!uts)
		return 0;
	rc = lx_read_timespec(c, uts, &ns);
	if (rc)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, until);
	now = (int64_t)until->tv_sec * LX_NSEC_PER_SEC + until->tv_nsec;
	ns = ns > INT64_MAX / 2 - now ? INT64_MAX / 2 : now + ns;
	until->tv_sec = ns / LX_NSEC_PER_SEC;
	until->tv_nsec = ns % LX_NSEC_PER_SEC;
	*out = until;
	return 0;
}

int64_t sys_rt_sigtimedwait(struct lx_call *c)
{
	struct lx_thread *t = c->t;
	struct timespec until, *end;
	uint64_t set;
	siginfo_t info;
	int sig, rc;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	rc = lx_sigset_in(c, c->a[0], c->a[3], &set);
	if (!rc)
		rc = lx_sig_deadline(c, c->a[2], &until, &end);
	if (rc)
		return rc;
	set &= ~LX_SIG_UNBLOCKABLE;
	/* Woken by a signal of the set, or by one its handler takes (EINTR). */
	rc = lx_sig_wait(c, set | lx_sig_allowed(t), end);
	pthread_mutex_lock(&c->p->lock);
	sig = lx_sig_take(t, set, &info);
	pthread_mutex_unlock(&c->p->lock);
	if (!sig)
		return rc ? -EAGAIN : -EINTR;
	if (c->a[1] && lx_copy_out(c, c->a[1], &info, sizeof(info)))
		return -EFAULT;
	return sig;
}

int64_t sys_rt_sigreturn(struct lx_call *c)
{
	return lx_sig_return(c);
}

int64_t sys_sigaltstack(struct lx_call *c)
{
	return lx_sig_altstack(c);
}

int64_t sys_signalfd4(struct lx_call *c)
{
	return lx_signalfd(c, (int64_t)c->a[0], c->a[1], c->a[2], c->a[3]);
}

int64_t sys_signalfd(struct lx_call *c)
{
	return lx_signalfd(c, (int64_t)c->a[0], c->a[1], c->a[2], 0);
}

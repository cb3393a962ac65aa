/*
 * signal.c - the signal state of a process and its threads: queues, masks, sending,
 * taking, and waiting for one, as Linux does on x86-64.
 *
 * A signal is queued on the process (kill, rt_sigqueueinfo, a timer) or on one thread
 * (tgkill, tkill, rt_tgsigqueueinfo, SIGPIPE, a fault). A thread takes them in Linux's
 * order (the synchronous ones first, then the lowest number; the thread's own before
 * the process'); delivery, which runs as it returns to the program, is sigframe.c's.
 * A sender kicks the thread that is to take the signal out of a host call it blocks
 * in; the call ends with Linux's restart codes. The waits of pause, sigsuspend,
 * sigtimedwait and the masks of ppoll and the like are here; their calls are
 * sys_signal.c's. The objects built on signals (timers, signalfds) are told of changes
 * through p->sigwatch, never called from here.
 *
 * Delivery needs the vCPU's FPU state, so it is on only when the VM gives the fpu
 * hooks (lx.h); without them a signal the guest sends itself takes its default
 * action, as before signals were delivered.
 */
#include "signal.h"
#include "call.h"
#include "../../base/log.h"
#include "../../base/x86.h"

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LX_SIGEV_THREAD_ID  4
#define LX_SIGRTMIN         32
/* Faults raise these; Linux takes them before any other pending signal. */
#define LX_SIG_SYNC                                                                        \
	(LX_SIG_BIT(SIGSEGV) | LX_SIG_BIT(SIGBUS) | LX_SIG_BIT(SIGILL) | LX_SIG_BIT(SIGTRAP) | \
	 LX_SIG_BIT(SIGFPE) | LX_SIG_BIT(SIGSYS))

bool lx_sig_on(const struct lx_proc *p)
{
	return p->hooks && p->hooks->fpu_save && p->hooks->fpu_load;
}

int lx_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t a;
	int rc;

	/* Waits time out on the monotonic clock: a change of the wall clock must not
	 * cut a sigtimedwait short or make it last. */
	if (pthread_condattr_init(&a))
		return -ENOMEM;
	rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cond, &a);
	pthread_condattr_destroy(&a);
	return -rc;
}

int lx_sig_init(struct lx_proc *p)
{
	return lx_cond_init_monotonic(&p->sigcond);
}

void lx_sig_fini(struct lx_proc *p)
{
	pthread_cond_destroy(&p->sigcond);
}

/* The pending signals changed: whoever watches them is told (p->lock held). */
static void lx_sig_changed(struct lx_proc *p)
{
	if (p->sigwatch.pending)
		p->sigwatch.pending(p);
}

/* Default action of @sig ends the process (with or without a core); the others are
 * ignored, and stopping is ignored too: there is nothing to stop a VM for here. */
bool lx_sig_kills(int sig)
{
	switch (sig) {
	case SIGCHLD:
	case SIGCONT:
	case SIGURG:
	case SIGWINCH:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
		return false;
	default:
		return sig >= 1 && sig <= LX_NSIG;
	}
}

/* ---- queues (p->lock held) ---- */

static struct lx_sigthread *lx_sig_thread(struct lx_proc *p, int tid)
{
	for (int i = 0; i < LX_MAX_THREADS; i++)
		if (p->sigthr[i].tid == tid)
			return &p->sigthr[i];
	return NULL;
}

int lx_sig_thread_add(struct lx_proc *p, int tid)
{
	struct lx_sigthread *s;

	pthread_mutex_lock(&p->lock);
	s = tid > 0 ? lx_sig_thread(p, 0) : NULL;
	if (s)
		*s = (struct lx_sigthread){ .tid = tid };
	pthread_mutex_unlock(&p->lock);
	return s ? 0 : -EAGAIN;
}

void lx_sig_thread_remove(struct lx_proc *p, int tid)
{
	struct lx_sigthread *s;

	pthread_mutex_lock(&p->lock);
	s = tid > 0 ? lx_sig_thread(p, tid) : NULL;
	if (s)
		*s = (struct lx_sigthread){ 0 };
	lx_sig_changed(p); /* what was sent to it alone went with it */
	pthread_mutex_unlock(&p->lock);
}

void lx_sig_bind(struct lx_thread *t)
{
	struct lx_proc *p = t->proc;
	struct lx_sigthread *s;

	pthread_mutex_lock(&p->lock);
	s = lx_sig_thread(p, t->tid);
	if (s)
		s->thread = t;
	t->sigslot = s;
	t->sig_bound = true;
	pthread_mutex_unlock(&p->lock);
}

static int lx_sigq_push(struct lx_sigqueue *q, const siginfo_t *info)
{
	int sig = info->si_signo;

	if (sig < LX_SIGRTMIN && (q->set & LX_SIG_BIT(sig)))
		return 0; /* a standard signal already pending is not queued twice */
	if (q->n == LX_SIGQUEUE_MAX)
		return -EAGAIN;
	q->q[q->n++] = *info;
	q->set |= LX_SIG_BIT(sig);
	return 0;
}

/* @info queued on @q of process @p, its signalfds brought up to date. */
static int lx_sig_push(struct lx_proc *p, struct lx_sigqueue *q, const siginfo_t *info)
{
	int rc = lx_sigq_push(q, info);

	if (!rc)
		lx_sig_changed(p);
	return rc;
}

/* The first queued @sig taken out of @q into @info. */
static void lx_sigq_take(struct lx_sigqueue *q, int sig, siginfo_t *info)
{
	bool more = false;
	int i, k;

	for (i = 0; i < q->n && q->q[i].si_signo != sig; i++)
		;
	*info = q->q[i];
	for (k = i + 1; k < q->n; k++) {
		q->q[k - 1] = q->q[k];
		more |= q->q[k].si_signo == sig;
	}
	q->n--;
	if (!more)
		q->set &= ~LX_SIG_BIT(sig);
}

/* Of the signals in @set, the one Linux delivers first. */
static int lx_sig_first(uint64_t set)
{
	uint64_t sync = set & LX_SIG_SYNC;

	if (!set)
		return 0;
	return __builtin_ctzll(sync ? sync : set) + 1;
}

/* Signals in @set pending for thread @t (its own or the process'). */
uint64_t lx_sig_pending(struct lx_thread *t, uint64_t set)
{
	struct lx_sigthread *s = lx_sig_thread(t->proc, t->tid);

	return ((s ? s->pend.set : 0) | t->proc->sigpend.set) & set;
}

/* The signals thread @t takes when it returns to user mode. */
uint64_t lx_sig_allowed(const struct lx_thread *t)
{
	return ~t->sigmask | LX_SIG_UNBLOCKABLE;
}

int lx_sig_take(struct lx_thread *t, uint64_t allowed, siginfo_t *info)
{
	struct lx_proc *p = t->proc;
	struct lx_sigthread *s = lx_sig_thread(p, t->tid);
	int sig = s ? lx_sig_first(s->pend.set & allowed) : 0;

	if (sig)
		lx_sigq_take(&s->pend, sig, info);
	else if ((sig = lx_sig_first(p->sigpend.set & allowed)))
		lx_sigq_take(&p->sigpend, sig, info);
	/* timer_getoverrun tells the overruns of the timer's signal last taken */
	if (sig && info->si_code == SI_TIMER && (unsigned)info->si_timerid < LX_MAX_TIMERS) {
		if (p->sigwatch.timer_taken)
			p->sigwatch.timer_taken(p, info);
		p->timers.t[info->si_timerid].overrun = info->si_overrun;
	}
	if (sig)
		lx_sig_changed(p);
	return sig;
}

/* Is @sig, sent to thread slot @s (NULL: the process), dropped at once? As in Linux:
 * when ignored (explicitly, or by default) and not blocked where it is headed, so a
 * blocked one stays pending for sigtimedwait. */
static bool lx_sig_dropped(struct lx_proc *p, const struct lx_sigthread *s, int sig)
{
	uint64_t h = p->sigact[sig].handler, bit = LX_SIG_BIT(sig);

	if (sig == SIGKILL || !(h == (uint64_t)(uintptr_t)SIG_IGN ||
				(h == (uint64_t)(uintptr_t)SIG_DFL && !lx_sig_kills(sig))))
		return false;
	if (s)
		return !(s->thread && (s->thread->sigmask & bit));
	for (int i = 0; i < LX_MAX_THREADS; i++)
		if (p->sigthr[i].thread && (p->sigthr[i].thread->sigmask & bit))
			return false;
	return true;
}

static void lx_sig_kick(struct lx_proc *p, struct lx_thread *t)
{
	if (p->hooks && p->hooks->signal_kick)
		p->hooks->signal_kick(t->vcpu);
}

/* The thread that is to take @sig, just queued for slot @s (NULL: the process, as
 * Linux picks: the first thread that does not block it): kick it out of the program
 * or of the host call it blocks in; for a host call, have the timer thread watch that
 * it left (p->lock held). A thread that sent it to itself is kicked too: its next
 * run returns at once, a cheap extra turn. */
static void lx_sig_wake(struct lx_proc *p, struct lx_sigthread *s, int sig)
{
	struct lx_thread *t = s ? s->thread : NULL;

	for (int i = 0; !s && !t && i < LX_MAX_THREADS; i++)
		if (p->sigthr[i].thread && !(p->sigthr[i].thread->sigmask & LX_SIG_BIT(sig)))
			t = p->sigthr[i].thread;
	pthread_cond_broadcast(&p->sigcond);
	if (!t || (t->sigmask & LX_SIG_BIT(sig) && sig != SIGKILL) || !p->hooks ||
	    !p->hooks->signal_kick)
		return;
	/* Running the program, or blocked in a host call: out, to take it. */
	lx_sig_kick(p, t);
	if (!__atomic_load_n(&t->in_wait, __ATOMIC_SEQ_CST))
		return;
	p->sig_rekick = true;
	if (p->sigwatch.kicked)
		p->sigwatch.kicked(p);
}

bool lx_sig_rekick(struct lx_proc *p)
{
	bool any = false;

	for (int i = 0; i < LX_MAX_THREADS; i++) {
		struct lx_thread *t = p->sigthr[i].thread;

		if (t && __atomic_load_n(&t->in_wait, __ATOMIC_SEQ_CST) &&
		    lx_sig_pending(t, lx_sig_allowed(t))) {
			lx_sig_kick(p, t);
			any = true;
		}
	}
	p->sig_rekick = any;
	return any;
}

int lx_sig_eintr(struct lx_call *c, int restart)
{
	bool taken;

	if (!lx_sig_on(c->p))
		return 0;
	pthread_mutex_lock(&c->p->lock);
	taken = lx_sig_pending(c->t, lx_sig_allowed(c->t)) != 0;
	pthread_mutex_unlock(&c->p->lock);
	return taken ? -restart : 0;
}

int lx_sig_wait_mask(struct lx_call *c, uint64_t mask)
{
	struct lx_thread *t = c->t;

	if (!lx_sig_on(c->p))
		return 0;
	t->saved_mask = t->sigmask;
	t->restore_mask = true;
	lx_sig_set_mask(t, mask);
	return lx_sig_eintr(c, LX_ERESTARTNOHAND);
}

int lx_sigset_in(struct lx_call *c, uint64_t uaddr, uint64_t size, uint64_t *set)
{
	if (size != LX_SIGSET_SIZE)
		return -EINVAL;
	return lx_copy_in(c, set, uaddr, sizeof(*set)) ? -EFAULT : 0;
}

bool lx_sig_restart_code(int64_t rc)
{
	return rc == -LX_ERESTARTSYS || rc == -LX_ERESTARTNOINTR || rc == -LX_ERESTARTNOHAND ||
	       rc == -LX_ERESTART_RESTARTBLOCK;
}

int lx_sig_send(struct lx_proc *p, int tid, const siginfo_t *info)
{
	struct lx_sigthread *s = NULL;
	int rc = 0;

	if (info->si_signo < 1 || info->si_signo > LX_NSIG)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (tid)
		s = lx_sig_thread(p, tid);
	if (tid && !s)
		rc = -ESRCH;
	else if (!lx_sig_dropped(p, s, info->si_signo))
		rc = lx_sig_push(p, s ? &s->pend : &p->sigpend, info);
	if (!rc)
		lx_sig_wake(p, s, info->si_signo);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* The queued signal of POSIX timer @id, if one is still waiting. */
static siginfo_t *lx_sig_timer_queued(struct lx_proc *p, int id)
{
	struct lx_sigqueue *qs[LX_MAX_THREADS + 1];
	int n = 0;

	qs[n++] = &p->sigpend;
	for (int i = 0; i < LX_MAX_THREADS; i++)
		if (p->sigthr[i].tid)
			qs[n++] = &p->sigthr[i].pend;
	for (int k = 0; k < n; k++)
		for (int i = 0; i < qs[k]->n; i++)
			if (qs[k]->q[i].si_code == SI_TIMER && qs[k]->q[i].si_timerid == id)
				return &qs[k]->q[i];
	return NULL;
}

bool lx_sig_timer_pending(struct lx_proc *p, int id)
{
	return lx_sig_timer_queued(p, id) != NULL;
}

void lx_sig_queue_timer(struct lx_proc *p, int id, int64_t missed)
{
	const struct lx_timer *tm = &p->timers.t[id];
	struct lx_sigthread *s = NULL;
	siginfo_t info = { .si_signo = tm->signo, .si_code = SI_KERNEL }, *q;
	int over = missed > INT32_MAX ? INT32_MAX : (int)missed;

	if (id < LX_MAX_TIMERS) { /* a POSIX timer; ITIMER_REAL's SIGALRM is the kernel's */
		q = lx_sig_timer_queued(p, id);
		if (q) {
			q->si_overrun = q->si_overrun > INT32_MAX - over - 1 ? INT32_MAX :
									       q->si_overrun + over + 1;
			return;
		}
		info.si_code = SI_TIMER;
		info.si_timerid = id;
		info.si_overrun = over;
		info.si_value.sival_ptr = (void *)(uintptr_t)tm->value;
	}
	if (tm->notify == LX_SIGEV_THREAD_ID) {
		s = lx_sig_thread(p, tm->tid);
		if (!s)
			return; /* its thread is gone */
	}
	if (!lx_sig_dropped(p, s, info.si_signo) && !lx_sig_push(p, s ? &s->pend : &p->sigpend, &info))
		lx_sig_wake(p, s, info.si_signo);
}

/* A signal the kernel raises itself (a bad frame): like Linux's force_sig, it is
 * unblocked, and if it is ignored or was being handled when it failed it ends the
 * process by default. When no queue can take it, the process ends at once. */
void lx_sig_force(struct lx_call *c, int sig, bool reset)
{
	struct lx_thread *t = c->t;
	struct lx_proc *p = t->proc;
	siginfo_t info = { .si_signo = sig, .si_code = SI_KERNEL };
	struct lx_sigthread *s;
	int rc;

	pthread_mutex_lock(&p->lock);
	if (reset || p->sigact[sig].handler == (uint64_t)(uintptr_t)SIG_IGN ||
	    (t->sigmask & LX_SIG_BIT(sig)))
		p->sigact[sig].handler = (uint64_t)(uintptr_t)SIG_DFL;
	t->sigmask &= ~LX_SIG_BIT(sig);
	t->restore_mask = false;
	s = lx_sig_thread(p, t->tid);
	rc = s ? lx_sig_push(p, &s->pend, &info) : -ESRCH;
	if (rc)
		rc = lx_sig_push(p, &p->sigpend, &info);
	pthread_mutex_unlock(&p->lock);
	if (rc) {
		p->exit_status = 128 + sig;
		p->term_sig = sig;
		c->action = LX_EXIT_GROUP;
	}
}

int lx_sig_queue_fault(struct lx_thread *t, const siginfo_t *info)
{
	struct lx_proc *p = t->proc;
	struct lx_sigthread *s;
	int sig = info->si_signo, rc;

	/* As force_sig_fault: a fault's signal cannot be blocked or ignored away. */
	pthread_mutex_lock(&p->lock);
	if (p->sigact[sig].handler == (uint64_t)(uintptr_t)SIG_IGN || (t->sigmask & LX_SIG_BIT(sig)))
		p->sigact[sig].handler = (uint64_t)(uintptr_t)SIG_DFL;
	t->sigmask &= ~LX_SIG_BIT(sig);
	s = lx_sig_thread(p, t->tid);
	rc = s ? lx_sig_push(p, &s->pend, info) : -ESRCH;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* The thread's own mask changes under the lock: senders read it (lx_sig_dropped). */
void lx_sig_set_mask(struct lx_thread *t, uint64_t mask)
{
	pthread_mutex_lock(&t->proc->lock);
	t->sigmask = mask & ~LX_SIG_UNBLOCKABLE;
	pthread_mutex_unlock(&t->proc->lock);
}

/* ---- for the calls, delivery and the monitor ---- */

bool lx_sig_thread_known(struct lx_proc *p, int tid)
{
	bool found;

	pthread_mutex_lock(&p->lock);
	found = lx_sig_thread(p, tid) != NULL;
	pthread_mutex_unlock(&p->lock);
	return found;
}

int lx_sig_from_outside(struct lx_proc *p, int sig)
{
	/* From a process the guest cannot see: pid 0, as a signal from another pid
	 * namespace reads. */
	siginfo_t info = { .si_signo = sig, .si_code = SI_USER };
	uint64_t handler;

	if (sig < 1 || sig > LX_NSIG)
		return -EINVAL;
	info.si_uid = getuid();
	if (lx_sig_on(p))
		return lx_sig_send(p, 0, &info) == -EAGAIN ? -EAGAIN : 0;
	pthread_mutex_lock(&p->lock);
	handler = p->sigact[sig].handler;
	pthread_mutex_unlock(&p->lock);
	if (sig != SIGKILL && handler == (uint64_t)(uintptr_t)SIG_IGN)
		return 0;
	if (sig != SIGKILL && handler != (uint64_t)(uintptr_t)SIG_DFL)
		log_warn("signal %d for the guest, which has a handler for it: signal delivery "
			 "is not supported in this VM yet, so the default action is taken", sig);
	return lx_sig_kills(sig) ? 1 : 0;
}

uint64_t lx_sig_inherited(void)
{
	uint64_t set = 0;

	for (int sig = 1; sig <= LX_NSIG; sig++) {
		struct sigaction sa;

		if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_IGN)
			set |= LX_SIG_BIT(sig);
	}
	return set;
}

/* A kill-style siginfo: sent by the guest's own process. */
siginfo_t lx_sig_user_info(struct lx_call *c, int sig, int code)
{
	siginfo_t info = { .si_signo = sig, .si_code = code };

	info.si_pid = c->p->pid;
	info.si_uid = getuid();
	return info;
}

/* (sys.h) Every queued signal broadcasts sigcond; a snapshot taken while a thread
 * sleeps here restores into the same call. */
int lx_sig_wait(struct lx_call *c, uint64_t set, const struct timespec *until)
{
	struct lx_proc *p = c->p;
	int rc = 0;

	lx_wait_begin(c);
	pthread_mutex_lock(&p->lock);
	while (!lx_sig_pending(c->t, set) && rc != ETIMEDOUT)
		rc = until ? pthread_cond_timedwait(&p->sigcond, &p->lock, until) :
			     pthread_cond_wait(&p->sigcond, &p->lock);
	rc = lx_sig_pending(c->t, set) ? 0 : -EAGAIN;
	pthread_mutex_unlock(&p->lock);
	lx_wait_end(c);
	return rc;
}

int lx_sig_wait_event(struct lx_call *c, const uint64_t *events, uint64_t seen, int restart)
{
	struct lx_proc *p = c->p;
	bool taken;

	lx_wait_begin(c);
	pthread_mutex_lock(&p->lock);
	while (!(taken = lx_sig_on(p) && lx_sig_pending(c->t, lx_sig_allowed(c->t))) &&
	       __atomic_load_n(events, __ATOMIC_ACQUIRE) == seen)
		pthread_cond_wait(&p->sigcond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	lx_wait_end(c);
	return taken ? -restart : 0;
}

void lx_sig_broken_pipe(struct lx_call *c, int64_t rc)
{
	siginfo_t info;

	if (rc != -EPIPE || !lx_sig_on(c->p))
		return;
	switch (c->nr) {
	case __NR_write:
	case __NR_writev:
	case __NR_pwrite64:
		break;
	case __NR_sendto:
	case __NR_sendmsg:
		if (c->a[c->nr == __NR_sendto ? 3 : 2] & MSG_NOSIGNAL)
			return;
		break;
	default:
		return;
	}
	info = lx_sig_user_info(c, SIGPIPE, SI_USER);
	(void)lx_sig_send(c->p, c->t->tid, &info);
}

bool lx_sig_waiting(struct lx_thread *t)
{
	bool any;

	if (!lx_sig_on(t->proc))
		return false;
	pthread_mutex_lock(&t->proc->lock);
	any = lx_sig_pending(t, lx_sig_allowed(t)) != 0;
	pthread_mutex_unlock(&t->proc->lock);
	return any;
}


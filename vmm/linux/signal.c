/*
 * signal.c - signals of the Linux personality: sent, queued, and delivered to the
 * guest's handlers as Linux delivers them on x86-64.
 *
 * A signal is queued on the process (kill, rt_sigqueueinfo, a timer) or on one thread
 * (tgkill, tkill, rt_tgsigqueueinfo, SIGPIPE, a fault). When a thread returns from a
 * system call, every signal it does not block is taken in Linux's order (the
 * synchronous ones first, then the lowest number; the thread's own before the
 * process'): one that is ignored is dropped, one whose default action ends the process
 * ends the VM with status 128 + the signal, and one with a handler gets a frame
 * (sigframe.c) and the thread resumes in the handler. A sender kicks the thread that
 * is to take the signal out of a host call it blocks in; the call ends with Linux's
 * restart codes, turned here into EINTR or the call made again. pause, sigsuspend,
 * sigtimedwait and the masks of ppoll and the like are here too.
 *
 * Delivery needs the vCPU's FPU state, so it is on only when the VM gives the fpu
 * hooks (lx.h); without them a signal the guest sends itself takes its default
 * action, as before signals were delivered.
 */
#include "sys.h"
#include "../../base/log.h"
#include "../../base/x86.h"

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LX_SIGEV_THREAD_ID  4
#define LX_NSEC_PER_SEC     1000000000LL
#define LX_SIGRTMIN         32
#define LX_SYSCALL_INSN_LEN 2 /* `syscall`: a restarted call runs it again */
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
	int rc = lx_cond_init_monotonic(&p->sigcond);

	if (rc)
		return rc;
	rc = lx_timer_init(p);
	if (rc)
		pthread_cond_destroy(&p->sigcond);
	return rc;
}

void lx_sig_fini(struct lx_proc *p)
{
	lx_timer_fini(p);
	lx_sigfd_fini(p);
	pthread_cond_destroy(&p->sigcond);
}

/* Default action of @sig ends the process (with or without a core); the others are
 * ignored, and stopping is ignored too: there is nothing to stop a VM for here. */
static bool lx_sig_kills(int sig)
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
	lx_sigfd_sync(p); /* what was sent to it alone went with it */
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
		lx_sigfd_sync(p);
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
static uint64_t lx_sig_pending(struct lx_thread *t, uint64_t set)
{
	struct lx_sigthread *s = lx_sig_thread(t->proc, t->tid);

	return ((s ? s->pend.set : 0) | t->proc->sigpend.set) & set;
}

/* The signals thread @t takes when it returns to user mode. */
static uint64_t lx_sig_allowed(const struct lx_thread *t)
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
		lx_timer_taken(p, info);
		p->timers.t[info->si_timerid].overrun = info->si_overrun;
	}
	if (sig)
		lx_sigfd_sync(p);
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
	lx_timer_poke(p);
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

/* The thread's own mask changes under the lock: senders read it (lx_sig_dropped). */
void lx_sig_set_mask(struct lx_thread *t, uint64_t mask)
{
	pthread_mutex_lock(&t->proc->lock);
	t->sigmask = mask & ~LX_SIG_UNBLOCKABLE;
	pthread_mutex_unlock(&t->proc->lock);
}

/* What to do with @sig taken for @t: 1 to run handler *@act, 0 when done with it
 * (ignored), -1 when it ends the process. */
static int lx_sig_disposition(struct lx_thread *t, int sig, struct lx_sigaction *act)
{
	struct lx_proc *p = t->proc;

	*act = p->sigact[sig];
	if (sig == SIGKILL)
		return -1;
	if (act->handler == (uint64_t)(uintptr_t)SIG_IGN)
		return 0;
	if (act->handler == (uint64_t)(uintptr_t)SIG_DFL)
		return lx_sig_kills(sig) ? -1 : 0;
	if (act->flags & LX_SA_RESETHAND)
		p->sigact[sig] = (struct lx_sigaction){ .handler = (uint64_t)(uintptr_t)SIG_DFL };
	return 1;
}

/* The interrupted call's restart code @rc meets handler @act (NULL: none ran): the
 * call's result in the user registers @u becomes EINTR, or the call is made again
 * (its number back in RAX, RIP back on the `syscall` instruction), as in Linux. */
static void lx_sig_restart(const struct lx_call *c, int64_t rc, const struct lx_sigaction *act,
			   struct cpu_regs *u)
{
	bool again = rc == -LX_ERESTARTNOINTR;

	if (!act)
		again = rc != -LX_ERESTART_RESTARTBLOCK; /* a sleep ends early: EINTR */
	else if (rc == -LX_ERESTARTSYS)
		again = act->flags & LX_SA_RESTART;
	if (!again) {
		u->rax = (uint64_t)-EINTR;
		return;
	}
	u->rax = c->nr;
	u->rip -= LX_SYSCALL_INSN_LEN;
}

void lx_sig_deliver(struct lx_call *c)
{
	struct lx_thread *t = c->t;
	struct lx_proc *p = c->p;
	int64_t rc = (int64_t)c->regs->rax;
	bool restart = !t->resume_exact && lx_sig_restart_code(rc);

	/* A call that waited with a mask of its own and was not interrupted gives the
	 * thread its mask back before any signal is taken (Linux's
	 * restore_saved_sigmask_unless): only an interrupted one leaves it to the frame. */
	if (t->restore_mask && !restart && rc != -EINTR) {
		lx_sig_set_mask(t, t->saved_mask);
		t->restore_mask = false;
	}

	/* Nothing queued where this thread looks, read without the lock: the common case
	 * on every system call's return. A signal queued just after kicks the thread,
	 * which takes it then (at its run's return, or here after its next call). */
	if (!restart && !t->restore_mask && !__atomic_load_n(&p->sigpend.set, __ATOMIC_RELAXED) &&
	    !(t->sigslot && __atomic_load_n(&t->sigslot->pend.set, __ATOMIC_RELAXED)))
		return;

	/* Each round takes one signal; a handler's mask may let the next one in too,
	 * nesting its frame, as Linux does before it returns to user mode. Every round
	 * empties a queue slot or resets a handler, so this ends. */
	for (int round = 0; round < 2 * (LX_NSIG + 2 * LX_SIGQUEUE_MAX); round++) {
		struct lx_sigaction act;
		struct cpu_regs u;
		siginfo_t info;
		int sig, what;

		pthread_mutex_lock(&p->lock);
		sig = lx_sig_take(t, lx_sig_allowed(t), &info);
		what = sig ? lx_sig_disposition(t, sig, &act) : 0;
		pthread_mutex_unlock(&p->lock);
		if (!sig)
			break;
		if (what < 0) {
			p->exit_status = 128 + sig;
			p->term_sig = sig;
		p->term_sig = sig;
			c->action = LX_EXIT_GROUP;
			return;
		}
		if (what == 0)
			continue;
		lx_sig_user_regs(t, c->regs, &u);
		if (restart)
			lx_sig_restart(c, rc, &act, &u);
		restart = false;
		if (lx_sig_frame(c, &act, &info, &u)) {
			log_warn("could not write the frame of signal %d on the guest stack at "
				 "%#llx: SIGSEGV", sig, (unsigned long long)u.rsp);
			lx_sig_force(c, SIGSEGV, sig == SIGSEGV);
			if (c->action != LX_RESUME)
				return;
		}
	}
	/* Interrupted, and no handler ran (another thread ignored the signal meanwhile). */
	if (restart) {
		struct cpu_regs u;

		lx_sig_user_regs(t, c->regs, &u);
		lx_sig_restart(c, rc, NULL, &u);
		*c->regs = u;
		t->resume_exact = true;
	}
	/* rt_sigsuspend woken by a signal no handler took: its mask goes back now. */
	if (t->restore_mask) {
		lx_sig_set_mask(t, t->saved_mask);
		t->restore_mask = false;
	}
}

/* ---- system calls ---- */

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

bool lx_sig_thread_known(struct lx_proc *p, int tid)
{
	bool found;

	pthread_mutex_lock(&p->lock);
	found = lx_sig_thread(p, tid) != NULL;
	pthread_mutex_unlock(&p->lock);
	return found;
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
static siginfo_t lx_sig_user_info(struct lx_call *c, int sig, int code)
{
	siginfo_t info = { .si_signo = sig, .si_code = code };

	info.si_pid = c->p->pid;
	info.si_uid = getuid();
	return info;
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

enum lx_action lx_sig_interrupt(struct lx_thread *t, struct cpu_regs *regs,
				struct cpu_segs *segs)
{
	struct lx_call c = { .t = t, .p = t->proc, .nr = UINT64_MAX, .regs = regs,
			     .segs = segs, .action = LX_RESUME };

	if (!lx_sig_on(t->proc))
		return LX_RESUME;
	if (!t->sig_bound)
		lx_sig_bind(t);
	t->resume_exact = true; /* the registers are the CPU's, not a system call's */
	lx_sig_deliver(&c);
	return c.action;
}

/* ---- exceptions (sigfault.c) ---- */

bool lx_sig_fault(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
		  const siginfo_t *info, const struct lx_fault *f)
{
	struct lx_call c = { .t = t, .p = t->proc, .nr = UINT64_MAX, .regs = regs,
			     .segs = segs, .action = LX_RESUME };
	struct lx_proc *p = t->proc;
	struct lx_sigthread *s;
	int sig = info->si_signo, rc;

	if (!t->sig_bound)
		lx_sig_bind(t);
	/* As force_sig_fault: a fault's signal cannot be blocked or ignored away. */
	pthread_mutex_lock(&p->lock);
	if (p->sigact[sig].handler == (uint64_t)(uintptr_t)SIG_IGN || (t->sigmask & LX_SIG_BIT(sig)))
		p->sigact[sig].handler = (uint64_t)(uintptr_t)SIG_DFL;
	t->sigmask &= ~LX_SIG_BIT(sig);
	s = lx_sig_thread(p, t->tid);
	rc = s ? lx_sig_push(p, &s->pend, info) : -ESRCH;
	pthread_mutex_unlock(&p->lock);
	if (rc)
		return false;
	/* The registers are the whole user context the CPU left, not a system call's. */
	t->resume_exact = true;
	t->trap = f;
	lx_sig_deliver(&c);
	t->trap = NULL;
	return c.action == LX_RESUME;
}

/*
 * timer.c - timers that end in a signal: alarm, setitimer's ITIMER_REAL and POSIX
 * timers (timer_create ... timer_delete) of the Linux personality.
 *
 * A timer's times are on a guest clock (what clock_gettime tells the guest, which a
 * restore carries on from the snapshot instant, clock.c), so one monitor thread per
 * process keeps them: it sleeps on the host's monotonic clock until the earliest
 * expiry, reckoned again from the guest clocks at every wake-up, and queues the signal
 * (signal.c). A periodic timer that fell behind fires once and counts the periods it
 * missed as overruns, as Linux does; a signal still queued from the last expiry is
 * not queued again, its overrun count grows. Like signal delivery, timers are
 * offered only where signals can be delivered (lx_sig_on); elsewhere arming one fails
 * visibly (ENOSYS, logged) rather than never firing.
 */
#include "sys.h"
#include "../../base/role.h"
#include "../../base/log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define LX_NSEC_PER_SEC  1000000000LL
#define LX_NSEC_PER_USEC 1000LL
#define LX_ITIMER_REAL   LX_MAX_TIMERS /* its slot in lx_timers.t */
#define LX_SIGEV_SIGNAL    0
#define LX_SIGEV_NONE      1
#define LX_SIGEV_THREAD_ID 4
#define LX_TIMER_ABSTIME   1
#define LX_TIMER_FAR       (INT64_MAX / 4) /* beyond any expiry: no overflow adding now */
/* How soon a kicked thread that is still blocked is kicked again: the latency of a
 * signal whose kick landed just before the host call it was to interrupt. */
#define LX_REKICK_NS       (10 * 1000000LL)
/* The timer thread's tick: a periodic timer with a shorter interval fires at most once
 * per tick, the periods in between counted as overruns, as Linux's hrtimer_forward
 * does below its resolution, instead of waking the thread again at once (a 1 ns
 * interval would keep it spinning). */
#define LX_TIMER_TICK_NS   (1000000LL)

/* The kernel's struct sigevent as timer_create reads it (64 bytes). */
struct lx_sigevent {
	uint64_t value;
	int32_t signo;
	int32_t notify;
	int32_t tid;
	int32_t pad[11];
};

_Static_assert(sizeof(struct lx_sigevent) == 64, "the kernel's sigevent is 64 bytes");

static int64_t lx_timer_now(struct lx_proc *p, int clock)
{
	int64_t ns = 0;

	(void)lx_clock_now(p, clock, &ns);
	return ns;
}

/* Move a periodic timer that expired by @now to its first expiry after now, or, for
 * an interval shorter than a tick, at least a tick after now; the periods skipped
 * besides the one that fired are its overruns. An interval of a tick or more keeps
 * Linux's bound: the time left never exceeds the interval. */
static int64_t lx_timer_forward(struct lx_timer *tm, int64_t now)
{
	int64_t horizon = tm->interval < LX_TIMER_TICK_NS ? now + LX_TIMER_TICK_NS : now;
	int64_t periods = (horizon - tm->deadline) / tm->interval + 1;

	if (periods > LX_TIMER_FAR / tm->interval) /* a far deadline stays reachable */
		periods = LX_TIMER_FAR / tm->interval;
	tm->deadline += periods * tm->interval;
	return periods - 1;
}

/* Expire what is due (p->lock held); how long until the next one, or -1 for none. */
static int64_t lx_timer_expire(struct lx_proc *p)
{
	int64_t next = -1;

	for (int id = 0; id <= LX_MAX_TIMERS; id++) {
		struct lx_timer *tm = &p->timers.t[id];
		int64_t now, missed = 0;

		if (!tm->armed || tm->parked)
			continue;
		now = lx_timer_now(p, tm->clock);
		if (tm->deadline <= now) {
			if (tm->interval) {
				missed = lx_timer_forward(tm, now);
			} else {
				tm->armed = false;
			}
			if (tm->notify != LX_SIGEV_NONE)
				lx_sig_queue_timer(p, id, missed);
			/* Until the guest takes that signal, further expiries are only
			 * overruns: counted then (lx_timer_taken). */
			tm->parked = tm->armed && id < LX_MAX_TIMERS && tm->notify != LX_SIGEV_NONE &&
				     lx_sig_timer_pending(p, id);
			if (tm->parked)
				continue;
		}
		if (tm->armed && (next < 0 || tm->deadline - now < next))
			next = tm->deadline - now > 0 ? tm->deadline - now : 0;
	}
	return next;
}

void lx_timer_taken(struct lx_proc *p, siginfo_t *info)
{
	struct lx_timer *tm = &p->timers.t[info->si_timerid];
	int64_t now, missed = 0;

	if (!tm->parked)
		return;
	tm->parked = false;
	now = lx_timer_now(p, tm->clock);
	if (tm->deadline <= now)
		missed = lx_timer_forward(tm, now) + 1;
	info->si_overrun = missed > INT32_MAX - info->si_overrun ? INT32_MAX :
							       info->si_overrun + (int)missed;
	pthread_cond_broadcast(&p->timers.cond); /* the thread reckons its next wake-up */
}

static void *lx_timer_thread(void *arg)
{
	struct lx_proc *p = arg;
	struct lx_timers *ts = &p->timers;

	role_enter(ROLE_TIMER);
	pthread_mutex_lock(&p->lock);
	while (!ts->stop) {
		int64_t wait = lx_timer_expire(p);
		struct timespec until;
		int64_t at;

		/* Kicked threads still blocked with a signal to take are kicked again. */
		if (p->sig_rekick && lx_sig_rekick(p) && (wait < 0 || wait > LX_REKICK_NS))
			wait = LX_REKICK_NS;
		if (wait < 0) {
			pthread_cond_wait(&ts->cond, &p->lock);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		at = until.tv_sec * LX_NSEC_PER_SEC + until.tv_nsec +
		     (wait < LX_TIMER_FAR ? wait : LX_TIMER_FAR);
		until.tv_sec = at / LX_NSEC_PER_SEC;
		until.tv_nsec = at % LX_NSEC_PER_SEC;
		pthread_cond_timedwait(&ts->cond, &p->lock, &until);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int lx_timer_init(struct lx_proc *p)
{
	return lx_cond_init_monotonic(&p->timers.cond);
}

void lx_timer_fini(struct lx_proc *p)
{
	struct lx_timers *ts = &p->timers;

	pthread_mutex_lock(&p->lock);
	ts->stop = true;
	pthread_cond_broadcast(&ts->cond);
	pthread_mutex_unlock(&p->lock);
	if (ts->running)
		pthread_join(ts->thread, NULL);
	ts->running = false;
	pthread_cond_destroy(&ts->cond);
}

static int lx_timer_run(struct lx_proc *p)
{
	struct lx_timers *ts = &p->timers;

	if (!ts->running) {
		if (pthread_create(&ts->thread, NULL, lx_timer_thread, p))
			return -EAGAIN;
		ts->running = true;
	}
	pthread_cond_broadcast(&ts->cond);
	return 0;
}

void lx_timer_poke(struct lx_proc *p)
{
	(void)lx_timer_run(p);
}

void lx_timer_start(struct lx_proc *p)
{
	bool armed = false;

	pthread_mutex_lock(&p->lock);
	for (int id = 0; id <= LX_MAX_TIMERS; id++)
		armed |= p->timers.t[id].armed;
	if (armed && lx_timer_run(p))
		log_warn("could not start the thread of the restored timers: they will not fire");
	pthread_mutex_unlock(&p->lock);
}

/* Arm @tm to expire at guest @deadline, then every @interval ns (p->lock held); the
 * thread starts with the first timer armed. 0, or -EAGAIN without a thread. */
static int lx_timer_arm(struct lx_proc *p, struct lx_timer *tm, int64_t deadline,
			int64_t interval)
{
	tm->deadline = deadline;
	tm->interval = interval;
	tm->armed = true;
	if (lx_timer_run(p)) {
		tm->armed = false;
		return -EAGAIN;
	}
	return 0;
}

/* Time left and period of @tm in ns (p->lock held). */
static void lx_timer_left(struct lx_proc *p, const struct lx_timer *tm, int64_t *left,
			  int64_t *interval)
{
	int64_t now = lx_timer_now(p, tm->clock);

	*left = !tm->armed ? 0 : tm->deadline > now ? tm->deadline - now : 1;
	*interval = tm->interval;
}

static int64_t lx_tv_ns(const struct timeval *tv)
{
	return tv->tv_sec * LX_NSEC_PER_SEC + tv->tv_usec * LX_NSEC_PER_USEC;
}

static struct timeval lx_ns_tv(int64_t ns)
{
	/* Linux rounds a time left up to the next microsecond, never down to zero. */
	int64_t us = (ns + LX_NSEC_PER_USEC - 1) / LX_NSEC_PER_USEC;

	return (struct timeval){ .tv_sec = us / 1000000, .tv_usec = us % 1000000 };
}

static int lx_itimer_value(const struct itimerval *v, int64_t *value, int64_t *interval)
{
	if (v->it_value.tv_sec < 0 || v->it_value.tv_usec < 0 || v->it_value.tv_usec >= 1000000 ||
	    v->it_interval.tv_sec < 0 || v->it_interval.tv_usec < 0 ||
	    v->it_interval.tv_usec >= 1000000)
		return -EINVAL;
	*value = v->it_value.tv_sec > LX_TIMER_FAR / LX_NSEC_PER_SEC ? LX_TIMER_FAR :
								      lx_tv_ns(&v->it_value);
	*interval = v->it_interval.tv_sec > LX_TIMER_FAR / LX_NSEC_PER_SEC ?
			    LX_TIMER_FAR : lx_tv_ns(&v->it_interval);
	return 0;
}

/* ITIMER_REAL: set to @value ns from now, then every @interval; the old setting out. */
static int lx_itimer_real(struct lx_call *c, int64_t value, int64_t interval,
			  struct itimerval *old)
{
	struct lx_proc *p = c->p;
	struct lx_timer *tm = &p->timers.t[LX_ITIMER_REAL];
	int64_t left, period;
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	lx_timer_left(p, tm, &left, &period);
	*old = (struct itimerval){ .it_value = lx_ns_tv(left), .it_interval = lx_ns_tv(period) };
	if (!tm->armed)
		old->it_value = (struct timeval){ 0 };
	*tm = (struct lx_timer){ .used = true, .clock = CLOCK_MONOTONIC, .signo = SIGALRM,
				 .notify = LX_SIGEV_SIGNAL };
	if (value)
		rc = lx_timer_arm(p, tm, lx_timer_now(p, CLOCK_MONOTONIC) + value, interval);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int64_t sys_setitimer(struct lx_call *c)
{
	struct itimerval nv, old;
	int64_t value, interval;
	int rc;

	if (c->a[0] > ITIMER_PROF)
		return -EINVAL;
	if (lx_copy_in(c, &nv, c->a[1], sizeof(nv)))
		return -EFAULT;
	if (c->a[2] && !gmem_user_range_ok(c->p->mem, c->a[2], sizeof(old)))
		return -EFAULT;
	rc = lx_itimer_value(&nv, &value, &interval);
	if (rc)
		return rc;
	/* Disarming any of them (what Redis does at start) is always fine. */
	if (c->a[0] != ITIMER_REAL || !lx_sig_on(c->p)) {
		if (!value) {
			old = (struct itimerval){ 0 };
			return c->a[2] ? lx_copy_out(c, c->a[2], &old, sizeof(old)) : 0;
		}
		if (lx_first_time(c))
			log_warn("guest armed an interval timer that ccvm does not run (%s): "
				 "setitimer returns ENOSYS", c->a[0] != ITIMER_REAL ?
				 "ITIMER_VIRTUAL and ITIMER_PROF count CPU time" :
				 "signals are not delivered in this VM");
		return -ENOSYS;
	}
	rc = lx_itimer_real(c, value, interval, &old);
	if (rc)
		return rc;
	return c->a[2] ? lx_copy_out(c, c->a[2], &old, sizeof(old)) : 0;
}

int64_t sys_getitimer(struct lx_call *c)
{
	struct lx_timer *tm = &c->p->timers.t[LX_ITIMER_REAL];
	struct itimerval cur = { 0 };
	int64_t left, period;

	if (c->a[0] > ITIMER_PROF)
		return -EINVAL;
	if (c->a[0] == ITIMER_REAL) {
		pthread_mutex_lock(&c->p->lock);
		lx_timer_left(c->p, tm, &left, &period);
		if (tm->armed)
			cur = (struct itimerval){ .it_value = lx_ns_tv(left),
						  .it_interval = lx_ns_tv(period) };
		pthread_mutex_unlock(&c->p->lock);
	}
	return lx_copy_out(c, c->a[1], &cur, sizeof(cur));
}

int64_t sys_alarm(struct lx_call *c)
{
	struct itimerval old;
	uint64_t secs = c->a[0] > UINT32_MAX ? UINT32_MAX : c->a[0];
	int rc;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	rc = lx_itimer_real(c, (int64_t)secs * LX_NSEC_PER_SEC, 0, &old);
	if (rc)
		return rc;
	/* The seconds that were left, rounded as Linux rounds them. */
	return old.it_value.tv_sec +
	       ((!old.it_value.tv_sec && old.it_value.tv_usec) || old.it_value.tv_usec >= 500000);
}

/* ---- POSIX timers ---- */

static bool lx_timer_clock_ok(uint64_t clock)
{
	return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC || clock == CLOCK_BOOTTIME ||
	       clock == CLOCK_TAI;
}

bool lx_timer_valid(int id, const struct lx_timer *t)
{
	if (id < 0 || id > LX_MAX_TIMERS || !lx_timer_clock_ok((uint64_t)t->clock))
		return false;
	if (t->notify != LX_SIGEV_SIGNAL && t->notify != LX_SIGEV_NONE &&
	    t->notify != LX_SIGEV_THREAD_ID)
		return false;
	if (t->notify != LX_SIGEV_NONE && (t->signo < 1 || t->signo > LX_NSIG))
		return false;
	if (id == LX_ITIMER_REAL && (t->notify != LX_SIGEV_SIGNAL || t->signo != SIGALRM ||
				     t->clock != CLOCK_MONOTONIC))
		return false;
	return t->interval >= 0 && t->interval <= LX_TIMER_FAR && t->deadline >= 0 &&
	       t->deadline <= INT64_MAX / 2 && t->overrun >= 0;
}


/* A timer id the guest passes, as its slot (p->lock held): NULL when not in use. */
static struct lx_timer *lx_timer_get(struct lx_proc *p, uint64_t id)
{
	return id < LX_MAX_TIMERS && p->timers.t[id].used ? &p->timers.t[id] : NULL;
}

int64_t sys_timer_create(struct lx_call *c)
{
	struct lx_sigevent ev = { .signo = SIGALRM, .notify = LX_SIGEV_SIGNAL };
	struct lx_proc *p = c->p;
	int id, rc;

	if (!lx_sig_on(p))
		return lx_unsupported(c);
	if (!lx_timer_clock_ok(c->a[0]))
		return (int64_t)c->a[0] < 0 || c->a[0] == CLOCK_PROCESS_CPUTIME_ID ||
				       c->a[0] == CLOCK_THREAD_CPUTIME_ID ? -ENOTSUP : -EINVAL;
	if (c->a[1] && lx_copy_in(c, &ev, c->a[1], sizeof(ev)))
		return -EFAULT;
	if (!gmem_user_range_ok(p->mem, c->a[2], sizeof(int32_t)))
		return -EFAULT;
	if (ev.notify != LX_SIGEV_SIGNAL && ev.notify != LX_SIGEV_NONE &&
	    ev.notify != LX_SIGEV_THREAD_ID)
		return -EINVAL;
	if (ev.notify != LX_SIGEV_NONE && (ev.signo < 1 || ev.signo > LX_NSIG))
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	for (id = 0; id < LX_MAX_TIMERS && p->timers.t[id].used; id++)
		;
	if (id < LX_MAX_TIMERS)
		p->timers.t[id] = (struct lx_timer){
			.used = true, .clock = (int)c->a[0], .notify = ev.notify,
			.signo = ev.signo, .tid = ev.tid,
			/* without a sigevent, the value is the timer's id */
			.value = c->a[1] ? ev.value : (uint64_t)id,
		};
	pthread_mutex_unlock(&p->lock);
	if (id == LX_MAX_TIMERS)
		return -EAGAIN;
	if (ev.notify == LX_SIGEV_THREAD_ID && !lx_sig_thread_known(p, ev.tid))
		rc = -EINVAL;
	else
		rc = lx_copy_out(c, c->a[2], &(int32_t){ id }, sizeof(int32_t));
	if (rc) {
		pthread_mutex_lock(&p->lock);
		p->timers.t[id].used = false;
		pthread_mutex_unlock(&p->lock);
		return rc;
	}
	return 0;
}

static int lx_its_ns(const struct itimerspec *its, int64_t *value, int64_t *interval)
{
	const struct timespec *v = &its->it_value, *i = &its->it_interval;

	if (v->tv_sec < 0 || v->tv_nsec < 0 || v->tv_nsec >= LX_NSEC_PER_SEC || i->tv_sec < 0 ||
	    i->tv_nsec < 0 || i->tv_nsec >= LX_NSEC_PER_SEC)
		return -EINVAL;
	*value = v->tv_sec > LX_TIMER_FAR / LX_NSEC_PER_SEC ? LX_TIMER_FAR :
							     v->tv_sec * LX_NSEC_PER_SEC + v->tv_nsec;
	*interval = i->tv_sec > LX_TIMER_FAR / LX_NSEC_PER_SEC ?
			    LX_TIMER_FAR : i->tv_sec * LX_NSEC_PER_SEC + i->tv_nsec;
	return 0;
}

static struct itimerspec lx_ns_its(int64_t left, int64_t interval)
{
	return (struct itimerspec){
		.it_value = { .tv_sec = left / LX_NSEC_PER_SEC, .tv_nsec = left % LX_NSEC_PER_SEC },
		.it_interval = { .tv_sec = interval / LX_NSEC_PER_SEC,
				 .tv_nsec = interval % LX_NSEC_PER_SEC },
	};
}

int64_t sys_timer_settime(struct lx_call *c)
{
	struct lx_proc *p = c->p;
	struct itimerspec nv, old;
	struct lx_timer *tm;
	int64_t value, interval, left, period, deadline;
	int rc = 0;

	if (!lx_sig_on(p))
		return lx_unsupported(c);
	if (c->a[1] & ~(uint64_t)LX_TIMER_ABSTIME)
		return -EINVAL;
	if (lx_copy_in(c, &nv, c->a[2], sizeof(nv)))
		return -EFAULT;
	if (c->a[3] && !gmem_user_range_ok(p->mem, c->a[3], sizeof(old)))
		return -EFAULT;
	rc = lx_its_ns(&nv, &value, &interval);
	if (rc)
		return rc;
	pthread_mutex_lock(&p->lock);
	tm = lx_timer_get(p, c->a[0]);
	if (!tm) {
		pthread_mutex_unlock(&p->lock);
		return -EINVAL;
	}
	lx_timer_left(p, tm, &left, &period);
	old = lx_ns_its(left, period);
	tm->armed = false;
	if (value) {
		deadline = c->a[1] & LX_TIMER_ABSTIME ? value : lx_timer_now(p, tm->clock) + value;
		rc = lx_timer_arm(p, tm, deadline, interval);
	}
	pthread_mutex_unlock(&p->lock);
	if (rc)
		return rc;
	return c->a[3] ? lx_copy_out(c, c->a[3], &old, sizeof(old)) : 0;
}

int64_t sys_timer_gettime(struct lx_call *c)
{
	struct itimerspec cur;
	struct lx_timer *tm;
	int64_t left, period;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	pthread_mutex_lock(&c->p->lock);
	tm = lx_timer_get(c->p, c->a[0]);
	if (tm)
		lx_timer_left(c->p, tm, &left, &period);
	pthread_mutex_unlock(&c->p->lock);
	if (!tm)
		return -EINVAL;
	cur = lx_ns_its(left, period);
	return lx_copy_out(c, c->a[1], &cur, sizeof(cur));
}

int64_t sys_timer_getoverrun(struct lx_call *c)
{
	struct lx_timer *tm;
	int64_t n;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	pthread_mutex_lock(&c->p->lock);
	tm = lx_timer_get(c->p, c->a[0]);
	n = tm ? tm->overrun : -EINVAL;
	pthread_mutex_unlock(&c->p->lock);
	return n;
}

int64_t sys_timer_delete(struct lx_call *c)
{
	struct lx_timer *tm;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	pthread_mutex_lock(&c->p->lock);
	tm = lx_timer_get(c->p, c->a[0]);
	if (tm)
		*tm = (struct lx_timer){ 0 }; /* a signal it queued is still delivered */
	pthread_mutex_unlock(&c->p->lock);
	return tm ? 0 : -EINVAL;
}

/* (sys.h) As timer_delete, for every one; ITIMER_REAL stays, as Linux keeps it. */
void lx_timer_exec(struct lx_proc *p)
{
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < LX_MAX_TIMERS; i++)
		p->timers.t[i] = (struct lx_timer){ 0 };
	pthread_mutex_unlock(&p->lock);
}

/* ---- timerfd: the host's, on the same clock ---- */

/*
 * A guest timerfd is a host timerfd on the same clock id, so read, poll and epoll
 * work on it as on any host descriptor. Guest clocks run at the host's rate but may
 * be offset from it (a restore carries the guest's on from the snapshot instant): a
 * relative setting means the same on both, and an absolute one is turned into the
 * time left on the guest's clock (an expiry already past fires at once).
 * TFD_TIMER_CANCEL_ON_SET is accepted and has no effect.
 */
#define LX_TFD_CREATE_FLAGS (TFD_CLOEXEC | TFD_NONBLOCK)
#define LX_TFD_SET_FLAGS    (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)

int lx_timerfd_clock(int host)
{
	char link[64], target[32], line[128];
	FILE *in;
	ssize_t n;
	int clock = -EINVAL;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", host);
	n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (strcmp(target, "anon_inode:[timerfd]") != 0)
		return -EINVAL;
	snprintf(link, sizeof(link), "/proc/self/fdinfo/%d", host);
	in = fopen(link, "re");
	while (in && fgets(line, sizeof(line), in))
		if (sscanf(line, "clockid: %d", &clock) == 1)
			break;
	if (in)
		fclose(in);
	return lx_timer_clock_ok((uint64_t)clock) ? clock : -EINVAL;
}

int64_t sys_timerfd_create(struct lx_call *c)
{
	int host;

	if (c->a[0] != CLOCK_REALTIME && c->a[0] != CLOCK_MONOTONIC && c->a[0] != CLOCK_BOOTTIME)
		return -EINVAL;
	if (c->a[1] & ~(uint64_t)LX_TFD_CREATE_FLAGS)
		return -EINVAL;
	host = timerfd_create((int)c->a[0], TFD_CLOEXEC | (int)(c->a[1] & TFD_NONBLOCK));
	if (host < 0)
		return -errno;
	return lx_install(c, host, 0, c->a[1] & TFD_CLOEXEC);
}

int64_t sys_timerfd_settime(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]), clock;
	struct itimerspec nv, old;
	int64_t value, interval, now;
	int rc;

	if (host < 0)
		return host;
	if (c->a[1] & ~(uint64_t)LX_TFD_SET_FLAGS)
		return -EINVAL;
	clock = lx_timerfd_clock(host);
	if (clock < 0)
		return clock;
	if (lx_copy_in(c, &nv, c->a[2], sizeof(nv)))
		return -EFAULT;
	rc = lx_its_ns(&nv, &value, &interval);
	if (rc)
		return rc;
	if ((c->a[1] & TFD_TIMER_ABSTIME) && value) {
		now = lx_timer_now(c->p, clock);
		value = value > now ? value - now : 1; /* past: at once */
		nv = lx_ns_its(value, interval);
	}
	if (timerfd_settime(host, 0, &nv, &old) < 0)
		return -errno;
	return c->a[3] ? lx_copy_out(c, c->a[3], &old, sizeof(old)) : 0;
}

int64_t sys_timerfd_gettime(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	struct itimerspec cur;

	if (host < 0)
		return host;
	if (lx_timerfd_clock(host) < 0)
		return -EINVAL;
	if (timerfd_gettime(host, &cur) < 0)
		return -errno;
	return lx_copy_out(c, c->a[1], &cur, sizeof(cur));
}

/*
 * sys_timer.c - the timer calls: alarm, setitimer and getitimer, the POSIX timers
 * (timer_create ... timer_delete) and timerfds. Each reads its arguments once and
 * decodes them; the timers themselves (a thread per process that keeps them on the
 * guest clocks and queues their signals) are timer.c's.
 */
#include "sys.h"
#include "timer_impl.h"
#include "../../base/log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* A timer id the guest passes, as its slot (p->lock held): NULL when not in use. */
static struct lx_timer *lx_timer_get(struct lx_proc *p, uint64_t id)
{
	return id < LX_MAX_TIMERS && p->timers.t[id].used ? &p->timers.t[id] : NULL;
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

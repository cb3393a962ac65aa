/*
 * timer.c - timers that end in a signal: alarm, setitimer's ITIMER_REAL and POSIX
 * timers of the Linux personality (their calls are sys_timer.c's).
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
#include "timer_impl.h"
#include "../../base/role.h"
#include "../../base/log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int64_t lx_timer_now(struct lx_proc *p, int clock)
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
int lx_timer_arm(struct lx_proc *p, struct lx_timer *tm, int64_t deadline,
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
void lx_timer_left(struct lx_proc *p, const struct lx_timer *tm, int64_t *left,
			  int64_t *interval)
{
	int64_t now = lx_timer_now(p, tm->clock);

	*left = !tm->armed ? 0 : tm->deadline > now ? tm->deadline - now : 1;
	*interval = tm->interval;
}

bool lx_timer_clock_ok(uint64_t clock)
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

/* (sys.h) As timer_delete, for every one; ITIMER_REAL stays, as Linux keeps it. */
void lx_timer_exec(struct lx_proc *p)
{
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < LX_MAX_TIMERS; i++)
		p->timers.t[i] = (struct lx_timer){ 0 };
	pthread_mutex_unlock(&p->lock);
}

/*
 * A guest timerfd is a host timerfd on the same clock id, so read, poll and epoll
 * work on it as on any host descriptor. Guest clocks run at the host's rate but may
 * be offset from it (a restore carries the guest's on from the snapshot instant): a
 * relative setting means the same on both, and an absolute one is turned into the
 * time left on the guest's clock (an expiry already past fires at once).
 * TFD_TIMER_CANCEL_ON_SET is accepted and has no effect.
 */

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

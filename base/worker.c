/*
 * worker.c - a helper thread that its owner can wake and stop (see worker.h).
 *
 * The copier, the squeezer and the coverage tracker each wrote this idiom out; one copy
 * keeps the order right everywhere: the stop flag is set under the lock and broadcast,
 * so a worker between its check and its wait cannot miss it, and the join comes after
 * the unlock.
 */
#include "worker.h"

#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NICE_LOWEST 19

void worker_init(struct worker *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->live = w->stop = w->wanted = w->busy = false;
}

void worker_destroy(struct worker *w)
{
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
}

int worker_start(struct worker *w, void *(*fn)(void *), void *arg)
{
	if (w->live)
		return 0;
	w->stop = false;
	if (pthread_create(&w->thread, NULL, fn, arg))
		return -EAGAIN;
	w->live = true;
	return 0;
}

void worker_stop(struct worker *w)
{
	if (!w->live)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->live = false;
	w->stop = false;
}

void worker_want(struct worker *w)
{
	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->wanted, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void worker_unwant(struct worker *w)
{
	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->wanted, false, __ATOMIC_RELEASE);
	while (w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

bool worker_wanted(struct worker *w)
{
	return __atomic_load_n(&w->wanted, __ATOMIC_ACQUIRE);
}

bool worker_serve(struct worker *w, void (*work)(void *), void *arg)
{
	if (!w->wanted)
		return false;
	w->busy = true;
	pthread_mutex_unlock(&w->lock);
	work(arg);
	pthread_mutex_lock(&w->lock);
	w->busy = false;
	pthread_cond_broadcast(&w->cond);
	return true;
}

void worker_wait(struct worker *w)
{
	pthread_cond_wait(&w->cond, &w->lock);
}

int worker_wait_until(struct worker *w, const struct timespec *until)
{
	return pthread_cond_timedwait(&w->cond, &w->lock, until);
}

void worker_deadline(double seconds, struct timespec *until)
{
	clock_gettime(CLOCK_REALTIME, until);
	until->tv_sec += (time_t)seconds;
	until->tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

/* Who 0 is the calling thread to Linux (nice values are per thread), and the only one
 * the confined monitor may name (confine_seccomp.c). */
void worker_nice(int n)
{
	int now;

	if (n <= 0)
		return;
	errno = 0;
	now = getpriority(PRIO_PROCESS, 0);
	if (errno == 0)
		setpriority(PRIO_PROCESS, 0, now + n > NICE_LOWEST ? NICE_LOWEST : now + n);
}

void worker_background(int n, bool idle)
{
	struct sched_param sp = { .sched_priority = 0 };

	worker_nice(n);
	if (idle)
		(void)sched_setscheduler(0, SCHED_IDLE, &sp); /* pid 0: this thread */
}

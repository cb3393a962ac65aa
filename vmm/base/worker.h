/*
 * worker.h - a helper thread that its owner can wake and stop: one lock, one condition
 * variable, one stop flag, the thread itself (worker.c).
 *
 * The owner keeps its own state beside these under the same lock (what the worker is
 * asked to do, whether it is busy), signals the condition when that changes, and the
 * worker's loop waits on it. worker_stop is the one way such a thread ends.
 */
#ifndef CCVM_WORKER_H
#define CCVM_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

struct worker {
	pthread_mutex_t lock;  /* guards stop, and what the owner keeps with it */
	pthread_cond_t cond;   /* broadcast whenever any of that changes */
	pthread_t thread;
	bool live;             /* the thread was started and not yet joined */
	bool stop;             /* under lock: the thread is to return */
};

void worker_init(struct worker *w);
void worker_destroy(struct worker *w);

/* Start @fn(@arg) as the worker's thread: 0, or -EAGAIN. */
int worker_start(struct worker *w, void *(*fn)(void *), void *arg);

/* Ask the thread to return and join it (nothing when none runs). */
void worker_stop(struct worker *w);

/* Under w->lock: wait for a broadcast; or until the CLOCK_REALTIME time @until, which
 * returns pthread_cond_timedwait's result (0, ETIMEDOUT once it has passed, or an
 * error). worker_deadline gives the time @seconds from now. */
void worker_wait(struct worker *w);
int worker_wait_until(struct worker *w, const struct timespec *until);
void worker_deadline(double seconds, struct timespec *until);

/* Lower the calling thread's priority by @n nice levels (never raise it). */
void worker_nice(int n);

#endif

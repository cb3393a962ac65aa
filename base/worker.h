/*
 * worker.h - a helper thread that its owner can wake and stop: one lock, one condition
 * variable, one stop flag, the thread itself (worker.c).
 *
 * The owner asks for work with worker_want and takes the request back with
 * worker_unwant, which waits until the thread is idle; the thread's loop runs the work
 * with worker_serve while it is wanted, and waits on the condition otherwise.
 * worker_stop is the one way such a thread ends.
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
	bool wanted;           /* under lock (read atomically by the work): work to do */
	bool busy;             /* under lock: the thread is doing it */
};

void worker_init(struct worker *w);
void worker_destroy(struct worker *w);

/* Start @fn(@arg) as the worker's thread: 0, or -EAGAIN. */
int worker_start(struct worker *w, void *(*fn)(void *), void *arg);

/* Ask the thread to return and join it (nothing when none runs). */
void worker_stop(struct worker *w);

/* The owner: work is wanted (the thread is woken), or no longer (returns once the
 * thread is not doing it). */
void worker_want(struct worker *w);
void worker_unwant(struct worker *w);

/* The work, between its steps: whether it is still wanted (no lock taken). */
bool worker_wanted(struct worker *w);

/* The thread, with w->lock held: when work is wanted, run @work(@arg) unlocked, marked
 * busy, and return true (the lock held again); else false. @work returns once
 * worker_wanted says no. */
bool worker_serve(struct worker *w, void (*work)(void *), void *arg);

/* Under w->lock: wait for a broadcast; or until the CLOCK_REALTIME time @until, which
 * returns pthread_cond_timedwait's result (0, ETIMEDOUT once it has passed, or an
 * error). worker_deadline gives the time @seconds from now. */
void worker_wait(struct worker *w);
int worker_wait_until(struct worker *w, const struct timespec *until);
void worker_deadline(double seconds, struct timespec *until);

/* Lower the calling thread's priority by @n nice levels (never raise it). */
void worker_nice(int n);

/* A thread that works behind others' backs: @n nice levels lower and, with @idle,
 * SCHED_IDLE as well (it runs only on a CPU nothing else wants; the threads it starts
 * inherit both). */
void worker_background(int n, bool idle);

#endif

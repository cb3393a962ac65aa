/*
 * threads.c - POSIX threads as a program sees them: mutexes, condition variables,
 * barriers, semaphores, thread-local storage, join return values, many threads
 * created and joined in turn, thread ids, a timed wait that times out, a robust
 * mutex whose owner dies holding it, and the
 * process ending when its last thread returns after main called pthread_exit. Every
 * result is independent of scheduling, so the e2e tests compare ccvm's output with
 * the host's line by line.
 *
 * Other modes:
 *   threads cap             create sleeping threads until pthread_create fails; print
 *                           how many and the error (ccvm --vcpus N allows N-1)
 *   threads queue ITEMS     a producer and 4 consumers pass ITEMS work items through a
 *                           condition-variable queue; prints a checksum independent of
 *                           who computed what (snapshot/restore tests)
 *   threads queue-until FILE  the same until FILE exists (looked for every
 *                           QUEUE_STOP_EVERY items), so that a test's snapshots find
 *                           it running on any machine; "queue items N" then names the
 *                           run of `threads queue N` that ends with the same checksum
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

#define N_WORKERS   8
#define INCREMENTS  100000
#define PINGPONGS   10000
#define BARRIER_N   4
#define ROUNDS      1000
#define SEQ_THREADS 200
#define QUEUE_CAP   64
#define CONSUMERS   4
#define QUEUE_STOP_EVERY 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long counter;
static atomic_long acounter;
static __thread long tls_value = -1;

static void *add_locked(void *arg)
{
	(void)arg;
	for (int i = 0; i < INCREMENTS; i++) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
		atomic_fetch_add(&acounter, 1);
	}
	return NULL;
}

static void test_mutex(void)
{
	pthread_t t[N_WORKERS];

	for (int i = 0; i < N_WORKERS; i++)
		pthread_create(&t[i], NULL, add_locked, NULL);
	for (int i = 0; i < N_WORKERS; i++)
		pthread_join(t[i], NULL);
	printf("mutex counter %ld, atomic counter %ld\n", counter, (long)acounter);
}

static int turn, pongs;

static void *ponger(void *arg)
{
	(void)arg;
	for (int i = 0; i < PINGPONGS; i++) {
		pthread_mutex_lock(&lock);
		while (turn != 1)
			pthread_cond_wait(&cond, &lock);
		turn = 0;
		pongs++;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void test_condvar(void)
{
	pthread_t t;

	pthread_create(&t, NULL, ponger, NULL);
	for (int i = 0; i < PINGPONGS; i++) {
		pthread_mutex_lock(&lock);
		while (turn != 0)
			pthread_cond_wait(&cond, &lock);
		turn = 1;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
	}
	pthread_join(t, NULL);
	printf("condvar ping-pong rounds %d\n", pongs);
}

static pthread_barrier_t barrier;
static atomic_int barrier_sum;

static void *barrier_worker(void *arg)
{
	long id = (long)arg;

	tls_value = id;
	for (int r = 0; r < ROUNDS; r++) {
		atomic_fetch_add(&barrier_sum, (int)id);
		pthread_barrier_wait(&barrier);
	}
	return (void *)(tls_value * 10);
}

static void test_barrier_tls(void)
{
	pthread_t t[BARRIER_N];
	long joined = 0;

	tls_value = 100;
	pthread_barrier_init(&barrier, NULL, BARRIER_N);
	for (long i = 0; i < BARRIER_N; i++)
		pthread_create(&t[i], NULL, barrier_worker, (void *)i);
	for (int i = 0; i < BARRIER_N; i++) {
		void *ret;

		pthread_join(t[i], &ret);
		joined += (long)ret;
	}
	printf("barrier sum %d, joined values %ld, main tls %ld\n", (int)barrier_sum, joined,
	       tls_value);
}

static void *square(void *arg)
{
	long v = (long)arg;

	return (void *)(v * v);
}

static void test_sequential(void)
{
	long sum = 0;
	int failed = 0;

	for (long i = 0; i < SEQ_THREADS; i++) {
		pthread_t t;
		void *ret;

		if (pthread_create(&t, NULL, square, (void *)i)) {
			failed++;
			continue;
		}
		pthread_join(t, &ret);
		sum += (long)ret;
	}
	printf("%d threads one after another: sum of squares %ld, failed %d\n", SEQ_THREADS, sum,
	       failed);
}

static pid_t child_tid;

static void *tid_worker(void *arg)
{
	(void)arg;
	child_tid = (pid_t)syscall(SYS_gettid);
	return NULL;
}

static void test_ids(void)
{
	pthread_t t;

	pthread_create(&t, NULL, tid_worker, NULL);
	pthread_join(t, NULL);
	printf("main tid == pid: %s; thread tid differs: %s\n",
	       syscall(SYS_gettid) == getpid() ? "yes" : "no",
	       child_tid != getpid() && child_tid > 0 ? "yes" : "no");
}

static sem_t sem;

static void *detached(void *arg)
{
	(void)arg;
	sem_post(&sem);
	return NULL;
}

static void test_detached_timedwait(void)
{
	pthread_attr_t attr;
	struct timespec dl;
	pthread_t t;
	double t0;
	int rc;

	sem_init(&sem, 0, 0);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_create(&t, &attr, detached, NULL);
	printf("detached thread posted: %s\n", sem_wait(&sem) == 0 ? "yes" : "no");
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += 100 * 1000 * 1000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	t0 = mono();
	pthread_mutex_lock(&lock);
	rc = pthread_cond_timedwait(&cond, &lock, &dl);
	pthread_mutex_unlock(&lock);
	printf("timed wait: %s after >= 90 ms: %s\n", strerror(rc),
	       mono() - t0 >= 0.09 ? "yes" : "no");
}

/* A thread that dies holding a robust mutex: the waiter gets EOWNERDEAD. */
static pthread_mutex_t robust;

static void *robust_owner(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&robust);
	sem_post(&sem);
	usleep(50 * 1000);
	return NULL; /* exits still holding it */
}

static void test_robust(void)
{
	pthread_mutexattr_t a;
	pthread_t t;
	int rc;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&robust, &a);
	pthread_create(&t, NULL, robust_owner, NULL);
	sem_wait(&sem);
	rc = pthread_mutex_lock(&robust); /* blocks until the owner dies */
	printf("robust mutex after its owner died: %s", strerror(rc));
	if (rc == EOWNERDEAD)
		printf(", consistent again: %d", pthread_mutex_consistent(&robust));
	printf(", unlock: %d\n", pthread_mutex_unlock(&robust));
	pthread_join(t, NULL);
}

static void *last_thread(void *arg)
{
	(void)arg;
	usleep(50 * 1000);
	printf("the last thread returns; the process ends\n");
	fflush(stdout);
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

static int cap_mode(void)
{
	int n = 0, rc;
	pthread_t t;

	while ((rc = pthread_create(&t, NULL, sleeper, NULL)) == 0 && n < 1000)
		n++;
	printf("created %d threads, then: %s\n", n, strerror(rc));
	return 0;
}

/* queue mode: a bounded queue under one mutex and two condition variables. */
static uint64_t queue[QUEUE_CAP];
static int q_head, q_len;
static bool q_done;
static pthread_cond_t q_not_empty = PTHREAD_COND_INITIALIZER, q_not_full = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t q_sum;

static uint64_t work(uint64_t item)
{
	uint64_t x = item * 0x9E3779B97F4A7C15ULL;

	for (int i = 0; i < 2000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

static void *consumer(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t item;

		pthread_mutex_lock(&lock);
		while (q_len == 0 && !q_done)
			pthread_cond_wait(&q_not_empty, &lock);
		if (q_len == 0) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		item = queue[q_head];
		q_head = (q_head + 1) % QUEUE_CAP;
		q_len--;
		pthread_cond_signal(&q_not_full);
		pthread_mutex_unlock(&lock);
		atomic_fetch_add(&q_sum, work(item));
	}
}

/* ITEMS items, or with STOP_FILE as many as are made before it exists. */
static int queue_mode(long items, const char *stop_file)
{
	pthread_t t[CONSUMERS];
	long i;

	for (int c = 0; c < CONSUMERS; c++)
		pthread_create(&t[c], NULL, consumer, NULL);
	for (i = 0; stop_file || i < items; i++) {
		if (stop_file && i % QUEUE_STOP_EVERY == 0 && access(stop_file, F_OK) == 0)
			break;
		pthread_mutex_lock(&lock);
		while (q_len == QUEUE_CAP)
			pthread_cond_wait(&q_not_full, &lock);
		queue[(q_head + q_len) % QUEUE_CAP] = (uint64_t)i;
		q_len++;
		pthread_cond_signal(&q_not_empty);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	q_done = true;
	pthread_cond_broadcast(&q_not_empty);
	pthread_mutex_unlock(&lock);
	for (int c = 0; c < CONSUMERS; c++)
		pthread_join(t[c], NULL);
	printf("queue items %ld checksum %016llx\n", i, (unsigned long long)q_sum);
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "cap") == 0)
		return cap_mode();
	if (argc > 2 && strcmp(argv[1], "queue") == 0)
		return queue_mode(atol(argv[2]), NULL);
	if (argc > 2 && strcmp(argv[1], "queue-until") == 0)
		return queue_mode(0, argv[2]);
	test_mutex();
	test_condvar();
	test_barrier_tls();
	test_sequential();
	test_ids();
	test_detached_timedwait();
	test_robust();
	pthread_create(&t, NULL, last_thread, NULL);
	pthread_exit(NULL);
}

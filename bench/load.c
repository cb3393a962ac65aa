/*
 * load.c - host threads that write plain memory, paused and resumed by the snapshot
 * engine (see load.h).
 *
 * A thread checks for a pause request between batches of LOAD_BATCH updates and parks
 * under the lock, so once load_pause returns no thread writes until load_resume: the
 * memory is still, as a VM's is while its vCPUs are paused. Each batch is timed, the
 * park included, so a snapshot's pause and its copy-on-write traps show up as long
 * batches: the writers' own view of a stall.
 *
 * With a rate (open loop), each thread has its share of it and a schedule of intended
 * start times; an update that comes late is still timed from its intended start, as
 * bench/ycsb times requests, so a stall counts against every update it delayed, not
 * only the one that met it (no coordinated omission).
 */
#include "load.h"
#include "../base/mono.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Log-linear bucket of @ns: exact below 16, then 16 buckets per power of two (at most
 * 1/16 too low). */
static unsigned load_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < 16)
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	return (msb - 3) * 16 + (unsigned)((ns >> (msb - 4)) & 15);
}

/* The smallest duration that falls in bucket @b. */
static uint64_t load_bucket_floor(unsigned b)
{
	unsigned msb = b / 16 + 3;

	if (b < 16)
		return b;
	return (1ULL << msb) | ((uint64_t)(b % 16) << (msb - 4));
}

void load_block_fill(const struct load_opts *o, uint64_t *blk, uint64_t b, uint64_t value)
{
	if (o->data == LOAD_DATA_TEXT) {
		zipf_text_fill((char *)blk, value);
	} else if (o->data == LOAD_DATA_DUMP) {
		memcpy(blk, o->dump + b % (o->dump_len / LOAD_BLOCK) * LOAD_BLOCK, LOAD_BLOCK);
		blk[0] = value;
	} else {
		zipf_block_fill(blk, value);
	}
}

/* Between batches: park while a pause is asked for. */
static void load_maybe_park(struct load *l)
{
	if (!__atomic_load_n(&l->pause_req, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&l->lock);
	l->parked++;
	pthread_cond_broadcast(&l->cond);
	while (l->pause_req && !l->stop)
		pthread_cond_wait(&l->cond, &l->lock);
	l->parked--;
	pthread_mutex_unlock(&l->lock);
}

/* A dirty-logging fault as a VM's vCPU takes it: spun, as it takes CPU time. */
static void load_log_fault(struct load *l)
{
	uint64_t until = mono_ns() + l->o.log_fault_us * 1000ULL;

	__atomic_fetch_add(&l->log_faults, 1, __ATOMIC_RELAXED);
	while (mono_ns() < until)
		;
}

/* Block @b was written: its pages into the dirty log, after the write (a round that
 * reads the log before the mark copies the block again in the next one). A page that
 * was watched while logging is on costs its fault. */
static void load_mark(struct load *l, uint64_t b)
{
	for (uint64_t p = b * LOAD_BLOCK / PAGE_SIZE; p <= ((b + 1) * LOAD_BLOCK - 1) / PAGE_SIZE; p++) {
		uint64_t bit = 1ULL << (p % 64);
		uint64_t old = __atomic_fetch_or(&l->dirty[p / 64], bit, __ATOMIC_ACQ_REL);

		if (!(old & bit) && l->o.log_fault_us && __atomic_load_n(&l->logging, __ATOMIC_ACQUIRE))
			load_log_fault(l);
	}
}

static int load_log_logging(void *ctx, bool on)
{
	struct load *l = ctx;

	/* As KVM's with KVM_DIRTY_LOG_INITIALLY_SET: every page reads as written, none is
	 * watched; and once off, nothing is. */
	if (!on)
		__atomic_store_n(&l->logging, false, __ATOMIC_RELEASE);
	for (uint64_t i = 0; i < l->dirty_words; i++)
		__atomic_store_n(&l->dirty[i], ~0ULL, __ATOMIC_RELEASE);
	if (on)
		__atomic_store_n(&l->logging, true, __ATOMIC_RELEASE);
	return 0;
}

static int load_log_watch(void *ctx, uint64_t *pages)
{
	struct load *l = ctx;

	for (uint64_t i = 0; i < l->dirty_words; i++)
		if (pages[i])
			__atomic_fetch_and(&l->dirty[i], ~pages[i], __ATOMIC_ACQ_REL);
	return 0;
}

static int load_log_get(void *ctx, uint64_t *bitmap)
{
	struct load *l = ctx;

	for (uint64_t i = 0; i < l->dirty_words; i++)
		bitmap[i] = __atomic_load_n(&l->dirty[i], __ATOMIC_ACQUIRE);
	return 0;
}

static const struct tracker_log_ops load_log_ops = {
	.logging = load_log_logging, .watch = load_log_watch, .get = load_log_get,
};

void load_dirty_log(struct load *l, struct tracker_log *out)
{
	*out = (struct tracker_log){ .ops = &load_log_ops, .ctx = l };
}

/* One update of a Zipf-chosen block. */
static void load_update(struct load *l, struct load_thread *t, uint64_t *words)
{
	uint64_t rank = zipf_sample(&l->z, &t->rng) - 1;
	uint64_t b = l->o.scatter ? zipf_scatter(&l->perm, rank) : rank;

	load_block_fill(&l->o, words + b * (LOAD_BLOCK / 8), b, splitmix64(&t->rng));
	load_mark(l, b);
}

#define LOAD_SPIN_NS 50000 /* closer to an intended start than this: spin, not sleep */

/* Until mono_ns() reaches @at (sleeping while far from it). */
static void load_wait_until(uint64_t at)
{
	uint64_t now = mono_ns();

	if (at > now + LOAD_SPIN_NS) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)(at - now - LOAD_SPIN_NS) };

		while (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		nanosleep(&ts, NULL);
	}
	while (mono_ns() < at)
		;
}

/* Open loop: update i is due at t0 + i / (the thread's share of the rate). */
static void load_open_loop(struct load *l, struct load_thread *t, uint64_t *words)
{
	double per_ns = 1e9 / (l->o.rate / l->o.threads);
	uint64_t i = 0;

	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
		uint64_t due = l->t0_ns + (uint64_t)((double)i++ * per_ns), d;
		int which;

		load_wait_until(due);
		which = __atomic_load_n(&l->busy, __ATOMIC_RELAXED) ? LOAD_BUSY : LOAD_IDLE;
		if (mono_ns() - due > t->late_ns)
			t->late_ns = mono_ns() - due;
		load_maybe_park(l);
		load_update(l, t, words);
		d = mono_ns() - due;
		t->lat[which][load_bucket(d)]++;
		if (d > t->lat_max[which])
			t->lat_max[which] = d;
		__atomic_fetch_add(&t->updates, 1, __ATOMIC_RELAXED);
	}
}

static void *load_thread_main(void *arg)
{
	struct load_thread *t = arg;
	struct load *l = t->l;
	uint64_t *words = (uint64_t *)(void *)l->mem->host;

	if (!pthread_getcpuclockid(pthread_self(), &t->clock))
		__atomic_store_n(&t->clocked, true, __ATOMIC_RELEASE);
	if (l->o.rate > 0)
		load_open_loop(l, t, words);
	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
		uint64_t t0 = mono_ns(), d;

		load_maybe_park(l);
		for (int i = 0; i < LOAD_BATCH; i++)
			load_update(l, t, words);
		d = mono_ns() - t0;
		t->hist[load_bucket(d)]++;
		if (d > t->max_batch_ns)
			t->max_batch_ns = d;
		__atomic_fetch_add(&t->updates, LOAD_BATCH, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&l->lock);
	l->live--;
	__atomic_store_n(&t->clocked, false, __ATOMIC_RELEASE); /* its time is kept */
	__atomic_fetch_add(&l->cpu_done_ns, mono_thread_cpu_ns(), __ATOMIC_RELAXED);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int load_start(struct load *l, struct gmem *mem, const struct load_opts *o)
{
	uint64_t rng = o->seed;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	if (o->threads < 0 || o->threads > LOAD_MAX_THREADS || !(o->alpha > 0) || o->rate < 0 ||
	    (o->rate > 0 && !o->threads) ||
	    mem->size < LOAD_BLOCK || (o->data == LOAD_DATA_DUMP && o->dump_len < LOAD_BLOCK))
		return -EINVAL;
	l->mem = mem;
	l->o = *o;
	l->nblocks = mem->size / LOAD_BLOCK;
	l->t = calloc(o->threads ? (size_t)o->threads : 1, sizeof(*l->t));
	l->ref = o->reference ? malloc(mem->size) : NULL;
	l->dirty_words = (mem->size / PAGE_SIZE + 63) / 64;
	l->dirty = calloc(l->dirty_words, sizeof(uint64_t));
	if (!l->t || (o->reference && !l->ref) || !l->dirty)
		return -ENOMEM;
	if (o->scatter)
		zipf_scatter_init(&l->perm, l->nblocks, &rng);
	zipf_init(&l->z, l->nblocks, o->alpha);
	for (uint64_t b = 0; b < l->nblocks; b++)
		load_block_fill(o, (uint64_t *)(void *)mem->host + b * (LOAD_BLOCK / 8), b,
				o->data == LOAD_DATA_DUMP ? ((uint64_t *)(void *)o->dump)[b %
					(o->dump_len / LOAD_BLOCK) * (LOAD_BLOCK / 8)] : b);
	l->t0_ns = mono_ns();
	for (int i = 0; i < o->threads; i++) {
		l->t[i].l = l;
		l->t[i].rng = o->seed * 1000003ULL + (uint64_t)i + 1;
		pthread_mutex_lock(&l->lock);
		l->live++;
		pthread_mutex_unlock(&l->lock);
		if (pthread_create(&l->t[i].th, NULL, load_thread_main, &l->t[i])) {
			l->live--;
			load_stop(l);
			return -EAGAIN;
		}
		l->started++;
	}
	return 0;
}

void load_stop(struct load *l)
{
	pthread_mutex_lock(&l->lock);
	__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	for (int i = 0; i < l->started; i++)
		pthread_join(l->t[i].th, NULL);
	l->started = 0;
}

void load_fini(struct load *l)
{
	load_stop(l);
	free(l->t);
	free(l->ref);
	free(l->dirty);
	l->t = NULL;
	l->ref = NULL;
	l->dirty = NULL;
}

uint64_t load_updates(struct load *l)
{
	uint64_t n = 0;

	for (int i = 0; i < l->o.threads; i++)
		n += __atomic_load_n(&l->t[i].updates, __ATOMIC_RELAXED);
	return n;
}

uint64_t load_max_batch_ns(const struct load *l)
{
	uint64_t m = 0;

	for (int i = 0; i < l->o.threads; i++)
		if (l->t[i].max_batch_ns > m)
			m = l->t[i].max_batch_ns;
	return m;
}

/* A histogram of thread @t: its batch durations (LOAD_BATCHES) or its latencies of
 * @which (LOAD_IDLE, LOAD_BUSY). */
#define LOAD_BATCHES (-1)
static const uint64_t *load_hist_of(const struct load_thread *t, int which)
{
	return which == LOAD_BATCHES ? t->hist : t->lat[which];
}

/* The value at quantile @q of histogram @which summed over the threads, @max when the
 * buckets run out, 0 when it is empty. */
static uint64_t load_quantile(const struct load *l, int which, double q, uint64_t max)
{
	uint64_t total = 0, seen = 0, want;

	for (int i = 0; i < l->o.threads; i++)
		for (unsigned b = 0; b < LOAD_HIST_BUCKETS; b++)
			total += load_hist_of(&l->t[i], which)[b];
	if (!total)
		return 0;
	want = (uint64_t)(q * (double)total);
	want = want >= total ? total - 1 : want;
	for (unsigned b = 0; b < LOAD_HIST_BUCKETS; b++) {
		for (int i = 0; i < l->o.threads; i++)
			seen += load_hist_of(&l->t[i], which)[b];
		if (seen > want)
			return load_bucket_floor(b);
	}
	return max;
}

uint64_t load_batch_quantile_ns(const struct load *l, double q)
{
	return load_quantile(l, LOAD_BATCHES, q, load_max_batch_ns(l));
}

void load_set_busy(struct load *l, bool busy)
{
	__atomic_store_n(&l->busy, busy, __ATOMIC_RELAXED);
}

uint64_t load_latency_count(const struct load *l, int which)
{
	uint64_t n = 0;

	for (int i = 0; i < l->o.threads; i++)
		for (unsigned b = 0; b < LOAD_HIST_BUCKETS; b++)
			n += l->t[i].lat[which][b];
	return n;
}

uint64_t load_latency_max_ns(const struct load *l, int which)
{
	uint64_t m = 0;

	for (int i = 0; i < l->o.threads; i++)
		if (l->t[i].lat_max[which] > m)
			m = l->t[i].lat_max[which];
	return m;
}

uint64_t load_latency_quantile_ns(const struct load *l, int which, double q)
{
	return load_quantile(l, which, q, load_latency_max_ns(l, which));
}

int load_pause(void *ctx)
{
	struct load *l = ctx;

	pthread_mutex_lock(&l->lock);
	__atomic_add_fetch(&l->pause_req, 1, __ATOMIC_ACQ_REL);
	while (l->parked < l->live)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
	return 0;
}

void load_resume(void *ctx)
{
	struct load *l = ctx;

	pthread_mutex_lock(&l->lock);
	if (l->pause_req > 0)
		__atomic_sub_fetch(&l->pause_req, 1, __ATOMIC_ACQ_REL);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

int load_capture(void *ctx, struct img_writer *img)
{
	(void)ctx;
	(void)img;
	return 0;
}

void load_at_instant(void *ctx, const char *file)
{
	struct load *l = ctx;

	(void)file;
	if (l->ref)
		memcpy(l->ref, l->mem->host, l->mem->size);
	l->instants++;
}

/* The writers' CPU time so far, as a VM's is its vCPUs' (vm_guest_cpu_ns, which says
 * why no lock is taken): compaction in idle time waits while they work. */
static uint64_t load_cpu_ns(void *ctx)
{
	struct load *l = ctx;
	uint64_t ns = __atomic_load_n(&l->cpu_done_ns, __ATOMIC_RELAXED);

	for (int i = 0; i < l->o.threads; i++) /* (those not started are not clocked) */
		if (__atomic_load_n(&l->t[i].clocked, __ATOMIC_ACQUIRE))
			ns += mono_clock_ns(l->t[i].clock);
	return ns;
}

const struct snap_ops load_snap_ops = {
	.pause = load_pause, .resume = load_resume, .capture = load_capture,
	.at_instant = load_at_instant, .guest_cpu_ns = load_cpu_ns,
};

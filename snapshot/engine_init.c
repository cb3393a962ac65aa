/*
 * engine_init.c - the snapshot engine built and torn down: its stages wired to each
 * other, lowest first (engine_impl.h), and the settings callers may read and change.
 */
#include "engine_impl.h"
#include "compact.h"
#include "../base/log.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void snap_config_defaults(struct snap_config *c)
{
	memset(c, 0, sizeof(*c));
	c->tune = (struct snap_tuning){ .fault_threads = SNAP_DEFAULT_FAULT_THREADS,
					.fault_rt = SNAP_DEFAULT_FAULT_RT,
					.copier_nice = SNAP_DEFAULT_COPIER_NICE,
					.writer_nice = SNAP_DEFAULT_WRITER_NICE,
					.pool_keep_s = SNAP_DEFAULT_POOL_KEEP_S,
					.held_compress = SNAP_DEFAULT_HELD_COMPRESS,
					 .background_idle = SNAP_DEFAULT_BACKGROUND_IDLE };
	c->def = (struct snap_request){ .policy = SNAP_CCOW, .threshold = SNAP_DEFAULT_THRESHOLD,
					.precopy = SNAP_DEFAULT_PRECOPY,
					.pause_budget_ms = SNAP_DEFAULT_PAUSE_BUDGET_MS,
					.codec = SNAP_DEFAULT_CODEC };
}

/* The data path's sink: a page a fault saves itself, and its failures. */
static int engine_save(void *ctx, uint64_t p, const uint8_t *data)
{
	return writer_save_page(&((struct snap_engine *)ctx)->wr, p, data);
}

static void engine_fail(void *ctx, int rc, const char *what)
{
	snap_fail(ctx, rc, what);
}

/* A pool slot holds a region; a pool smaller than one region holds single pages. */
static size_t engine_slot_size(size_t pool_bytes, uint64_t region_size)
{
	size_t slot = PAGE_SIZE;

	if (pool_bytes >= region_size)
		return (size_t)region_size;
	while (slot * 2 <= pool_bytes)
		slot *= 2;
	return slot;
}

static int engine_stages(struct snap_engine *e, size_t pool_bytes)
{
	const struct cow_sink sink = { .save = engine_save, .fail = engine_fail, .ctx = e };
	int rc;

	if (ptab_init(&e->pt, e->size) || plan_init(&e->plan, e->size, e->region_size) ||
	    observe_init(&e->obs, e->plan.n_regions, e->pt.pages))
		return -ENOMEM;
	track_init(&e->track, &e->pt);
	rc = pool_init(&e->pool, pool_bytes, engine_slot_size(pool_bytes, e->region_size));
	if (rc) {
		log_err("cannot reserve the %zu MiB snapshot page pool: %s", pool_bytes >> 20,
			strerror(-rc));
		return rc;
	}
	if (cow_init(&e->cow, e->host, e->size, &e->pt, &e->plan, &e->track, &e->pool, &e->tune,
		     &sink) ||
	    squeeze_init(&e->sq, &e->pt, &e->pool, &e->plan, e->size) ||
	    writer_init(&e->wr, e->host, e->size, &e->pt, &e->plan, &e->sq, &e->cow.wp,
			e->tracker, &e->stopping))
		return -ENOMEM;
	forkpol_init(&e->fork, &e->wr, &e->stopping, snap_fork_done, e);
	return rounds_init(&e->rounds, e->t.mem, e->tracker);
}

/* The compactor's thread finished with an image: whoever listens is told. */
static void engine_compacted(void *ctx)
{
	struct snap_engine *e = ctx;
	void (*fn)(void *);
	void *arg;

	pthread_mutex_lock(&e->lock);
	fn = e->on_compacted;
	arg = e->on_compacted_ctx;
	pthread_mutex_unlock(&e->lock);
	if (fn)
		fn(arg);
}

int snap_engine_init(struct snap_engine *e, const struct snap_target *t,
		     const struct snap_config *cfg)
{
	memset(e, 0, sizeof(*e));
	e->cow.wp.fd = -1; /* (cow_fini is safe on it whatever fails) */
	e->t = *t;
	e->host = t->mem->host;
	e->size = t->mem->size;
	e->tracker = cfg->tracker;
	e->mem_cap = cfg->pool_bytes;
	e->region_size = cfg->region_size;
	e->tune = cfg->tune;
	e->def = cfg->def;
	for (int i = 0; i < cfg->n_dirs && i < SNAP_MAX_IMAGE_DIRS; i++)
		e->image_dirs[e->n_image_dirs++] = cfg->dirs[i];
	pthread_mutex_init(&e->lock, NULL);
	cauto_init(&e->cauto);
	compactor_init(&e->compactor, COMPACT_LEVEL, e->tune.writer_nice, true, engine_compacted, e);
	if (t->ops->guest_cpu_ns)
		compactor_watch(&e->compactor, t->ops->guest_cpu_ns, t->ctx);
	return engine_stages(e, cfg->pool_bytes);
}

int snap_engine_new(const struct snap_target *t, const struct snap_config *cfg,
		    struct snap_engine **out)
{
	struct snap_engine *e = malloc(sizeof(*e));
	int rc;

	if (!e)
		return -ENOMEM;
	rc = snap_engine_init(e, t, cfg);
	if (rc) {
		snap_engine_fini(e);
		free(e);
		return rc;
	}
	*out = e;
	return 0;
}

void snap_engine_on_done(struct snap_engine *e, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&e->lock);
	e->on_done = fn;
	e->on_done_ctx = ctx;
	pthread_mutex_unlock(&e->lock);
}

void snap_engine_on_compacted(struct snap_engine *e, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&e->lock);
	e->on_compacted = fn;
	e->on_compacted_ctx = ctx;
	pthread_mutex_unlock(&e->lock);
}

void snap_compaction_figures(struct snap_engine *e, struct compactor_figures *out)
{
	compactor_figures(&e->compactor, out);
}

void snap_engine_compaction_hold(struct snap_engine *e, bool on)
{
	compactor_hold(&e->compactor, on);
}

bool snap_compaction_last(struct snap_engine *e, struct compactor_result *out)
{
	return compactor_last(&e->compactor, out);
}

const struct snap_request *snap_engine_defaults(const struct snap_engine *e)
{
	return &e->def;
}

struct tracker *snap_engine_tracker(const struct snap_engine *e)
{
	return e->tracker;
}

void snap_engine_stop(struct snap_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_mutex_unlock(&e->lock);
	if (e->bg_joinable) /* the writer or the fork's waiter: it sees stopping */
		pthread_join(e->bg, NULL);
	e->bg_joinable = false;
	cow_threads_stop(&e->cow);
	squeeze_thread_stop(&e->sq);
	compactor_stop(&e->compactor);
}

void snap_engine_fini(struct snap_engine *e)
{
	snap_engine_stop(e);
	cow_fini(&e->cow);
	squeeze_fini(&e->sq);
	rounds_fini(&e->rounds);
	pool_fini(&e->pool);
	writer_fini(&e->wr);
	observe_fini(&e->obs);
	plan_fini(&e->plan);
	ptab_fini(&e->pt);
	cauto_fini(&e->cauto);
	compactor_fini(&e->compactor);
	pthread_mutex_destroy(&e->lock);
}

void snap_engine_free(struct snap_engine *e)
{
	if (!e)
		return;
	snap_engine_fini(e);
	free(e);
}

void snap_before_discard(struct snap_engine *e, uint64_t gpa, uint64_t len)
{
	uint64_t first = gpa / PAGE_SIZE, end = (gpa + len) / PAGE_SIZE;

	if (end > e->size / PAGE_SIZE)
		end = e->size / PAGE_SIZE;
	if (first >= end)
		return;
	track_unprotected(&e->track, first, end - first); /* rewritten without a fault */
	if (!__atomic_load_n(&e->threads_live, __ATOMIC_ACQUIRE))
		return;
	for (uint64_t p = first; p < end; p++)
		cow_page(&e->cow, p, false);
}

bool snap_busy(struct snap_engine *e)
{
	bool busy;

	pthread_mutex_lock(&e->lock);
	busy = e->busy;
	pthread_mutex_unlock(&e->lock);
	return busy;
}

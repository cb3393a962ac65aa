/*
 * compactor.c - images compacted in idle time. A snapshot stores what it has the time
 * to compress, and pre-copy rounds leave pages in the patch area; afterwards, when the
 * machine has time to spare, this thread rewrites each new image as `ccvm compact`
 * does (compact.c): zstd frames, patches folded in, renamed over the old one when
 * whole. It runs under SCHED_IDLE (a core nothing else wants, as zcache compresses
 * only when there is CPU to spare), reads and writes with O_DIRECT (the page cache is
 * the guest's), and holds a chunk's buffers at a time. A snapshot or a migration wants
 * the disk and the cores: while one runs the thread holds still between two chunks, and
 * goes on after. So does it while the guest works (its threads' CPU time, looked at
 * every COMPACTOR_LOOK_NS, grew by more than COMPACTOR_GUEST_BUSY of a core), and it
 * starts an image only after COMPACTOR_REST_NS of rest: on our nested hosts the CPU
 * an idle-priority thread takes still costs a busy guest's tail (compactor.h), so
 * idle time is the guest's, not only the scheduler's. Stopping gives the image being
 * compacted up, as it was.
 */
#include "compactor.h"
#include "compact.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/role.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void compactor_init(struct compactor *c, int level, int nice, bool idle,
		    void (*done)(void *ctx), void *ctx)
{
	memset(c, 0, sizeof(*c));
	worker_init(&c->w);
	c->level = level;
	c->nice = nice;
	c->idle = idle;
	c->done = done;
	c->ctx = ctx;
}

void compactor_watch(struct compactor *c, uint64_t (*cpu_ns)(void *ctx), void *ctx)
{
	c->guest_cpu_ns = cpu_ns;
	c->guest_ctx = ctx;
}

/* Unlocked: whether the guest's threads took more than COMPACTOR_GUEST_BUSY of a core
 * since the last look; this look is the next one's start. */
static bool compactor_look(struct compactor *c)
{
	uint64_t now = mono_ns(), cpu = c->guest_cpu_ns(c->guest_ctx);
	uint64_t took = cpu > c->look_cpu ? cpu - c->look_cpu : 0;
	uint64_t span = now - c->look_ns;

	c->look_ns = now;
	c->look_cpu = cpu;
	return span && (double)took > COMPACTOR_GUEST_BUSY * (double)span;
}

/* Under the lock: whether the compactor may go on as far as the guest is concerned;
 * false once it has waited a while (on the clock, a hold or a stop: look again). */
static bool compactor_guest_lets(struct compactor *c)
{
	uint64_t since = mono_ns() - c->look_ns;
	struct timespec until;
	bool busy;

	if (!c->guest_cpu_ns || (!c->resting && since < COMPACTOR_LOOK_NS))
		return true;
	if (c->resting && since < COMPACTOR_REST_NS) {
		worker_deadline((double)(COMPACTOR_REST_NS - since) / 1e9, &until);
		worker_wait_until(&c->w, &until);
		return false;
	}
	pthread_mutex_unlock(&c->w.lock); /* the source may take the VM's lock */
	busy = compactor_look(c);
	pthread_mutex_lock(&c->w.lock);
	c->resting = busy;
	c->fig.guest_busy = busy;
	return !busy;
}

/* Between two chunks: wait while a snapshot or a migration runs, or the guest works;
 * -ECANCELED once the compactor stops. */
static int compactor_yield(void *ctx)
{
	struct compactor *c = ctx;
	int rc;

	pthread_mutex_lock(&c->w.lock);
	c->fig.cpu_ns = mono_thread_cpu_ns();
	for (;;) {
		c->fig.held = c->holds > 0;
		while (c->holds > 0 && !c->w.stop)
			worker_wait(&c->w);
		c->fig.held = false;
		if (c->w.stop || compactor_guest_lets(c))
			break;
	}
	c->fig.guest_busy = false;
	rc = c->w.stop ? -ECANCELED : 0;
	pthread_mutex_unlock(&c->w.lock);
	return rc;
}

/* One image, unlocked; its result recorded under the lock. */
static void compactor_one(struct compactor *c, char *path)
{
	struct compact_job job = { .level = c->level, .direct = true, .yield = compactor_yield,
				   .ctx = c };
	struct compactor_result res = { .ok = true };
	uint64_t t0 = mono_ns();
	int rc;

	if (c->guest_cpu_ns) { /* the image's first chunk after a span of rest */
		c->resting = true;
		c->look_ns = t0;
		c->look_cpu = c->guest_cpu_ns(c->guest_ctx);
		pthread_mutex_lock(&c->w.lock);
		c->fig.guest_busy = true; /* (until a look says otherwise) */
		pthread_mutex_unlock(&c->w.lock);
	}
	rc = img_compact(path, &job, res.error);

	snprintf(res.file, sizeof(res.file), "%s", path);
	res.ok = !rc;
	res.bytes_in = job.bytes_in;
	res.bytes_out = job.bytes_out;
	res.ms = (mono_ns() - t0) / 1000000ULL;
	if (rc && rc != -ECANCELED)
		log_warn("compacting %s: %s", path, res.error);
	pthread_mutex_lock(&c->w.lock);
	c->fig.running = false;
	c->fig.cpu_ns = mono_thread_cpu_ns();
	if (!rc) {
		c->fig.images++;
		c->fig.bytes_in += job.bytes_in;
		c->fig.bytes_out += job.bytes_out;
	} else if (rc != -ECANCELED) {
		c->fig.failed++;
	}
	if (rc != -ECANCELED)
		c->last = res;
	pthread_mutex_unlock(&c->w.lock);
	if (rc != -ECANCELED && c->done)
		c->done(c->ctx);
}

static void *compactor_thread(void *arg)
{
	struct compactor *c = arg;

	role_enter(ROLE_SNAPSHOT);
	worker_background(c->nice, c->idle);
	pthread_mutex_lock(&c->w.lock);
	while (!c->w.stop) {
		char *path;

		if (!c->n) {
			worker_wait(&c->w);
			continue;
		}
		path = c->queue[0];
		memmove(c->queue, c->queue + 1, (size_t)(c->n - 1) * sizeof(c->queue[0]));
		c->n--;
		c->fig.running = true;
		pthread_mutex_unlock(&c->w.lock);
		compactor_one(c, path);
		free(path);
		pthread_mutex_lock(&c->w.lock);
	}
	pthread_mutex_unlock(&c->w.lock);
	return NULL;
}

int compactor_add(struct compactor *c, const char *path)
{
	char *copy = strdup(path);

	if (!copy)
		return -ENOMEM;
	if (!c->w.live && worker_start(&c->w, compactor_thread, c)) {
		free(copy);
		return -EAGAIN;
	}
	pthread_mutex_lock(&c->w.lock);
	if (c->n == COMPACTOR_QUEUE) { /* snapshots come faster than it compacts */
		log_debug("compaction of %s skipped: %d images wait", c->queue[0], c->n);
		c->fig.dropped++;
		free(c->queue[0]);
		memmove(c->queue, c->queue + 1, (size_t)(c->n - 1) * sizeof(c->queue[0]));
		c->n--;
	}
	c->queue[c->n++] = copy;
	pthread_cond_broadcast(&c->w.cond);
	pthread_mutex_unlock(&c->w.lock);
	return 0;
}

void compactor_hold(struct compactor *c, bool on)
{
	pthread_mutex_lock(&c->w.lock);
	c->holds += on ? 1 : -1;
	if (c->holds < 0)
		c->holds = 0;
	pthread_cond_broadcast(&c->w.cond);
	pthread_mutex_unlock(&c->w.lock);
}

void compactor_figures(struct compactor *c, struct compactor_figures *out)
{
	pthread_mutex_lock(&c->w.lock);
	*out = c->fig;
	out->waiting = (uint64_t)c->n;
	pthread_mutex_unlock(&c->w.lock);
}

bool compactor_last(struct compactor *c, struct compactor_result *out)
{
	bool any;

	pthread_mutex_lock(&c->w.lock);
	any = c->last.file[0] != 0;
	*out = c->last;
	pthread_mutex_unlock(&c->w.lock);
	return any;
}

void compactor_stop(struct compactor *c)
{
	worker_stop(&c->w);
	pthread_mutex_lock(&c->w.lock);
	for (int i = 0; i < c->n; i++)
		free(c->queue[i]);
	c->n = 0;
	pthread_mutex_unlock(&c->w.lock);
}

void compactor_fini(struct compactor *c)
{
	compactor_stop(c);
	worker_destroy(&c->w);
}

/*
 * codec_auto.c - a codec and level for each chunk under `--compress auto`, the ones that
 * keep the disk busy without making the compressors the bottleneck.
 *
 * No fixed codec suits every machine. zstd-1 compresses ~0.5 GB/s on one of our cores
 * and the disk takes ~0.75-1 GB/s with O_DIRECT: with a core busy with the guest,
 * compressing is slower than writing raw; on a slow disk, or with idle cores, it is
 * the other way round. Predicting which from measured rates failed here twice
 * (docs/evaluation.md): compressing inside a snapshot ran at a third of its rate alone,
 * and a throttled disk (a token bucket) read 1.5x its rate after idling. So auto does
 * not predict; it watches where the time goes, as zstd's --adapt does. Each of the
 * snapshot's N I/O threads compresses a chunk and then writes it. While one compresses,
 * the others' writes keep the disk busy: when those take longer than the compressing,
 * (N-1) * write time > compress time, the disk is the bottleneck, and compressing more
 * costs nothing and shrinks what the disk has to take; when they take less, the
 * compressors are the bottleneck. So auto holds a place on a ladder of codecs (raw,
 * LZ4 -4, LZ4 1, zstd -1, 1, 3) and moves it by the difference of the two over their
 * sum, smoothed over the last chunks. A fractional place mixes the two rungs around
 * it, chunk by chunk, and the mix settles where the compressors just keep up with the
 * disk: the fastest point, and on a slow disk or with idle cores the smallest too. The
 * place stays an eighth of a rung above raw at least (CAUTO_STEP_MIN): at raw alone
 * nothing would be compressed, so nothing seen could move it back up. A
 * throttled disk that banked credit takes writes fast for a while, so auto steps down,
 * and climbs back as the credit drains. With one thread nothing overlaps: compressing
 * pays when the write time it saves, at the disk's measured rate, exceeds its own.
 *
 * Before any of that, a chunk is probed: if LZ4 does not shrink its first 64 KiB by an
 * eighth it is stored raw, as ZFS's early abort does.
 *
 * The overlap rule reads a write's time as the disk's. It is not where the threads
 * wait for a core: on our 2-core hosts, with the guest on one, the fast disk's writes
 * waited on the run queue 17-43% of their time (3-12% behind a 200 MB/s throttle), so
 * the rule climbed and compressing made snapshots 1.34x slower than raw. What tells
 * the two apart is idle CPU. So every CAUTO_WINDOW_NS auto adds the host's idle time
 * (/proc/stat) to what its compressions took on a core: the CPU compressing may use
 * without slowing the guest or the writes. When two
 * windows in a row had less than CAUTO_SPARE_MIN of a core, chunks go raw, without a
 * probe, and the image is compacted in idle time after the snapshot instead
 * (compact.c). One raw window with CAUTO_SPARE_BACK idle, and auto compresses again
 * (writing raw, the throttled disk left 0.6-0.9 of a core idle, the fast one
 * 0.15-0.41); one window with CAUTO_SPARE_HIGH, and it climbs a rung: there is a core
 * the compressors could use and do not. Such a window in this snapshot or the last
 * also keeps windows short of CPU from turning auto raw: behind the throttle, the
 * first windows of a snapshot, while the disk spends its banked credit, had 0.2-0.35
 * of a core spare. The answer carries to the next snapshot. (Windows that compress
 * count what their compressing took as spare, yet on the fast disk that CPU would
 * have gone to writing: such windows reached 0.45-0.69 there, so they do not end the
 * raw state; only raw windows, idle alone, do.)
 */
#include "codec_auto.h"
#include "../base/hostcpu.h"
#include "../base/mono.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define CAUTO_START 2.0         /* LZ4 1: the ladder's place before anything is seen */
#define CAUTO_MOVE 0.08         /* rungs per chunk at most, either way */
#define CAUTO_EWMA 0.08         /* the weight of each chunk's times */
#define CAUTO_DISK_SEED 0.8e9   /* bytes/s, O_DIRECT on our machines */
#define CAUTO_DISK_MIN (8ull << 20) /* a snapshot's own disk rate is used past this */

static const struct {
	enum img_codec codec;
	int level;
} cauto_ladder[CAUTO_RUNGS] = {
	{ IMG_CODEC_NONE, 0 }, { IMG_CODEC_LZ4, -4 }, { IMG_CODEC_LZ4, 1 },
	{ IMG_CODEC_ZSTD, -1 }, { IMG_CODEC_ZSTD, 1 }, { IMG_CODEC_ZSTD, 3 },
};

void cauto_init(struct codec_auto *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	a->disk_rate = CAUTO_DISK_SEED;
	a->step = CAUTO_START;
	a->threads = 1;
	a->idle_ns = hostcpu_idle_ns;
}

void cauto_fini(struct codec_auto *a)
{
	pthread_mutex_destroy(&a->lock);
}

/* A window of spare CPU starts now. Called with the lock held. */
static void cauto_window_start(struct codec_auto *a, uint64_t now)
{
	a->win_ns = now;
	a->win_cpu_ns = 0;
	if (a->idle_ns && a->idle_ns(&a->win_idle_ns))
		a->win_ns = 0; /* not readable: no window */
}

/* When a window has passed: the cores spare in it. Raw once CAUTO_WINDOWS_AGAINST
 * windows in a row had less than CAUTO_SPARE_MIN, unless a window of this snapshot or
 * the last had CAUTO_SPARE_HIGH (the disk, not the CPU, held the writes back then: a
 * throttle's banked credit that runs out); compressing again at once when a raw
 * window has CAUTO_SPARE_BACK idle, and a rung higher after one with CAUTO_SPARE_HIGH:
 * that CPU compresses for free. Called with the lock held. */
static void cauto_window(struct codec_auto *a)
{
	uint64_t now = mono_ns(), idle;

	if (!a->idle_ns)
		return;
	if (!a->win_ns) {
		cauto_window_start(a, now);
		return;
	}
	if (now - a->win_ns < CAUTO_WINDOW_NS || a->idle_ns(&idle))
		return;
	/* (iowait may go back in /proc/stat when a task moves between cores) */
	idle = idle > a->win_idle_ns ? idle - a->win_idle_ns : 0;
	a->spare = (double)(idle + a->win_cpu_ns) / (double)(now - a->win_ns);
	if (a->threads > 1) /* (one thread's own pauses between writes are not the disk's) */
		a->peak = fmax(a->peak, a->spare);
	a->against = a->spare < CAUTO_SPARE_MIN ? a->against + 1 : 0;
	if (a->raw && a->spare >= CAUTO_SPARE_BACK)
		a->raw = false;
	else if (a->against >= CAUTO_WINDOWS_AGAINST && a->peak < CAUTO_SPARE_HIGH &&
		 a->last_peak < CAUTO_SPARE_HIGH)
		a->raw = true;
	if (a->spare >= CAUTO_SPARE_HIGH)
		a->step = fmin((double)(CAUTO_RUNGS - 1), a->step + CAUTO_SPARE_CLIMB);
	cauto_window_start(a, now);
}

void cauto_begin(struct codec_auto *a, int threads)
{
	pthread_mutex_lock(&a->lock);
	a->win_ns = 0;
	a->threads = threads > 0 ? threads : 1;
	a->gain = a->cost = 0;
	a->inflight = a->compressing = 0;
	a->since_ns = mono_ns();
	a->busy_ns = a->disk_bytes = a->comp_busy_ns = a->comp_in = a->comp_ns = 0;
	a->write_ns = a->saved_ns = 0;
	a->seen_comp_ns = a->seen_write_ns = a->seen_saved_ns = 0;
	pthread_mutex_unlock(&a->lock);
}

/* The time since the last change into the disk's busy time when a write was in flight,
 * and the compressors' when one ran: their unions. Called with the lock held, before
 * inflight or compressing changes. */
static void cauto_tick(struct codec_auto *a)
{
	uint64_t now = mono_ns();

	if (a->inflight)
		a->busy_ns += now - a->since_ns;
	if (a->compressing)
		a->comp_busy_ns += now - a->since_ns;
	a->since_ns = now;
}

/* Bytes/s of this snapshot's writes once it has written enough to tell, else the
 * rate carried from earlier ones. Called with the lock held. */
static double cauto_disk(const struct codec_auto *a)
{
	if (a->disk_bytes >= CAUTO_DISK_MIN && a->busy_ns)
		return (double)a->disk_bytes * 1e9 / (double)a->busy_ns;
	return a->disk_rate;
}

void cauto_end(struct codec_auto *a)
{
	pthread_mutex_lock(&a->lock);
	if (a->disk_bytes >= CAUTO_DISK_MIN && a->busy_ns)
		a->disk_rate = (a->disk_rate + cauto_disk(a)) / 2;
	a->last_peak = a->peak;
	a->peak = 0;
	pthread_mutex_unlock(&a->lock);
}

/* LZ4 over the first CAUTO_PROBE bytes: stored over input, 1 when it does not shrink. */
static double cauto_probe(const void *data, size_t len, void *scratch, size_t cap)
{
	size_t n = len < CAUTO_PROBE ? len : CAUTO_PROBE;
	ssize_t out = n ? codec_compress(IMG_CODEC_LZ4, 1, data, n, scratch, cap) : -ENOSPC;

	return out > 0 && (size_t)out < n ? (double)out / (double)n : 1.0;
}

/* The threads' time so far marked as weighed. Called with the lock held. */
static void cauto_seen(struct codec_auto *a)
{
	a->seen_comp_ns = a->comp_ns;
	a->seen_write_ns = a->write_ns;
	a->seen_saved_ns = a->saved_ns;
}

/* The threads' time since the last choice into the smoothed gain and cost, and the
 * place on the ladder moved by their difference over their sum. Called with the lock
 * held. */
static void cauto_steer(struct codec_auto *a)
{
	uint64_t comp = a->comp_ns - a->seen_comp_ns, write = a->write_ns - a->seen_write_ns;
	uint64_t saved = a->saved_ns - a->seen_saved_ns;
	double gain = a->threads > 1 ? (double)(a->threads - 1) * (double)write : (double)saved;

	cauto_seen(a);
	a->gain += CAUTO_EWMA * (gain - a->gain);
	a->cost += CAUTO_EWMA * ((double)comp - a->cost);
	if (a->gain + a->cost <= 0)
		return; /* nothing seen yet */
	a->step += CAUTO_MOVE * (a->gain - a->cost) / (a->gain + a->cost);
	a->step = fmax(CAUTO_STEP_MIN, fmin((double)(CAUTO_RUNGS - 1), a->step));
}

/* The rung for the next chunk: the one below the place, or above it for the place's
 * fraction of the chunks, in turn. Called with the lock held. */
static int cauto_rung(struct codec_auto *a)
{
	int rung = (int)floor(a->step);

	a->carry += a->step - rung;
	if (a->carry >= 1.0 && rung < CAUTO_RUNGS - 1) {
		a->carry -= 1.0;
		rung++;
	}
	return rung;
}

/* Raw while the host has too little spare CPU, the last window's answer; the threads'
 * time meanwhile is not weighed (nothing was compressed to weigh it against). Called
 * with the lock held. */
static bool cauto_raw(struct codec_auto *a)
{
	cauto_window(a);
	if (!a->raw)
		return false;
	cauto_seen(a);
	return true;
}

void cauto_choose(struct codec_auto *a, const void *data, size_t len, void *scratch, size_t cap,
		  struct cauto_choice *out)
{
	double probe = 1.0;
	int rung = 0;
	bool raw;

	pthread_mutex_lock(&a->lock);
	raw = cauto_raw(a);
	pthread_mutex_unlock(&a->lock);
	if (!raw) {
		probe = cauto_probe(data, len, scratch, cap);
		pthread_mutex_lock(&a->lock);
		cauto_steer(a);
		if (probe <= 1.0 - CAUTO_PROBE_GAIN) /* else the early abort: raw */
			rung = cauto_rung(a);
		pthread_mutex_unlock(&a->lock);
	}
	*out = (struct cauto_choice){ .codec = cauto_ladder[rung].codec,
				      .level = cauto_ladder[rung].level, .rung = rung,
				      .probe = probe };
}

void cauto_compress_begin(struct codec_auto *a)
{
	pthread_mutex_lock(&a->lock);
	cauto_tick(a);
	a->compressing++;
	pthread_mutex_unlock(&a->lock);
}

void cauto_compressed(struct codec_auto *a, uint64_t in, uint64_t out, uint64_t ns,
		      uint64_t cpu_ns)
{
	pthread_mutex_lock(&a->lock);
	cauto_tick(a);
	a->win_cpu_ns += cpu_ns;
	if (a->compressing > 0)
		a->compressing--;
	a->comp_in += in;
	a->comp_ns += ns;
	if (a->threads == 1 && ns && out < in) /* the write time it saved */
		a->saved_ns += (uint64_t)((double)(in - out) * 1e9 / cauto_disk(a));
	pthread_mutex_unlock(&a->lock);
}

void cauto_io_begin(struct codec_auto *a)
{
	pthread_mutex_lock(&a->lock);
	cauto_tick(a);
	a->inflight++;
	pthread_mutex_unlock(&a->lock);
}

void cauto_io_end(struct codec_auto *a, uint64_t bytes, uint64_t ns)
{
	pthread_mutex_lock(&a->lock);
	cauto_tick(a);
	if (a->inflight > 0)
		a->inflight--;
	a->disk_bytes += bytes;
	a->write_ns += ns;
	pthread_mutex_unlock(&a->lock);
}

void cauto_rates(struct codec_auto *a, double *compress_mb_s, double *disk_mb_s)
{
	pthread_mutex_lock(&a->lock);
	cauto_tick(a);
	*compress_mb_s = a->comp_busy_ns ? (double)a->comp_in * 1e3 / (double)a->comp_busy_ns : 0;
	*disk_mb_s = a->busy_ns ? (double)a->disk_bytes * 1e3 / (double)a->busy_ns : 0;
	pthread_mutex_unlock(&a->lock);
}

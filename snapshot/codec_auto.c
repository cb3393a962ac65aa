/*
 * codec_auto.c - a codec and level for each chunk under `--compress auto`, the ones that
 * keep the disk busy without making the compressors the bottleneck.
 *
 * No fixed codec suits every machine. zstd-1 compresses ~0.5 GB/s on one of our cores
 * and the disk takes ~0.75-1 GB/s with O_DIRECT: with a core busy with the guest,
 * compressing is slower than writing raw; on a slow disk, or with idle cores, it is
 * the other way round. So the writer keeps two rates: how fast its threads compress
 * (per rung of a ladder from raw to zstd 3, as wall time, so cores taken by the guest
 * show), and how fast the disk takes bytes (the union of the time writes are in
 * flight). A chunk is probed first: LZ4 over its first 64 KiB tells how compressible
 * it is (a chunk that does not shrink by an eighth is stored raw, as ZFS's early abort
 * does), and each rung's ratio is the probe's times what that rung gave over its probe
 * lately. The chunk then takes the rung whose time, the longer of compressing on the
 * threads (as many as were seen compressing at once: their time over its union) and
 * writing what is left, is least; among rungs within CAUTO_TIE of that,
 * the one that stores least, so an idle disk gets smaller images for free.
 *
 * Rates start from what was measured on this project's machines (bench/results/
 * storage_blocks.md) and follow what each snapshot measures; a rung not used yet is
 * scaled by how the used ones compare with their seeds.
 */
#include "codec_auto.h"
#include "../vmm/base/mono.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define CAUTO_TIE 1.05          /* rungs this close in time count as equally fast */
#define CAUTO_EWMA 0.125        /* the weight of each new chunk's figures */
#define CAUTO_DISK_SEED 0.8e9   /* bytes/s, O_DIRECT on our machines */
#define CAUTO_DISK_MIN (8ull << 20) /* a snapshot's own disk rate is used past this */

struct cauto_rung {
	enum img_codec codec;
	int level;
	double rate;            /* seed: input bytes/s of one core (storage_blocks.md) */
	double shrink;          /* seed: ratio over LZ4's on Redis' memory */
};

static const struct cauto_rung cauto_ladder[CAUTO_RUNGS] = {
	{ IMG_CODEC_NONE, 0, 0, 1.0 },
	{ IMG_CODEC_LZ4, 1, 1.2e9, 1.0 },
	{ IMG_CODEC_ZSTD, -1, 0.73e9, 0.92 },
	{ IMG_CODEC_ZSTD, 1, 0.5e9, 0.80 },
	{ IMG_CODEC_ZSTD, 3, 0.25e9, 0.79 },
};

void cauto_init(struct codec_auto *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	a->disk_rate = CAUTO_DISK_SEED;
	a->speed = a->tighter = a->parallel = 1.0;
	a->threads = 1;
	for (int k = 0; k < CAUTO_RUNGS; k++) {
		a->rate[k] = cauto_ladder[k].rate;
		a->shrink[k] = cauto_ladder[k].shrink;
	}
}

void cauto_fini(struct codec_auto *a)
{
	pthread_mutex_destroy(&a->lock);
}

void cauto_begin(struct codec_auto *a, int threads)
{
	pthread_mutex_lock(&a->lock);
	a->threads = threads > 0 ? threads : 1;
	a->inflight = 0;
	a->busy_since_ns = a->busy_ns = a->disk_bytes = 0;
	a->comp_in = a->comp_ns = 0;
	a->compressing = 0;
	a->comp_since_ns = a->comp_busy_ns = 0;
	pthread_mutex_unlock(&a->lock);
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
	pthread_mutex_unlock(&a->lock);
}

static double cauto_rate(const struct codec_auto *a, int k)
{
	return a->seen[k] ? a->rate[k] : cauto_ladder[k].rate * a->speed;
}

static double cauto_shrink(const struct codec_auto *a, int k)
{
	return a->seen[k] ? a->shrink[k] : cauto_ladder[k].shrink * a->tighter;
}

/* LZ4 over the first CAUTO_PROBE bytes: stored over input, 1 when it does not shrink. */
static double cauto_probe(const void *data, size_t len, void *scratch, size_t cap)
{
	size_t n = len < CAUTO_PROBE ? len : CAUTO_PROBE;
	ssize_t out = n ? codec_compress(IMG_CODEC_LZ4, 1, data, n, scratch, cap) : -ENOSPC;

	return out > 0 && (size_t)out < n ? (double)out / (double)n : 1.0;
}

/* The time rung @k takes for @len bytes whose probe gave @probe; its ratio in *@ratio. */
static double cauto_cost(const struct codec_auto *a, int k, double len, double probe,
			 double *ratio)
{
	double comp = 0;

	*ratio = 1.0;
	if (k) {
		*ratio = fmin(1.0, probe * cauto_shrink(a, k));
		comp = len / (cauto_rate(a, k) * a->parallel);
	}
	return fmax(comp, len * *ratio / cauto_disk(a));
}

void cauto_choose(struct codec_auto *a, const void *data, size_t len, void *scratch, size_t cap,
		  struct cauto_choice *out)
{
	double probe = cauto_probe(data, len, scratch, cap), cost[CAUTO_RUNGS], ratio[CAUTO_RUNGS];
	double least = INFINITY;
	int pick = 0;

	*out = (struct cauto_choice){ .codec = IMG_CODEC_NONE, .probe = probe };
	if (probe > 1.0 - CAUTO_PROBE_GAIN)
		return; /* early abort: raw */
	pthread_mutex_lock(&a->lock);
	for (int k = 0; k < CAUTO_RUNGS; k++) {
		cost[k] = cauto_cost(a, k, (double)len, probe, &ratio[k]);
		least = fmin(least, cost[k]);
	}
	/* Raw stays when it is the least: a rung that stores no less is no faster. */
	for (int k = 1; k < CAUTO_RUNGS; k++)
		if (cost[k] <= least * CAUTO_TIE && ratio[k] < ratio[pick])
			pick = k;
	/* A rung's figures change only when it is used: one that measured slow once (its
	 * threads shared a core) would never be tried again. So every CAUTO_EXPLORE-th
	 * chunk takes the codecs in turn, at a cost of a few percent at most. */
	if (++a->chosen % CAUTO_EXPLORE == 0)
		pick = 1 + (int)(a->chosen / CAUTO_EXPLORE % (CAUTO_RUNGS - 1));
	pthread_mutex_unlock(&a->lock);
	out->rung = pick;
	out->codec = cauto_ladder[pick].codec;
	out->level = cauto_ladder[pick].level;
}

/* @old moved towards @now by CAUTO_EWMA. From the seed too: a thread's first chunk
 * also faults in its buffers, and one slow reading must not bury a codec. */
static double cauto_mix(double old, double now)
{
	return old + CAUTO_EWMA * (now - old);
}

/* The rung of @codec at @level, or -1 when it is not on the ladder. */
static int cauto_rung_of(enum img_codec codec, int level)
{
	for (int k = 1; k < CAUTO_RUNGS; k++)
		if (cauto_ladder[k].codec == codec && cauto_ladder[k].level == level)
			return k;
	return -1;
}

void cauto_compress_begin(struct codec_auto *a)
{
	pthread_mutex_lock(&a->lock);
	if (a->compressing++ == 0)
		a->comp_since_ns = mono_ns();
	pthread_mutex_unlock(&a->lock);
}

/* The compressions' time since the last start or end into their union. Called with the
 * lock held, when one ends. */
static void cauto_compress_end(struct codec_auto *a)
{
	uint64_t now = mono_ns();

	if (a->compressing <= 0)
		return;
	a->compressing--;
	a->comp_busy_ns += now - a->comp_since_ns;
	a->comp_since_ns = now;
	if (a->comp_busy_ns) /* between one thread and all of them */
		a->parallel = fmax(1.0, fmin((double)a->threads,
					     (double)a->comp_ns / (double)a->comp_busy_ns));
}

void cauto_compressed(struct codec_auto *a, enum img_codec codec, int level, double probe,
		      uint64_t in, uint64_t out, uint64_t ns)
{
	int k = cauto_rung_of(codec, level);
	double rate = ns ? (double)in * 1e9 / (double)ns : 0;

	pthread_mutex_lock(&a->lock);
	a->comp_in += in;
	a->comp_ns += ns;
	cauto_compress_end(a);
	if (k > 0 && rate > 0) {
		a->speed = cauto_mix(a->speed, rate / cauto_ladder[k].rate);
		a->rate[k] = cauto_mix(a->rate[k], rate);
		if (probe > 0 && in) {
			double shrink = (double)out / (double)in / probe;

			a->tighter = cauto_mix(a->tighter, shrink / cauto_ladder[k].shrink);
			a->shrink[k] = cauto_mix(a->shrink[k], shrink);
		}
		a->seen[k]++;
	}
	pthread_mutex_unlock(&a->lock);
}

void cauto_io_begin(struct codec_auto *a)
{
	pthread_mutex_lock(&a->lock);
	if (a->inflight++ == 0)
		a->busy_since_ns = mono_ns();
	pthread_mutex_unlock(&a->lock);
}

void cauto_io_end(struct codec_auto *a, uint64_t bytes)
{
	uint64_t now = mono_ns();

	pthread_mutex_lock(&a->lock);
	a->disk_bytes += bytes;
	if (a->inflight > 0) { /* (threads that write one after another never reach 0) */
		a->inflight--;
		a->busy_ns += now - a->busy_since_ns;
		a->busy_since_ns = now;
	}
	pthread_mutex_unlock(&a->lock);
}

void cauto_rates(struct codec_auto *a, double *compress_mb_s, double *disk_mb_s)
{
	pthread_mutex_lock(&a->lock);
	*compress_mb_s = a->comp_busy_ns ? (double)a->comp_in * 1e3 / (double)a->comp_busy_ns : 0;
	*disk_mb_s = a->busy_ns ? (double)a->disk_bytes * 1e3 / (double)a->busy_ns : 0;
	pthread_mutex_unlock(&a->lock);
}

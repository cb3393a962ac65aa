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
 * flight). A chunk is probed first: if LZ4 does not shrink its first 64 KiB by an
 * eighth, it is stored raw, as ZFS's early abort does. Otherwise LZ4 over 16 pages of
 * data spread over the chunk predicts each rung's ratio, as that sample's times what
 * the rung gave over its sample lately (the first 64 KiB do not: Redis' chunks start
 * with zeros as often as with dense data). Times and ratios are per byte of data:
 * zero pages are holes in the image and cost the compressors next to nothing.
 *
 * The compressors, the disk and the I/O threads (each compresses a chunk, then writes
 * it) work at once, so a snapshot takes as long as the busiest. Each chunk adds to
 * each backlog what a rung needs of it: the compressors' time (over the threads seen
 * compressing at once), the disk's for what the rung leaves, and a thread's for both
 * (over the threads). The backlogs drain as wall time passes; the chunk takes the
 * rung that leaves the busiest least busy, and among rungs within CAUTO_TIE of that,
 * the one that stores least. So the compressors work while the disk would otherwise
 * be the bottleneck and stop where they would become it: a fast disk gets some chunks
 * raw and the rest compressed, a slow one zstd, an idle machine smaller images for
 * free. (Choosing each chunk alone, by the longer of its own two times, stored every
 * chunk raw wherever compressing one took longer than writing it, with the disk idle
 * while the compressor was.)
 *
 * Rates start from what was measured on this project's machines (bench/results/
 * storage_blocks.md) and follow what each snapshot measures; a rung not used yet is
 * scaled by how the used ones compare with their seeds.
 */
#include "codec_auto.h"
#include "../vmm/base/mono.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#define CAUTO_TIE 0.05          /* rungs whose time for a chunk differs by this
				 * fraction of the fastest's count as equally fast */
#define CAUTO_EWMA 0.125        /* the weight of each new chunk's figures */
#define CAUTO_DISK_SEED 0.8e9   /* bytes/s, O_DIRECT on our machines */
#define CAUTO_DISK_MIN (8ull << 20) /* a snapshot's own disk rate is used past this */
#define CAUTO_PAGE 4096u

#define CAUTO_SAMPLES 16        /* pages of data LZ4 samples to predict a chunk's ratio */
#define CAUTO_SHRINK_MIN 0.2    /* a chunk's ratio over its sample's, as far as believed */
#define CAUTO_SHRINK_MAX 5.0

struct cauto_rung {
	enum img_codec codec;
	int level;
	double rate;            /* seed: input bytes/s of one core on Redis' memory */
	double shrink;          /* seed: its ratio over LZ4's on it */
};

/* Seeds from docs/evaluation.md ("Snapshot storage", 2 MiB blocks); LZ4 -4 measured
 * on a dump of Redis' memory on one of our AMD EPYC cores (1.5x LZ4 1's speed, the
 * same ratio). */
static const struct cauto_rung cauto_ladder[CAUTO_RUNGS] = {
	{ IMG_CODEC_NONE, 0, 0, 1.0 },
	{ IMG_CODEC_LZ4, -4, 1.8e9, 1.0 },
	{ IMG_CODEC_LZ4, 1, 1.18e9, 1.0 },
	{ IMG_CODEC_ZSTD, -1, 0.73e9, 0.92 },
	{ IMG_CODEC_ZSTD, 1, 0.5e9, 0.80 },
	{ IMG_CODEC_ZSTD, 3, 0.25e9, 0.79 },
};

void cauto_init(struct codec_auto *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	a->disk_rate = CAUTO_DISK_SEED;
	a->slower = a->tighter = a->parallel = 1.0;
	a->threads = 1;
	for (int k = 1; k < CAUTO_RUNGS; k++) {
		a->spb[k] = 1.0 / cauto_ladder[k].rate;
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
	memset(a->backlog, 0, sizeof(a->backlog));
	a->backlog_at_ns = mono_ns();
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

/* Seconds a thread takes per byte at rung @k (k > 0), as measured, or for a rung not
 * used yet, its seed scaled as the used ones compare with theirs. */
static double cauto_spb(const struct codec_auto *a, int k)
{
	return a->seen[k] ? a->spb[k] : a->slower / cauto_ladder[k].rate;
}

/* Rung @k's ratio over the sample's, as measured or, not used yet, seeded and scaled. */
static double cauto_shrink(const struct codec_auto *a, int k)
{
	return a->seen[k] ? a->shrink[k] : cauto_ladder[k].shrink * a->tighter;
}

/* LZ4 over the first @n bytes at @data: stored over input, 1 when it does not shrink. */
static double cauto_lz4(const void *data, size_t n, void *scratch, size_t cap)
{
	ssize_t out = n ? codec_compress(IMG_CODEC_LZ4, 1, data, n, scratch, cap) : -ENOSPC;

	return out > 0 && (size_t)out < n ? (double)out / (double)n : 1.0;
}

static bool cauto_page_zero(const uint8_t *p)
{
	return !p[0] && !memcmp(p, p + 1, CAUTO_PAGE - 1);
}

/* The ratio LZ4 gives CAUTO_SAMPLES pages of data (not zero) spread over @len bytes at
 * @data, gathered at the end of @scratch; or @probe when there is none to sample. The
 * first 64 KiB tell whether a chunk shrinks at all, but not by how much: Redis' chunks
 * start with zeros or with dense data as often as not, and the rest differs. */
static double cauto_sample(const uint8_t *data, size_t len, uint8_t *scratch, size_t cap,
			   double probe)
{
	size_t stride = len / CAUTO_PAGE / CAUTO_SAMPLES, n = 0;
	uint8_t *gather = scratch + cap - CAUTO_SAMPLES * CAUTO_PAGE;

	if (!stride || cap < 2 * CAUTO_SAMPLES * CAUTO_PAGE + CAUTO_PROBE)
		return probe;
	for (size_t s = 0; s < CAUTO_SAMPLES; s++)
		for (size_t i = s * stride; i < (s + 1) * stride; i++)
			if (!cauto_page_zero(data + i * CAUTO_PAGE)) {
				memcpy(gather + n++ * CAUTO_PAGE, data + i * CAUTO_PAGE, CAUTO_PAGE);
				break;
			}
	return n ? cauto_lz4(gather, n * CAUTO_PAGE, scratch, cap - CAUTO_SAMPLES * CAUTO_PAGE)
		 : probe;
}

/* The seconds of work rung @k adds for @len bytes of data whose sample LZ4 took to
 * @sample of its size: the compressors' (one thread's time
 * over the threads seen compressing at once), the disk's (for what the rung leaves),
 * and the I/O threads' (each compresses a chunk and then writes it). */
struct cauto_need {
	double comp, disk, thread;
};

static struct cauto_need cauto_need_of(const struct codec_auto *a, int k, double len,
				       double sample)
{
	double wall = k ? len * cauto_spb(a, k) : 0;
	double disk = len * (k ? fmin(1.0, sample * cauto_shrink(a, k)) : 1.0);

	disk /= cauto_disk(a);
	return (struct cauto_need){ .comp = wall / a->parallel, .disk = disk,
				    .thread = (wall + disk) / a->threads };
}

/* The backlogs drained by the wall time since they were last looked at. Called with
 * the lock held. */
static void cauto_drain(struct codec_auto *a)
{
	uint64_t now = mono_ns();
	double gone = (double)(now - a->backlog_at_ns) * 1e-9;

	for (int q = 0; q < CAUTO_QUEUES; q++)
		a->backlog[q] = fmax(0, a->backlog[q] - gone);
	a->backlog_at_ns = now;
}

/* When the busiest queue would be done with @n added. */
static double cauto_end_with(const struct codec_auto *a, const struct cauto_need *n)
{
	return fmax(a->backlog[CAUTO_Q_COMP] + n->comp,
		    fmax(a->backlog[CAUTO_Q_DISK] + n->disk, a->backlog[CAUTO_Q_THREAD] + n->thread));
}

/* The rung for a chunk whose rungs need @need: the one that leaves the busiest queue
 * least busy, or among those within CAUTO_TIE of it the one that stores least.
 * Called with the lock held. */
static int cauto_pick(const struct codec_auto *a, const struct cauto_need *need)
{
	double base = fmax(a->backlog[CAUTO_Q_COMP],
			   fmax(a->backlog[CAUTO_Q_DISK], a->backlog[CAUTO_Q_THREAD]));
	double end[CAUTO_RUNGS];
	int best = 0, pick;

	for (int k = 0; k < CAUTO_RUNGS; k++) {
		end[k] = cauto_end_with(a, &need[k]);
		if (end[k] < end[best])
			best = k;
	}
	pick = best;
	for (int k = 0; k < CAUTO_RUNGS; k++)
		if (end[k] - end[best] <= CAUTO_TIE * (end[best] - base) &&
		    need[k].disk < need[pick].disk)
			pick = k;
	return pick;
}

void cauto_choose(struct codec_auto *a, const void *data, size_t len, size_t data_len,
		  void *scratch, size_t cap, struct cauto_choice *out)
{
	double probe = cauto_lz4(data, len < CAUTO_PROBE ? len : CAUTO_PROBE, scratch, cap), sample;
	struct cauto_need need[CAUTO_RUNGS];
	int pick = 0;

	*out = (struct cauto_choice){ .codec = IMG_CODEC_NONE, .probe = probe,
				      .data_len = data_len };
	sample = probe > 1.0 - CAUTO_PROBE_GAIN ? 1.0 : /* early abort: raw */
		 cauto_sample(data, len, scratch, cap, probe);
	out->sample = sample;
	pthread_mutex_lock(&a->lock);
	cauto_drain(a);
	for (int k = 0; k < CAUTO_RUNGS; k++)
		need[k] = cauto_need_of(a, k, (double)data_len, sample);
	if (probe <= 1.0 - CAUTO_PROBE_GAIN) {
		pick = cauto_pick(a, need);
		/* A rung's figures change only when it is used: one that measured slow
		 * once (its threads shared a core) would never be tried again. So every
		 * CAUTO_EXPLORE-th chunk takes the codecs in turn, at a cost of a few
		 * percent at most. */
		if (++a->chosen % CAUTO_EXPLORE == 0)
			pick = 1 + (int)(a->chosen / CAUTO_EXPLORE % (CAUTO_RUNGS - 1));
	}
	a->backlog[CAUTO_Q_COMP] += need[pick].comp;
	a->backlog[CAUTO_Q_DISK] += need[pick].disk;
	a->backlog[CAUTO_Q_THREAD] += need[pick].thread;
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

void cauto_compressed(struct codec_auto *a, enum img_codec codec, int level, double sample,
		      uint64_t in, uint64_t data, uint64_t out, uint64_t ns)
{
	int k = cauto_rung_of(codec, level);

	pthread_mutex_lock(&a->lock);
	a->comp_in += in;
	a->comp_ns += ns;
	cauto_compress_end(a);
	/* Seconds per byte of data are averaged, not bytes per second: a chunk of
	 * zeros compresses at 25 GB/s, and averaging rates would let a few of them make a
	 * codec look ten times as fast as it is on the rest. */
	if (k > 0 && ns && data) {
		double spb = (double)ns * 1e-9 / (double)data;

		a->slower = cauto_mix(a->slower, spb * cauto_ladder[k].rate);
		a->spb[k] = cauto_mix(a->spb[k], spb);
		if (sample > 0) {
			double shrink = fmax(CAUTO_SHRINK_MIN, fmin(CAUTO_SHRINK_MAX,
						(double)out / (double)data / sample));

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

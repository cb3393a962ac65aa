/*
 * codec_auto.h - a codec and level for each chunk under `--compress auto`, steered by
 * whether the writer's threads wait on the disk or on their compressing
 * (snapshot/codec_auto.c).
 */
#ifndef CCVM_CODEC_AUTO_H
#define CCVM_CODEC_AUTO_H

#include "codec.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ladder auto climbs, from the cheapest to the smallest: raw, LZ4 -4, LZ4 1,
 * zstd -1, 1, 3. */
#define CAUTO_RUNGS 6
/* The lowest place: one chunk in eight still goes at the first rung above raw. At raw
 * alone nothing is compressed, so nothing is seen that could move the place back up:
 * one writer thread on a throttled disk whose banked credit made its first chunks'
 * writes look fast sank to raw and stored 70% of a snapshot raw, where the disk then
 * took 250 MB/s (LZ4 -4 costs little where raw is right). */
#define CAUTO_STEP_MIN 0.125 /* (a place on the ladder, in rungs) */

/* A chunk whose first CAUTO_PROBE bytes do not shrink by CAUTO_PROBE_GAIN under LZ4
 * is stored raw (as ZFS's early abort): ~20 us of LZ4 spares a 2 MiB chunk's ~4 ms of
 * zstd that would have saved little. */
#define CAUTO_PROBE (64u * 1024u)
#define CAUTO_PROBE_GAIN 0.125

/* Compressing during a snapshot uses only CPU that would otherwise idle: the host's
 * idle cores plus what the compressions themselves took, measured over windows of
 * CAUTO_WINDOW_NS. Below CAUTO_SPARE_MIN of a core for CAUTO_WINDOWS_AGAINST windows,
 * chunks go raw and the compaction after the snapshot compresses in idle time instead
 * (docs/snapshots.md). */
#define CAUTO_WINDOW_NS 200000000ull
#define CAUTO_SPARE_MIN 0.45 /* (cores) */
#define CAUTO_SPARE_BACK 0.5 /* (cores) idle in a raw window: compress again */
#define CAUTO_SPARE_HIGH 0.6 /* (cores) a window that the disk held back */
#define CAUTO_SPARE_CLIMB 1.0 /* rungs climbed after such a window */
#define CAUTO_WINDOWS_AGAINST 2 /* windows in a row short of spare CPU for raw */

struct cauto_choice {
	enum img_codec codec;  /* IMG_CODEC_NONE: store the chunk raw */
	int level;
	int rung;              /* its place in the ladder */
	double probe;          /* the probe's stored / input under LZ4 (1: not shrunk or
				* not probed) */
};

struct codec_auto {
	pthread_mutex_t lock;
	int threads;             /* that compress and write: the snapshot's I/O threads */
	int (*idle_ns)(uint64_t *out); /* the host's idle time (hostcpu.h); NULL: not read */
	/* Kept from snapshot to snapshot (a VM's disk and cores change slowly): */
	bool raw;                /* too little spare CPU lately: every chunk raw */
	int against;             /* windows in a row short of spare CPU */
	double spare;            /* cores spare in the last window (idle + compressing) */
	double peak, last_peak;  /* the most spare in a window of this snapshot, the last */
	double step;             /* the place on the ladder, fractional: a mix of two rungs */
	double disk_rate;        /* bytes/s while a write is in flight (one thread's estimate) */
	double carry;            /* the fraction of a chunk owed to the higher rung */
	/* This snapshot's (times in ns): */
	double gain, cost;       /* lately: write time that lets compressing be free, and
				  * compressing's time (smoothed over the last chunks) */
	int inflight, compressing;
	uint64_t since_ns;       /* the last change of inflight or compressing */
	uint64_t busy_ns, disk_bytes;      /* a write in flight; what the writes took */
	uint64_t comp_busy_ns;             /* a compression running */
	uint64_t comp_in, comp_ns;         /* compressions' input and time, summed */
	uint64_t write_ns, saved_ns;       /* writes' time, summed; what one thread saved */
	uint64_t seen_comp_ns, seen_write_ns, seen_saved_ns; /* at the last choice */
	uint64_t win_ns, win_idle_ns, win_cpu_ns; /* this window's start, the host's idle
						   * time then, compressions' CPU since */
};

/* At the ladder's LZ4 rung, with a disk of our machines' rate (docs/snapshots.md). */
void cauto_init(struct codec_auto *a);
void cauto_fini(struct codec_auto *a);

/* A snapshot starts, compressing on @threads threads: this snapshot's counters reset. */
void cauto_begin(struct codec_auto *a, int threads);
/* It ended: the disk's rate measured in it is carried to the next. */
void cauto_end(struct codec_auto *a);

/* The codec and level for @len bytes at @data (a chunk, or a child's packed pages),
 * after probing them with LZ4 into @scratch (@cap bytes, at least codec_bound of the
 * probe). The place on the ladder climbs while the threads wait longer on writes than
 * they spend compressing, and steps down when they compress longer; a fractional place
 * mixes two rungs. Raw without a probe while the host has too little spare CPU. */
void cauto_choose(struct codec_auto *a, const void *data, size_t len, void *scratch, size_t cap,
		  struct cauto_choice *out);

/* A chunk's compression starts; it ended: @in bytes compressed to @out in @ns, of which
 * the thread ran @cpu_ns (on one thread; any codec, so that a fixed codec's rate is
 * reported too). */
void cauto_compress_begin(struct codec_auto *a);
void cauto_compressed(struct codec_auto *a, uint64_t in, uint64_t out, uint64_t ns,
		      uint64_t cpu_ns);

/* A write to the image starts; it ends, having written @bytes in @ns. The disk's busy
 * time is their union, so that writes in flight at once are not counted twice. */
void cauto_io_begin(struct codec_auto *a);
void cauto_io_end(struct codec_auto *a, uint64_t bytes, uint64_t ns);

/* This snapshot's rates, MB/s: what its threads compressed in all (0 when nothing
 * was), and what the disk took while busy (0 when nothing was written). */
void cauto_rates(struct codec_auto *a, double *compress_mb_s, double *disk_mb_s);

#endif

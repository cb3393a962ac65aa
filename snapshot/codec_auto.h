/*
 * codec_auto.h - a codec and level for each chunk under `--compress auto`, chosen from
 * the rates the writer keeps measuring (snapshot/codec_auto.c).
 */
#ifndef CCVM_CODEC_AUTO_H
#define CCVM_CODEC_AUTO_H

#include "codec.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ladder auto climbs, from the cheapest to the smallest: raw, LZ4, zstd -1, 1, 3. */
#define CAUTO_RUNGS 5

/* A chunk whose first CAUTO_PROBE bytes do not shrink by CAUTO_PROBE_GAIN under LZ4
 * is stored raw (as ZFS's early abort): ~20 us of LZ4 spares a 2 MiB chunk's ~4 ms of
 * zstd that would have saved little. */
#define CAUTO_PROBE (64u * 1024u)
#define CAUTO_PROBE_GAIN 0.125

/* Every CAUTO_EXPLORE-th chunk that passes the probe takes the next codec of the ladder
 * in turn, whatever the rates say, so that a rung measured slow once is measured
 * again. */
#define CAUTO_EXPLORE 32

struct cauto_choice {
	enum img_codec codec;  /* IMG_CODEC_NONE: store the chunk raw */
	int level;
	int rung;              /* its place in the ladder */
	double probe;          /* the probe's stored / input under LZ4 */
};

struct codec_auto {
	pthread_mutex_t lock;
	int threads;             /* that compress at once: the snapshot's I/O threads */
	/* Kept from snapshot to snapshot (a VM's disk and cores change slowly): */
	double disk_rate;        /* bytes/s the disk takes while a write is in flight */
	double rate[CAUTO_RUNGS];    /* input bytes/s one thread compresses at a rung */
	double shrink[CAUTO_RUNGS];  /* a chunk's ratio at a rung over its probe's */
	uint32_t seen[CAUTO_RUNGS];  /* chunks a rung's figures were measured on */
	double speed, tighter;   /* measured over seeded rate and shrink, for unseen rungs */
	double parallel;         /* threads compressing at once, on average, when any is */
	uint64_t chosen;         /* chunks a codec was chosen for */
	/* This snapshot's: */
	int inflight;
	uint64_t busy_since_ns, busy_ns, disk_bytes;
	uint64_t comp_in, comp_ns;
	int compressing;
	uint64_t comp_since_ns, comp_busy_ns; /* the union of the compressions' time */
};

/* Seeded with what was measured on this project's machines (docs/snapshots.md). */
void cauto_init(struct codec_auto *a);
void cauto_fini(struct codec_auto *a);

/* A snapshot starts, compressing on @threads threads: this snapshot's counters reset. */
void cauto_begin(struct codec_auto *a, int threads);
/* It ended: the disk's rate measured in it is carried to the next. */
void cauto_end(struct codec_auto *a);

/* The codec and level for @len bytes at @data (a chunk, or a child's packed pages),
 * after probing them with LZ4 into @scratch (@cap bytes, at least codec_bound of the
 * probe). The rung whose time for the chunk, the longer of compressing it on the
 * threads and writing what it gives, is least; of those within CAUTO_TIE of it, the
 * one that stores least. */
void cauto_choose(struct codec_auto *a, const void *data, size_t len, void *scratch, size_t cap,
		  struct cauto_choice *out);

/* A chunk's compression starts; it ended: @in bytes compressed to @out with @codec at
 * @level in @ns (on one thread; any codec, so that a fixed codec's rate is reported
 * too); @probe is what cauto_choose saw of it, or 0 when it was not chosen. How many
 * threads compress at once, on average, is measured from the two (their time over the
 * union of it): threads that take turns writing compress one at a time. */
void cauto_compress_begin(struct codec_auto *a);
void cauto_compressed(struct codec_auto *a, enum img_codec codec, int level, double probe,
		      uint64_t in, uint64_t out, uint64_t ns);

/* A write to the image starts; it ends, having written @bytes. The disk's busy time
 * is their union, so that writes in flight at once are not counted twice. */
void cauto_io_begin(struct codec_auto *a);
void cauto_io_end(struct codec_auto *a, uint64_t bytes);

/* This snapshot's rates, MB/s: what its threads compressed in all (0 when nothing
 * was), and what the disk took while busy (0 when nothing was written). */
void cauto_rates(struct codec_auto *a, double *compress_mb_s, double *disk_mb_s);

#endif

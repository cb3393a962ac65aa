/*
 * compact.h - an image rewritten smaller in place: its raw and LZ4 chunks as zstd
 * frames, its patch area folded into its chunks (snapshot/compact.c); and the section
 * copy it shares with merge.c.
 */
#ifndef CCVM_COMPACT_H
#define CCVM_COMPACT_H

#include "image.h"

#include <stdbool.h>
#include <stdint.h>

/* zstd 1: on 2 MiB chunks of a Redis dump 0.8% larger than zstd 3 (text 5%) at twice
 * its speed (480 against 247 MB/s here, bench/codec-bench), and compaction's CPU is
 * the cores the guest leaves (docs/snapshots.md). */
#define COMPACT_LEVEL 1

struct compact_job {
	int level;           /* zstd level of the frames it makes */
	bool relevel;        /* zstd frames made again at @level too (else kept as they are) */
	bool direct;         /* reads with O_DIRECT (the monitor's idle compaction) */
	/* Called before each chunk: a nonzero return gives the compaction up with it, the
	 * image as it was; it may block (a snapshot running), which holds the compaction. */
	int (*yield)(void *ctx);
	void *ctx;
	/* Out: the image's bytes on disk before and after. */
	uint64_t bytes_in, bytes_out;
};

/*
 * img_compact - rewrite the full image @path: every chunk read and checked, stored as
 * a zstd frame where that saves a page (a zstd frame without patches is kept as it
 * is unless @job->relevel), the patches folded in, every section copied (a long one a
 * MiB at a time). Written under a temporary name beside it and renamed over it only
 * when whole and only if @path is still the file that was read, so the name always
 * holds a valid image and a kill leaves the old one (its temporary is swept by the
 * next writer of that name). An incremental image is refused (merge it first).
 * Returns 0 or -errno with a message in @err.
 */
int img_compact(const char *path, struct compact_job *job, char err[IMG_ERR_LEN]);

/* Every section of @r into @w but the ones img_finish makes (checksums, encoding,
 * patches) and a child's lineage; a section longer than a MiB streamed a MiB at a time
 * and checked against its checksum as it goes. 0 or -errno. */
int img_copy_sections(const struct img_reader *r, struct img_writer *w);

#endif

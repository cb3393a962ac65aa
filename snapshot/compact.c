/*
 * compact.c - an image made smaller after the fact. A snapshot stores what it had the
 * time to compress: on a fast disk with a busy core, auto leaves chunks raw or LZ4, and
 * pre-copy rounds leave the pages written after round 0 raw in the patch area. Here,
 * with the time a snapshot does not have, each chunk is read and checked as a restore
 * reads it and written again as a zstd frame where that saves a page (zstd frames
 * without patches are kept as they are), and the patches end up inside their chunks.
 *
 * The new image is written under a temporary name beside the old one (image_write.c)
 * and renamed over it only when whole, and only if the name still holds the file that
 * was read: at every moment the name holds a valid image, and a kill leaves the old
 * one and a temporary the next writer of that name sweeps. A rewritten image has a new
 * identity, so an incremental image taken from the old one no longer opens: a child is
 * refused here, and the monitor never compacts an image a chain hangs from.
 */
#include "compact.h"
#include "image_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define COMPACT_PIECE (1u << 20) /* a long section is copied this much at a time */

/* Section @s, longer than a piece, streamed into @w a piece at a time; the bytes
 * copied must hash to the checksum img_open verified (the file may change since). */
static int compact_stream_section(const struct img_reader *r, const struct img_section *s,
				  struct img_writer *w, uint8_t *buf)
{
	XXH3_state_t *st = XXH3_createState();
	int rc = st ? img_stream_begin(w, s->type) : -ENOMEM;

	if (!rc)
		XXH3_64bits_reset(st);
	for (uint64_t off = 0; !rc && off < s->length; off += COMPACT_PIECE) {
		size_t n = s->length - off < COMPACT_PIECE ? (size_t)(s->length - off) : COMPACT_PIECE;

		rc = img_read_at(r, s, off, buf, n);
		if (!rc && XXH3_64bits_update(st, buf, n))
			rc = -EINVAL;
		if (!rc)
			rc = img_stream_record(w, NULL, 0, buf, n);
	}
	if (!rc && XXH3_64bits_digest(st) != s->hash)
		rc = -EBADMSG;
	if (!rc)
		rc = img_stream_end(w);
	XXH3_freeState(st);
	return rc;
}

int img_copy_sections(const struct img_reader *r, struct img_writer *w)
{
	uint8_t *buf = malloc(COMPACT_PIECE);
	int rc = buf ? 0 : -ENOMEM;

	for (int i = 0; i < r->n_sections && !rc; i++) {
		const struct img_section *s = &r->sec[i];
		void *data;

		if (s->type == IMG_SEC_CHUNKS || s->type == IMG_SEC_ENCODING ||
		    s->type == IMG_SEC_PARENT || s->type == IMG_SEC_PAGEMASK ||
		    s->type == IMG_SEC_PATCHES)
			continue;
		if (s->length > COMPACT_PIECE) {
			rc = compact_stream_section(r, s, w, buf);
			continue;
		}
		data = NULL;
		rc = img_read_section(r, s, &data);
		if (!rc)
			rc = img_add_section(w, s->type, data, s->length);
		free(data);
	}
	free(buf);
	return rc;
}

/* Chunk @c, read and checked into @buf, into @w: its zstd frame as it is when it may
 * stand alone, else compressed anew (or raw where that saves nothing). */
static int compact_chunk(const struct img_reader *r, struct img_writer *w, uint64_t c,
			 const struct compact_job *job, uint8_t *buf, uint8_t *scratch)
{
	bool patched = r->patch_first && r->patch_first[c + 1] > r->patch_first[c];
	uint8_t what[IMG_PAGES_PER_CHUNK];
	const void *frame;
	uint64_t zero;
	int rc = img_read_chunk_frame(r, c, buf, &frame);

	if (rc)
		return rc;
	memset(what, IMG_PAGE_DATA, sizeof(what));
	rc = img_chunk_prepare(w, c, buf, what, &zero);
	if (rc)
		return rc;
	if (frame && r->enc[c].codec == IMG_CODEC_ZSTD && !patched && !job->relevel) {
		memcpy(scratch, frame, r->enc[c].stored_len);
		rc = img_chunk_write_frame(w, c, scratch, r->enc[c].stored_len, what);
		if (rc != -EINVAL)
			return rc;
	}
	return img_chunk_write(w, c, buf, what, scratch);
}

/* Every chunk of @r into @w, yielding before each. */
static int compact_chunks(const struct img_reader *r, struct img_writer *w,
			  const struct compact_job *job, char err[IMG_ERR_LEN])
{
	uint8_t *buf = aligned_alloc(PAGE_SIZE, IMG_CHUNK);
	uint8_t *scratch = aligned_alloc(PAGE_SIZE, IMG_SCRATCH_SIZE);
	int rc = buf && scratch ? 0 : -ENOMEM;

	for (uint64_t c = 0; !rc && c < r->n_chunks; c++) {
		rc = job->yield ? job->yield(job->ctx) : 0;
		if (rc) {
			snprintf(err, IMG_ERR_LEN, "given up: %s", strerror(-rc));
			break;
		}
		rc = compact_chunk(r, w, c, job, buf, scratch);
		if (rc)
			snprintf(err, IMG_ERR_LEN, "memory chunk %llu (guest %#llx): %s",
				 (unsigned long long)c, (unsigned long long)(c * IMG_CHUNK),
				 rc == -EBADMSG ? "fails its checksum: the image is damaged" :
						  strerror(-rc));
	}
	free(buf);
	free(scratch);
	return rc;
}

/* The image to write in place of @r: the same but for its codec and patches. */
static struct img_header_info compact_info(const struct img_reader *r, int level)
{
	struct img_header_info info = r->info;

	info.flags &= ~IMG_FLAG_PATCHED;
	info.codec = IMG_CODEC_ZSTD;
	info.level = level;
	return info;
}

static int compact_open(const char *path, const struct compact_job *job, struct img_reader *r,
			struct stat *st, char err[IMG_ERR_LEN])
{
	int rc = codec_level_check(IMG_CODEC_ZSTD, job->level);

	if (rc) {
		snprintf(err, IMG_ERR_LEN, "zstd has no level %d", job->level);
		return rc;
	}
	rc = img_open(path, r, err);
	if (rc)
		return rc;
	if (r->parent) {
		snprintf(err, IMG_ERR_LEN, "it is an incremental image: compacting it would change "
			 "what its children name; merge it (ccvm merge) and compact the result");
		rc = -EINVAL;
	} else if (fstat(r->fd, st) < 0) {
		rc = -errno;
		snprintf(err, IMG_ERR_LEN, "fstat: %s", strerror(errno));
	} else if (job->direct) {
		(void)img_reader_direct(r); /* (buffered where it cannot) */
	}
	if (rc)
		img_close(r);
	return rc;
}

int img_compact(const char *path, struct compact_job *job, char err[IMG_ERR_LEN])
{
	struct img_writer *w = NULL;
	struct img_header_info info;
	struct img_reader r;
	struct stat st;
	int rc = compact_open(path, job, &r, &st, err);

	if (rc)
		return rc;
	job->bytes_in = (uint64_t)st.st_blocks * 512;
	info = compact_info(&r, job->level);
	rc = img_create(path, &info, &w);
	if (rc)
		snprintf(err, IMG_ERR_LEN, "cannot create its new copy: %s", strerror(-rc));
	if (!rc) {
		img_replaces(w, st.st_dev, st.st_ino);
		rc = compact_chunks(&r, w, job, err);
	}
	if (!rc && (rc = img_copy_sections(&r, w)))
		snprintf(err, IMG_ERR_LEN, "copying the sections: %s", strerror(-rc));
	if (!rc && (rc = img_finish(w)))
		snprintf(err, IMG_ERR_LEN, "%s", rc == -ESTALE ?
			 "the image was replaced while it was compacted: the new one is kept" :
			 strerror(-rc));
	else if (rc && w)
		img_abort(w);
	img_close(&r);
	if (!rc)
		job->bytes_out = img_disk_bytes(path);
	return rc;
}

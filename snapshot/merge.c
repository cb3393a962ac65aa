/*
 * merge.c - flatten a chain of incremental images into one full image.
 *
 * Each chunk is loaded as a restore would load it (the full ancestor's, then every
 * child's pages over it, each level checked against its own checksums) and written
 * again like a snapshot's chunk: zero pages become holes of the new image only now,
 * where no parent lies under them, so a page a child wrote as zero stays zero
 * (Firecracker #2802 turned such pages into stale data). The sections (vCPUs, process
 * state) are the newest image's: they describe the instant the chain restores to.
 */
#include "merge.h"
#include "compact.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Every chunk of the chain into @w. */
static int merge_chunks(const struct img_reader *r, struct img_writer *w, char err[IMG_ERR_LEN])
{
	uint8_t what[IMG_CHUNK / PAGE_SIZE];
	uint8_t *buf = aligned_alloc(PAGE_SIZE, IMG_CHUNK);
	uint8_t *scratch = aligned_alloc(PAGE_SIZE, IMG_SCRATCH_SIZE);
	int rc = buf && scratch ? 0 : -ENOMEM;

	for (uint64_t c = 0; !rc && c < r->n_chunks; c++) {
		uint64_t zero;
		bool data;

		rc = img_load_chunk(r, c, buf, &data);
		if (rc) {
			snprintf(err, IMG_ERR_LEN, "memory chunk %llu (guest %#llx) %s",
				 (unsigned long long)c, (unsigned long long)(c * IMG_CHUNK),
				 rc == -EBADMSG ? "fails its checksum: the chain is damaged" :
						  strerror(-rc));
			break;
		}
		if (!data)
			memset(buf, 0, IMG_CHUNK);
		memset(what, IMG_PAGE_DATA, sizeof(what));
		rc = img_chunk_prepare(w, c, buf, what, &zero);
		if (!rc)
			rc = img_chunk_write(w, c, buf, what, scratch);
		if (rc)
			snprintf(err, IMG_ERR_LEN, "writing: %s", strerror(-rc));
	}
	free(buf);
	free(scratch);
	return rc;
}

/* True when @out is one of the files of @r's chain (merging over it would destroy
 * what is being read). */
static bool merge_overwrites_chain(const struct img_reader *r, const char *out)
{
	struct stat so, si;

	if (stat(out, &so) != 0)
		return false;
	for (; r; r = r->parent)
		if (fstat(r->fd, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
			return true;
	return false;
}

int img_merge(const char *child, const char *out, char err[IMG_ERR_LEN])
{
	struct img_writer *w = NULL;
	struct img_reader r;
	struct img_header_info info;
	int rc = img_open(child, &r, err);

	if (rc)
		return rc;
	if (merge_overwrites_chain(&r, out)) {
		snprintf(err, IMG_ERR_LEN, "%s is an image of the chain being merged", out);
		img_close(&r);
		return -EINVAL;
	}
	info = r.info;
	info.flags &= ~(IMG_FLAG_CHILD | IMG_FLAG_PATCHED); /* (patches are folded in) */
	info.codec = r.codec;
	info.level = r.codec == IMG_CODEC_NONE ? 0 : r.level;
	rc = img_create(out, &info, &w);
	if (rc)
		snprintf(err, IMG_ERR_LEN, "cannot create %s: %s", out, strerror(-rc));
	if (!rc)
		rc = merge_chunks(&r, w, err);
	if (!rc && (rc = img_copy_sections(&r, w)))
		snprintf(err, IMG_ERR_LEN, "copying the state sections: %s", strerror(-rc));
	if (!rc && (rc = img_finish(w)))
		snprintf(err, IMG_ERR_LEN, "finishing %s: %s", out, strerror(-rc));
	else if (rc && w)
		img_abort(w);
	img_close(&r);
	return rc;
}

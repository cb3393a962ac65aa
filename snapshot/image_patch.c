/*
 * image_patch.c - the patch area of an image whose chunks a pre-copy's round 0 stored
 * as frames (image_pre.c): a slot of 4 KiB after the memory for each page written into
 * a framed chunk afterwards, kept for that page, and the section that says which page
 * stands where (image.c has the layout; image_chunk.c lays the patches over a chunk
 * as it reads it).
 */
#include "image_impl.h"

#include <errno.h>
#include <stdlib.h>

bool img_patch_needed(const struct img_writer *w, uint64_t pfn)
{
	return img_pre_framed(w, pfn / IMG_PAGES_PER_CHUNK) && !w->pre.slot[pfn];
}

int img_precopy_reserve(struct img_writer *w, uint64_t n)
{
	if (!w->pre.slot || w->stream.open || w->pre.reserved)
		return w->pre.slot ? -EINVAL : 0;
	w->pre.res_next = __atomic_fetch_add(&w->tail, n * PAGE_SIZE, __ATOMIC_ACQ_REL);
	w->pre.res_end = w->pre.res_next + n * PAGE_SIZE;
	w->pre.reserved = true;
	return 0;
}

/* Page @pfn's slot, taken now if it has none: its file offset; 0 when there is no
 * room (past the slots set aside at the instant, or a section is being streamed where
 * slots would go). */
static uint64_t img_patch_slot(struct img_writer *w, uint64_t pfn)
{
	uint64_t off = w->pre.slot[pfn];

	if (off)
		return off;
	if (w->pre.reserved) {
		off = __atomic_fetch_add(&w->pre.res_next, PAGE_SIZE, __ATOMIC_ACQ_REL);
		if (off >= w->pre.res_end)
			return 0;
	} else {
		if (w->stream.open)
			return 0;
		off = __atomic_fetch_add(&w->tail, PAGE_SIZE, __ATOMIC_ACQ_REL);
	}
	w->pre.slot[pfn] = off;
	__atomic_fetch_add(&w->pre.n, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->stored, PAGE_SIZE, __ATOMIC_RELAXED);
	return off;
}

int img_patch_runs(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n,
		   img_take_fn take, const void *ctx)
{
	const uint8_t *d = data;
	uint64_t run = 0, run_off = 0, len = 0;
	int rc = 0;

	/* Slots taken in one pass are neighbours in the file, and so one write. */
	for (uint64_t i = 0; i <= n && !rc; i++) {
		uint64_t off = 0;

		if (i < n && take(w, pfn + i, d + i * PAGE_SIZE, ctx)) {
			off = img_patch_slot(w, pfn + i);
			if (!off)
				return -ENOSPC;
			if (len && off == run_off + len * PAGE_SIZE && run + len == i) {
				len++;
				continue;
			}
		}
		if (len)
			rc = img_pwrite_all(w->fd, d + run * PAGE_SIZE, len * PAGE_SIZE, run_off);
		len = off ? 1 : 0;
		run = i;
		run_off = off;
	}
	return rc;
}

int img_patch_section(struct img_writer *w, uint8_t **buf, size_t *len)
{
	uint64_t n = __atomic_load_n(&w->pre.n, __ATOMIC_ACQUIRE), k = 0;
	uint8_t *b;

	*buf = NULL;
	*len = 0;
	if (!w->pre.slot || !n)
		return 0;
	b = malloc(IMG_PATCH_HEAD + n * IMG_PATCH_ENT);
	if (!b)
		return -ENOMEM;
	img_put64(b, n);
	img_put64(b + 8, 0);
	for (uint64_t p = 0; p < w->info.ram_size / PAGE_SIZE && k < n; p++) {
		if (!w->pre.slot[p])
			continue;
		img_put64(b + IMG_PATCH_HEAD + k * IMG_PATCH_ENT, p);
		img_put64(b + IMG_PATCH_HEAD + k * IMG_PATCH_ENT + 8, w->pre.slot[p]);
		k++;
	}
	*buf = b;
	*len = IMG_PATCH_HEAD + k * IMG_PATCH_ENT;
	img_put64(b, k);
	return 0;
}

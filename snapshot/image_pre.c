/*
 * image_pre.c - memory written into an image before its instant (--precopy rounds,
 * snapshot/precopy.c): the same page may be written several times while its guest
 * keeps running, and only the bytes that still stand at the instant count.
 *
 * A pre-copy writes pages at their fixed places and remembers each one's share of
 * its chunk's checksum, without adding it. At the instant the snapshot keeps the pages
 * not written since (img_precopy_keep adds their shares); every other page is saved
 * afterwards as in any image, and a page that ends as a hole where a pre-copy left
 * bytes is written as zeros, so the file reads as the instant everywhere. Such an
 * image stores every chunk raw: a frame at a chunk's place would leave a pre-copy's
 * bytes behind it.
 */
#include "image_impl.h"

#include <errno.h>
#include <stdlib.h>

int img_precopy_begin(struct img_writer *w)
{
	uint64_t pages = w->info.ram_size / PAGE_SIZE;

	if (w->held)
		return -EINVAL; /* a child holds what was written since its parent's instant */
	if (w->pre_bits)
		return 0;
	w->pre_hash = calloc(pages, sizeof(*w->pre_hash));
	w->pre_bits = calloc(pages, 1);
	if (!w->pre_hash || !w->pre_bits) {
		free(w->pre_hash);
		free(w->pre_bits);
		w->pre_hash = NULL;
		w->pre_bits = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Page @pfn's bytes at @page, about to be written: its share and bits. Whether the file
 * must take them (data, or zeros over earlier bytes). */
static bool img_pre_note(struct img_writer *w, uint64_t pfn, const uint8_t *page,
			 const void *ctx)
{
	bool zero = img_page_is_zero(page);
	uint8_t *b = &w->pre_bits[pfn];

	(void)ctx;
	w->pre_hash[pfn] = img_page_hash(pfn, zero ? NULL : page);
	if (zero && !(*b & IMG_PRE_BYTES)) {
		*b = IMG_PRE_SEEN; /* a hole still */
		return false;
	}
	*b = (uint8_t)(IMG_PRE_SEEN | IMG_PRE_BYTES | (zero ? 0 : IMG_PRE_DATA));
	return true;
}

int img_precopy_pages(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n)
{
	if (!w->pre_bits || pfn >= w->info.ram_size / PAGE_SIZE ||
	    n > w->info.ram_size / PAGE_SIZE - pfn)
		return -EINVAL;
	return img_write_runs(w, pfn, data, n, img_pre_note, NULL);
}

bool img_precopied(const struct img_writer *w, uint64_t pfn)
{
	return w->pre_bits && (w->pre_bits[pfn] & IMG_PRE_SEEN);
}

void img_precopy_keep(struct img_writer *w, uint64_t pfn)
{
	uint8_t *b = &w->pre_bits[pfn];

	if (!(*b & IMG_PRE_SEEN) || (*b & IMG_PRE_KEPT))
		return;
	*b |= IMG_PRE_KEPT;
	w->chunk_hash[pfn / IMG_PAGES_PER_CHUNK] += w->pre_hash[pfn];
	if (*b & IMG_PRE_DATA)
		img_count_raw(w, pfn / IMG_PAGES_PER_CHUNK, 1);
}

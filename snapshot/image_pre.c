/*
 * image_pre.c - memory written into an image before its instant (--precopy rounds,
 * snapshot/precopy.c): the same page may be written several times while its guest
 * keeps running, and only the bytes that still stand at the instant count.
 *
 * A pre-copy writes pages and remembers each one's share of its chunk's checksum,
 * without adding it. At the instant the snapshot keeps the pages not written since
 * (img_precopy_keep adds their shares); every other page is saved afterwards as in any
 * image, and a page that ends as a hole where a pre-copy left bytes is written as
 * zeros, so the image reads as the instant everywhere.
 *
 * With a codec, the first pass (round 0, which visits each page once, in address
 * order) is gathered a chunk at a time, and a chunk is stored as one frame at its
 * place when that saves a page, as any image's chunk is. A frame cannot take a page
 * written later, so every page written into a framed chunk afterwards, by a later
 * round or by the writer after the instant, goes raw into a slot of 4 KiB after the
 * memory, one per page for the whole snapshot (a page written again reuses it), and
 * the patches section says which page stands where: a reader lays them over the
 * decompressed chunk before checking it. The chunks round 0 did not frame are raw,
 * their pages at their places.
 */
#include "image_impl.h"

#include <errno.h>
#include <stdlib.h>

/* Round 0's gathering: the chunk's buffer, compressing's, what each chunk became. */
static int img_pre_framing(struct img_writer *w)
{
	if (w->info.codec == IMG_CODEC_NONE)
		return 0;
	if (posix_memalign((void **)&w->pre.buf, PAGE_SIZE, IMG_CHUNK) ||
	    posix_memalign((void **)&w->pre.scratch, PAGE_SIZE, IMG_SCRATCH_SIZE)) {
		w->pre.buf = w->pre.scratch = NULL;
		return -ENOMEM;
	}
	w->pre.chunk = calloc(w->n_chunks, 1);
	w->pre.slot = calloc(w->info.ram_size / PAGE_SIZE, sizeof(uint64_t));
	if (!w->pre.chunk || !w->pre.slot)
		return -ENOMEM; /* (img_forget frees what was had) */
	w->pre.gathering = true;
	w->pre.cur = UINT64_MAX;
	return 0;
}

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
	return img_pre_framing(w);
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

/* The same for a page of a framed chunk, where IMG_PRE_BYTES says the bytes standing
 * for it (in the frame or its slot) are not zero: zeros are written only over such. */
static bool img_pre_note_framed(struct img_writer *w, uint64_t pfn, const uint8_t *page,
				const void *ctx)
{
	bool zero = img_page_is_zero(page), take = !zero || (w->pre_bits[pfn] & IMG_PRE_BYTES);

	(void)ctx;
	w->pre_hash[pfn] = img_page_hash(pfn, zero ? NULL : page);
	w->pre_bits[pfn] = (uint8_t)(IMG_PRE_SEEN | (zero ? 0 : IMG_PRE_DATA | IMG_PRE_BYTES));
	return take;
}

/* A page of the gathered chunk that holds data (@ctx: the chunk's gathered bits). */
static bool img_pre_gathered_data(struct img_writer *w, uint64_t pfn, const uint8_t *page,
				  const void *ctx)
{
	const uint64_t *got = ctx;
	uint64_t i = pfn % IMG_PAGES_PER_CHUNK;

	(void)page;
	return (got[i / 64] >> (i % 64) & 1) && (w->pre_bits[pfn] & IMG_PRE_DATA);
}

/* The chunk gathered so far: a frame when that saves a page, else its pages raw. */
static int img_pre_flush(struct img_writer *w)
{
	uint64_t c = w->pre.cur, first = c * IMG_PAGES_PER_CHUNK, pages = 0;
	int rc;

	if (c == UINT64_MAX)
		return 0;
	w->pre.cur = UINT64_MAX;
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		if (w->pre.got[i / 64] >> (i % 64) & 1) {
			img_pre_note_framed(w, first + i, w->pre.buf + i * PAGE_SIZE, NULL);
			pages += (w->pre_bits[first + i] & IMG_PRE_DATA) != 0;
		}
	rc = img_chunk_frame(w, c, w->pre.buf, pages, 0, w->pre.scratch);
	if (rc < 0)
		return rc;
	w->pre.chunk[c] = rc ? IMG_PRE_CHUNK_RAW : IMG_PRE_CHUNK_FRAMED;
	if (!rc)
		return 0;
	return img_write_runs(w, first, w->pre.buf, IMG_PAGES_PER_CHUNK, img_pre_gathered_data,
			      w->pre.got);
}

/* Pages @pfn.. (@n, in one chunk round 0 has not passed) into the chunk gathered. */
static int img_pre_gather(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n)
{
	uint64_t c = pfn / IMG_PAGES_PER_CHUNK, i = pfn % IMG_PAGES_PER_CHUNK;

	if (w->pre.cur != c) {
		int rc = img_pre_flush(w);

		if (rc)
			return rc;
		w->pre.cur = c;
		memset(w->pre.buf, 0, IMG_CHUNK);
		memset(w->pre.got, 0, sizeof(w->pre.got));
	}
	memcpy(w->pre.buf + i * PAGE_SIZE, data, n * PAGE_SIZE);
	for (uint64_t k = i; k < i + n; k++)
		w->pre.got[k / 64] |= 1ULL << (k % 64);
	return 0;
}

/* Pages @pfn.. (@n, in one chunk) of a pre-copy: gathered by round 0, into their slots
 * in a framed chunk, else at their places. */
static int img_pre_piece(struct img_writer *w, uint64_t pfn, const uint8_t *data, uint64_t n)
{
	uint64_t c = pfn / IMG_PAGES_PER_CHUNK;

	if (w->pre.gathering && w->pre.chunk[c] == IMG_PRE_CHUNK_NONE)
		return img_pre_gather(w, pfn, data, n);
	if (img_pre_framed(w, c))
		return img_patch_runs(w, pfn, data, n, img_pre_note_framed, NULL);
	return img_write_runs(w, pfn, data, n, img_pre_note, NULL);
}

int img_precopy_pages(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n)
{
	const uint8_t *d = data;
	int rc = 0;

	if (!w->pre_bits || pfn >= w->info.ram_size / PAGE_SIZE ||
	    n > w->info.ram_size / PAGE_SIZE - pfn)
		return -EINVAL;
	while (n && !rc) {
		uint64_t k = IMG_PAGES_PER_CHUNK - pfn % IMG_PAGES_PER_CHUNK;

		k = k < n ? k : n;
		rc = img_pre_piece(w, pfn, d, k);
		pfn += k;
		d += k * PAGE_SIZE;
		n -= k;
	}
	return rc;
}

int img_precopy_first_done(struct img_writer *w)
{
	int rc;

	if (!w->pre.gathering)
		return 0;
	rc = img_pre_flush(w);
	w->pre.gathering = false;
	return rc;
}

bool img_precopied(const struct img_writer *w, uint64_t pfn)
{
	return w->pre_bits && (w->pre_bits[pfn] & IMG_PRE_SEEN);
}

void img_precopy_keep(struct img_writer *w, uint64_t pfn)
{
	uint8_t *b = &w->pre_bits[pfn];
	uint64_t c = pfn / IMG_PAGES_PER_CHUNK;

	if (!(*b & IMG_PRE_SEEN) || (*b & IMG_PRE_KEPT))
		return;
	*b |= IMG_PRE_KEPT;
	w->chunk_hash[c] += w->pre_hash[pfn];
	if (!(*b & IMG_PRE_DATA))
		return;
	if (img_pre_framed(w, c)) /* (its frame's or slot's bytes are counted already) */
		__atomic_fetch_add(&w->chunk_pages[c], 1, __ATOMIC_RELAXED);
	else
		img_count_raw(w, c, 1);
}

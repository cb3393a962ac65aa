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
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

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
	w->pre.slots = calloc(w->n_chunks, sizeof(uint16_t));
	w->pre.slot = calloc(w->info.ram_size / PAGE_SIZE, sizeof(uint64_t));
	if (!w->pre.chunk || !w->pre.slot || !w->pre.slots)
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

/* A framed chunk is framed again once its slots would take more than this share of
 * its frame's pages: a page rewritten in every round keeps its one slot, but a writer
 * that reaches new pages round after round (a slow disk makes rounds long) would give
 * the chunk a second, raw copy in the patch area. */
#define IMG_REFRAME_SHARE 2
#define IMG_REFRAME_MIN   32 /* slots a chunk keeps whatever its frame */

/* Chunk @c's frame read back and decompressed into pre.buf, its slots laid over it:
 * the bytes that stand for each of its pages now. */
static int img_pre_read_back(struct img_writer *w, uint64_t c)
{
	const struct img_chunk_enc *e = &w->enc[c];
	uint64_t first = c * IMG_PAGES_PER_CHUNK;
	int rc;

	if (w->pre.rfd < 0 && (w->pre.rfd = img_reopen(w->fd, O_RDONLY)) < 0)
		return w->pre.rfd;
	rc = img_pread_all(w->pre.rfd, w->pre.scratch, e->stored_len, IMG_MEM_OFFSET + c * IMG_CHUNK);
	if (!rc && XXH3_64bits(w->pre.scratch, e->stored_len) != e->stored_hash)
		rc = -EIO; /* (our own file changed under us) */
	if (!rc && codec_decompress((enum img_codec)e->codec, w->pre.scratch, e->stored_len,
				    w->pre.buf, IMG_CHUNK))
		rc = -EIO;
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK && !rc; i++)
		if (w->pre.slot[first + i])
			rc = img_pread_all(w->pre.rfd, w->pre.buf + i * PAGE_SIZE, PAGE_SIZE,
					   w->pre.slot[first + i]);
	return rc;
}

/* Chunk @c's slots given up: their pages stand in its new frame (or raw at its place). */
static void img_pre_drop_slots(struct img_writer *w, uint64_t c)
{
	uint64_t first = c * IMG_PAGES_PER_CHUNK, k = 0;

	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++) {
		uint64_t off = w->pre.slot[first + i];

		if (!off)
			continue;
		/* (a hole again; the space stays in the file, the blocks go) */
		(void)fallocate(w->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				PAGE_SIZE);
		w->pre.slot[first + i] = 0;
		k++;
	}
	w->pre.slots[c] = 0;
	__atomic_fetch_sub(&w->pre.n, k, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&w->stored, k * PAGE_SIZE, __ATOMIC_RELAXED);
}

/* The pages of chunk @c's place an old frame of @old bytes took beyond a new one of
 * @now bytes, given back. */
static void img_pre_punch(struct img_writer *w, uint64_t c, uint64_t now, uint64_t old)
{
	uint64_t from = (now + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
	uint64_t to = (old + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);

	if (to > from)
		(void)fallocate(w->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)(IMG_MEM_OFFSET + c * IMG_CHUNK + from), (off_t)(to - from));
}

/* Framed chunk @c with pages @pfn.. (@n) written into it: read back, the pages laid
 * over it, and stored again as round 0 stores a chunk (a frame when that saves a page,
 * else raw at its place, every page of it, zeros too, over the old frame). */
static int img_pre_reframe(struct img_writer *w, uint64_t c, uint64_t pfn, const uint8_t *data,
			   uint64_t n)
{
	uint64_t first = c * IMG_PAGES_PER_CHUNK, pages = 0, old = w->enc[c].stored_len;
	int rc = img_pre_read_back(w, c);

	if (rc)
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		img_pre_note_framed(w, pfn + i, data + i * PAGE_SIZE, NULL);
		memcpy(w->pre.buf + (pfn - first + i) * PAGE_SIZE, data + i * PAGE_SIZE, PAGE_SIZE);
	}
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		pages += !img_page_is_zero(w->pre.buf + i * PAGE_SIZE);
	__atomic_fetch_sub(&w->stored, old, __ATOMIC_RELAXED);
	w->enc[c] = (struct img_chunk_enc){ 0 };
	rc = img_chunk_frame(w, c, w->pre.buf, pages, 0, w->pre.scratch);
	if (rc < 0)
		return rc;
	img_pre_drop_slots(w, c);
	if (!rc) {
		img_pre_punch(w, c, w->enc[c].stored_len, old);
		return 0;
	}
	w->pre.chunk[c] = IMG_PRE_CHUNK_RAW; /* (its kept pages are counted raw then) */
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		w->pre_bits[first + i] |= IMG_PRE_BYTES; /* (the file holds bytes there now) */
	return img_write_mem(w, w->pre.buf, IMG_CHUNK, IMG_MEM_OFFSET + c * IMG_CHUNK);
}

/* Whether @n pages from @pfn written into framed chunk @c would give it more slots
 * than its frame is worth: frame it again instead (before the instant only: after it,
 * its pages are few and their slots set aside). */
static bool img_pre_worth_reframing(const struct img_writer *w, uint64_t c, uint64_t pfn,
				    uint64_t n)
{
	uint64_t fresh = 0, frame_pages = (w->enc[c].stored_len + PAGE_SIZE - 1) / PAGE_SIZE;
	uint64_t limit = frame_pages / IMG_REFRAME_SHARE;

	if (w->pre.reserved || w->pre.gathering) /* (pre.buf is the gathered chunk's) */
		return false;
	for (uint64_t i = 0; i < n; i++)
		fresh += !w->pre.slot[pfn + i];
	return w->pre.slots[c] + fresh > (limit > IMG_REFRAME_MIN ? limit : IMG_REFRAME_MIN);
}

/* Pages @pfn.. (@n, in one chunk) of a pre-copy: gathered by round 0, into their slots
 * in a framed chunk (or the chunk framed again), else at their places. */
static int img_pre_piece(struct img_writer *w, uint64_t pfn, const uint8_t *data, uint64_t n)
{
	uint64_t c = pfn / IMG_PAGES_PER_CHUNK;

	if (w->pre.gathering && w->pre.chunk[c] == IMG_PRE_CHUNK_NONE)
		return img_pre_gather(w, pfn, data, n);
	if (img_pre_framed(w, c) && img_pre_worth_reframing(w, c, pfn, n))
		return img_pre_reframe(w, c, pfn, data, n);
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

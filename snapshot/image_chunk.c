/*
 * image_chunk.c - one 2 MiB chunk of an image: its checksum, and how it is stored
 * (raw at its place, a child's pages packed, or one compressed frame when that saves
 * space) and read back, checked before it is decompressed and after (image.c has the
 * layout).
 */
#include "image_impl.h"
#include "../base/mono.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

uint64_t img_chunk_digest(uint64_t c, const void *data, uint8_t *what)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;
	const uint8_t *d = data;
	uint64_t h = 0;

	for (uint64_t i = 0; i < per; i++) {
		if (what[i] == IMG_PAGE_DONE || what[i] == IMG_PAGE_PARENT)
			continue;
		if (what[i] == IMG_PAGE_DATA && img_page_is_zero(d + i * PAGE_SIZE))
			what[i] = IMG_PAGE_HOLE;
		h += img_page_hash(first + i, what[i] == IMG_PAGE_DATA ? d + i * PAGE_SIZE : NULL);
	}
	return h;
}

int img_chunk_add_digest(struct img_writer *w, uint64_t c, const uint8_t *what, uint64_t h,
			 uint64_t *zero)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;

	*zero = 0;
	if (c >= w->n_chunks)
		return -EINVAL;
	for (uint64_t i = 0; i < per; i++) {
		if (what[i] == IMG_PAGE_DONE || what[i] == IMG_PAGE_PARENT)
			continue;
		img_hold(w, first + i);
		*zero += what[i] == IMG_PAGE_HOLE;
	}
	__atomic_fetch_add(&w->chunk_hash[c], h, __ATOMIC_RELAXED);
	return 0;
}

int img_chunk_prepare(struct img_writer *w, uint64_t c, const void *data, uint8_t *what,
		      uint64_t *zero)
{
	*zero = 0;
	if (c >= w->n_chunks)
		return -EINVAL;
	return img_chunk_add_digest(w, c, what, img_chunk_digest(c, data, what), zero);
}

/* Write the @n bytes of a frame in @scratch (encoding @enc) at chunk @c's place. */
static int img_chunk_store(struct img_writer *w, uint64_t c, uint8_t *scratch, uint64_t n,
			   uint8_t enc, uint64_t pages)
{
	uint64_t padded = (n + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
	int rc;

	memset(scratch + n, 0, padded - n);
	rc = img_write_mem(w, scratch, padded, IMG_MEM_OFFSET + c * IMG_CHUNK);
	if (rc)
		return rc;
	w->enc[c] = (struct img_chunk_enc){ .codec = enc, .stored_len = (uint32_t)n,
					    .stored_hash = XXH3_64bits(scratch, (size_t)n) };
	__atomic_fetch_add(&w->chunk_pages[c], (uint32_t)pages, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->stored, n, __ATOMIC_RELAXED);
	return 0;
}

/* The pages a child holds (zero ones too) one after another into @out; their count. */
static uint64_t img_pack(const uint8_t *data, const uint8_t *what, uint8_t *out)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++) {
		if (what[i] == IMG_PAGE_PARENT)
			continue;
		if (what[i] == IMG_PAGE_DATA)
			memcpy(out + k * PAGE_SIZE, data + i * PAGE_SIZE, PAGE_SIZE);
		else
			memset(out + k * PAGE_SIZE, 0, PAGE_SIZE);
		k++;
	}
	return k;
}

/* The codec and level for @len bytes at @data: the image's, or with auto the one its
 * place on the ladder gives (codec_auto.h; it probes into @scratch). IMG_CODEC_NONE:
 * store them as they are. */
static void img_codec_for(struct img_writer *w, const void *data, size_t len, uint8_t *scratch,
			  struct cauto_choice *ch)
{
	if (w->info.codec == IMG_CODEC_AUTO) {
		cauto_choose(w->autoc, data, len, scratch, IMG_SCRATCH_SIZE, ch);
		return;
	}
	*ch = (struct cauto_choice){ .codec = w->info.codec, .level = w->info.level };
}

/* codec_compress with @ch's codec and level, timed: auto steers by compressing's time. */
static ssize_t img_compress(struct img_writer *w, const struct cauto_choice *ch, const void *src,
			    size_t len, void *dst, size_t cap)
{
	uint64_t t0 = mono_ns(), cpu0 = mono_thread_cpu_ns();
	ssize_t n;
	bool timed;

	cauto_compress_begin(w->autoc);
	n = codec_compress(ch->codec, ch->level, src, len, dst, cap);
	/* (-ENOSPC: it did not shrink enough, after all the work; other errors: not timed) */
	timed = n > 0 || n == -ENOSPC;
	cauto_compressed(w->autoc, len, n > 0 ? (uint64_t)n : len, timed ? mono_ns() - t0 : 0,
			 timed ? mono_thread_cpu_ns() - cpu0 : 0);
	return n;
}

/* A child's chunk that holds some pages but not all: packed, and compressed when the
 * image has a codec and that saves a page. 1 when it is to be stored raw. */
static int img_chunk_pack(struct img_writer *w, uint64_t c, const uint8_t *data,
			  const uint8_t *what, uint64_t pages, uint8_t *scratch)
{
	uint8_t *packed = w->info.codec == IMG_CODEC_NONE ? scratch :
			  codec_thread_buffer(CODEC_BUF_PACKED, IMG_CHUNK);
	struct cauto_choice ch;
	uint64_t k;
	ssize_t n = 0;

	if (!packed)
		return -ENOMEM;
	k = img_pack(data, what, packed);
	if (k == IMG_PAGES_PER_CHUNK)
		return 1; /* all of it: as a full image's chunk */
	if (w->info.codec == IMG_CODEC_NONE)
		return img_chunk_store(w, c, scratch, k * PAGE_SIZE, IMG_ENC_PACKED, pages);
	img_codec_for(w, packed, k * PAGE_SIZE, scratch, &ch);
	if (ch.codec != IMG_CODEC_NONE)
		n = img_compress(w, &ch, packed, k * PAGE_SIZE, scratch, (k - 1) * PAGE_SIZE);
	if (n == -ENOSPC || n == 0) { /* packed alone, then */
		memcpy(scratch, packed, k * PAGE_SIZE);
		return img_chunk_store(w, c, scratch, k * PAGE_SIZE, IMG_ENC_PACKED, pages);
	}
	if (n < 0)
		return (int)n;
	return img_chunk_store(w, c, scratch, (uint64_t)n, (uint8_t)(IMG_ENC_PACKED | ch.codec),
			       pages);
}

/* Before compressing a whole chunk, four 32 KiB samples spread over it: when they do not
 * shrink below 85%, neither will the chunk by enough to pay for the CPU (zipfbench's
 * memory compresses to 0.9 at ~0.5 GB/s, slower than the disk takes it raw), and it is
 * stored raw at the cost of compressing 6% of it. */
#define IMG_SAMPLES 4
#define IMG_SAMPLE_LEN (32 * 1024)
#define IMG_SAMPLE_WORTH 0.85

static bool img_worth_compressing(const struct img_writer *w, const uint8_t *data,
				  uint8_t *scratch)
{
	uint64_t out = 0;

	for (int i = 0; i < IMG_SAMPLES; i++) {
		ssize_t n = codec_compress(w->info.codec, w->info.level,
					   data + i * (IMG_CHUNK / IMG_SAMPLES), IMG_SAMPLE_LEN,
					   scratch, IMG_SCRATCH_SIZE);

		if (n <= 0)
			return true; /* cannot tell: try the chunk */
		out += (uint64_t)n;
	}
	return (double)out < IMG_SAMPLE_WORTH * IMG_SAMPLES * IMG_SAMPLE_LEN;
}

int img_chunk_frame(struct img_writer *w, uint64_t c, const void *data, uint64_t pages,
		    uint64_t count, uint8_t *scratch)
{
	struct cauto_choice ch;
	ssize_t n;

	if (!pages || w->info.codec == IMG_CODEC_NONE)
		return 1;
	if (w->info.codec != IMG_CODEC_AUTO && !img_worth_compressing(w, data, scratch))
		return 1; /* (auto probes for itself) */
	img_codec_for(w, data, IMG_CHUNK, scratch, &ch);
	if (ch.codec == IMG_CODEC_NONE)
		return 1;
	n = img_compress(w, &ch, data, IMG_CHUNK, scratch, (pages - 1) * PAGE_SIZE);
	if (n == -ENOSPC || n == 0)
		return 1;
	if (n < 0)
		return (int)n;
	return img_chunk_store(w, c, scratch, (uint64_t)n, (uint8_t)ch.codec, count);
}

/* No pre-copy wrote into chunk @c (none ran, or round 0 stopped before it): a frame
 * may stand at its place. Where one did, its bytes may lie anywhere in the chunk's
 * place (or its frame there, image_pre.c). */
static bool img_pre_untouched(const struct img_writer *w, uint64_t c)
{
	if (!w->pre_bits)
		return true;
	if (w->pre.chunk && w->pre.chunk[c] != IMG_PRE_CHUNK_NONE)
		return false;
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		if (w->pre_bits[c * IMG_PAGES_PER_CHUNK + i])
			return false;
	return true;
}

/*
 * Chunk @c as one frame: compressed, when the image has a codec, a sample says it is
 * worth it and the frame saves at least one page on disk; or a child's held pages packed, without one. Never when a
 * page of the chunk was recorded on its own, nor where a pre-copy wrote (round 0
 * framed what it could: image_pre.c). Returns 1 when the chunk is to be stored
 * raw instead, 0 when written, or -errno.
 */
static int img_chunk_compress(struct img_writer *w, uint64_t c, const void *data,
			      const uint8_t *what, uint64_t pages, uint8_t *scratch)
{
	if (!pages || !scratch || !img_pre_untouched(w, c))
		return 1;
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		if (what[i] == IMG_PAGE_DONE)
			return 1;
	if (w->held) {
		int rc = img_chunk_pack(w, c, data, what, pages, scratch);

		if (rc != 1 || w->info.codec == IMG_CODEC_NONE)
			return rc; /* else it holds all: compressed as a full image's chunk */
	}
	return img_chunk_frame(w, c, data, pages, pages, scratch);
}

/* The data pages of chunk @c as @what says, or -EINVAL when a frame cannot hold it. */
static int64_t img_frame_pages(const struct img_writer *w, uint64_t c, uint64_t len,
			       const uint8_t *what)
{
	uint64_t pages = 0;

	if (c >= w->n_chunks || w->held || !img_pre_untouched(w, c) ||
	    w->info.codec == IMG_CODEC_NONE ||
	    w->info.codec == IMG_CODEC_AUTO) /* (a frame's codec is the image's) */
		return -EINVAL;
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++) {
		if (what[i] == IMG_PAGE_DONE || what[i] == IMG_PAGE_PARENT)
			return -EINVAL;
		pages += what[i] == IMG_PAGE_DATA;
	}
	/* As img_chunk_compress keeps a frame: only when it saves a page. */
	if (!len || !pages || len > (pages - 1) * PAGE_SIZE)
		return -EINVAL;
	return (int64_t)pages;
}

int img_frame_check(const struct img_writer *w, uint64_t c, uint64_t len, const uint8_t *what)
{
	int64_t pages = img_frame_pages(w, c, len, what);

	return pages < 0 ? (int)pages : 0;
}

int img_chunk_write_frame(struct img_writer *w, uint64_t c, uint8_t *frame, uint64_t len,
			  const uint8_t *what)
{
	int64_t pages = img_frame_pages(w, c, len, what);

	if (pages < 0)
		return (int)pages;
	return img_chunk_store(w, c, frame, len, (uint8_t)w->info.codec, (uint64_t)pages);
}

/* Whether page @pfn of a chunk being stored raw goes to the file: its data, or a hole
 * over a pre-copy's bytes (it reads as zero in the chunk's copy). */
static bool img_chunk_takes(struct img_writer *w, uint64_t pfn, const uint8_t *page,
			    const void *ctx)
{
	uint8_t what = ((const uint8_t *)ctx)[pfn % IMG_PAGES_PER_CHUNK];

	(void)page;
	return what == IMG_PAGE_DATA || (what == IMG_PAGE_HOLE && img_pre_stale(w, pfn));
}

int img_chunk_write(struct img_writer *w, uint64_t c, const void *data, const uint8_t *what,
		    void *scratch)
{
	const uint64_t per = IMG_PAGES_PER_CHUNK;
	uint64_t pages = 0;
	int rc;

	if (c >= w->n_chunks)
		return -EINVAL;
	for (uint64_t i = 0; i < per; i++)
		pages += what[i] == IMG_PAGE_DATA;
	if (img_pre_framed(w, c)) { /* round 0's frame stands: the pages go to slots */
		__atomic_fetch_add(&w->chunk_pages[c], (uint32_t)pages, __ATOMIC_RELAXED);
		return img_patch_runs(w, c * per, data, per, img_chunk_takes, what);
	}
	rc = img_chunk_compress(w, c, data, what, pages, scratch);
	if (rc <= 0)
		return rc;
	img_count_raw(w, c, pages);
	return img_write_runs(w, c * per, data, per, img_chunk_takes, what);
}

/* Pages the child holds in chunk @c. */
static uint64_t img_held_in(const struct img_reader *r, uint64_t c)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		k += img_bit_test(r->mask, c * IMG_PAGES_PER_CHUNK + i);
	return k;
}

/* A packed chunk: each page the child holds, in order; the others zero. The frame
 * (decompressed first if a codec is named with the packing) must hold exactly as many
 * pages as the mask says. */
static int img_unpack(const struct img_reader *r, uint64_t c, const uint8_t *frame,
		      uint64_t len, uint8_t *dst)
{
	const uint64_t first = c * IMG_PAGES_PER_CHUNK;
	enum img_codec codec = (enum img_codec)(r->enc[c].codec & ~IMG_ENC_PACKED);
	uint64_t k = 0;

	if (!r->mask)
		return -EBADMSG;
	if (codec != IMG_CODEC_NONE) {
		uint64_t want = img_held_in(r, c) * PAGE_SIZE;
		uint8_t *packed = codec_thread_buffer(CODEC_BUF_PACKED, IMG_CHUNK);

		if (!packed)
			return -ENOMEM;
		if (!want || want >= IMG_CHUNK ||
		    codec_decompress(codec, frame, len, packed, want))
			return -EBADMSG;
		frame = packed;
		len = want;
	}
	memset(dst, 0, IMG_CHUNK);
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++) {
		if (!img_bit_test(r->mask, first + i))
			continue;
		if ((k + 1) * PAGE_SIZE > len)
			return -EBADMSG;
		memcpy(dst + i * PAGE_SIZE, frame + k++ * PAGE_SIZE, PAGE_SIZE);
	}
	return k * PAGE_SIZE == len ? 0 : -EBADMSG;
}

/* @len bytes of memory at @off (a chunk's place) into @buf: with O_DIRECT, whole pages
 * (a frame is padded to them; @buf has room), where the reader asks for it and the
 * buffer is aligned; buffered otherwise, and from then on where the file system
 * refuses. */
static int img_read_mem(const struct img_reader *r, void *buf, size_t len, uint64_t off)
{
	size_t whole = (len + PAGE_SIZE - 1) & ~(size_t)(PAGE_SIZE - 1);

	if (r->direct && (uintptr_t)buf % PAGE_SIZE == 0 && off % PAGE_SIZE == 0) {
		int rc = img_pread_all(r->dfd, buf, whole, off);

		if (rc != -EINVAL)
			return rc;
	}
	return img_pread_all(r->fd, buf, len, off);
}

/* A compressed chunk's frame, read into this thread's buffer, checked, decompressed. */
static int img_read_frame(const struct img_reader *r, uint64_t c, void *dst)
{
	const struct img_chunk_enc *e = &r->enc[c];
	void *frame = codec_thread_buffer(CODEC_BUF_FRAME, e->stored_len);
	int rc;

	if (!frame)
		return -ENOMEM;
	rc = img_read_mem(r, frame, e->stored_len, IMG_MEM_OFFSET + c * IMG_CHUNK);
	if (rc)
		return rc;
	if (XXH3_64bits(frame, e->stored_len) != e->stored_hash)
		return -EBADMSG;
	if (e->codec & IMG_ENC_PACKED)
		return img_unpack(r, c, frame, e->stored_len, dst);
	return codec_decompress((enum img_codec)e->codec, frame, e->stored_len, dst, IMG_CHUNK);
}

/* A patched image's pages written after chunk @c's frame, laid over it (in @dst):
 * neighbouring pages whose slots are neighbours too in one read. */
static int img_apply_patches(const struct img_reader *r, uint64_t c, uint8_t *dst)
{
	uint64_t end, first = c * IMG_PAGES_PER_CHUNK;
	int rc = 0;

	if (!r->patch_first)
		return 0;
	end = r->patch_first[c + 1];
	for (uint64_t i = r->patch_first[c], k; i < end && !rc; i = k) {
		for (k = i + 1; k < end && r->patch_pfn[k] == r->patch_pfn[k - 1] + 1 &&
				r->patch_off[k] == r->patch_off[k - 1] + PAGE_SIZE; k++)
			;
		rc = img_pread_all(r->fd, dst + (r->patch_pfn[i] - first) * PAGE_SIZE,
				   (k - i) * PAGE_SIZE, r->patch_off[i]);
	}
	return rc;
}

int img_read_chunk(const struct img_reader *r, uint64_t c, void *dst)
{
	int rc;

	if (c >= r->n_chunks)
		return -EINVAL;
	if (r->enc[c].codec != IMG_CODEC_NONE)
		rc = img_read_frame(r, c, dst);
	else
		rc = img_read_mem(r, dst, IMG_CHUNK, IMG_MEM_OFFSET + c * IMG_CHUNK);
	if (!rc)
		rc = img_apply_patches(r, c, dst);
	if (rc)
		return rc;
	return img_chunk_hash(c * (IMG_CHUNK / PAGE_SIZE), dst, r->mask) == r->chunk_hash[c] ?
		       0 : -EBADMSG;
}

int img_read_chunk_frame(const struct img_reader *r, uint64_t c, void *dst, const void **frame)
{
	int rc = img_read_chunk(r, c, dst);

	*frame = NULL;
	if (!rc && r->enc[c].codec != IMG_CODEC_NONE)
		*frame = codec_thread_buffer(CODEC_BUF_FRAME, r->enc[c].stored_len); /* (as read) */
	return rc;
}

/* False when chunk @c is entirely a hole of the sparse file. */
static bool img_chunk_has_data(const struct img_reader *r, uint64_t c)
{
	off_t start = (off_t)(IMG_MEM_OFFSET + c * IMG_CHUNK);
	off_t data = lseek(r->fd, start, SEEK_DATA);

	/* Without SEEK_DATA support, assume data. */
	if (data < 0)
		return errno != ENXIO;
	return data < start + (off_t)IMG_CHUNK;
}

/* Chunk @c as this image stores it, without its parent's pages. */
static int img_load_own(const struct img_reader *r, uint64_t c, void *dst, bool *has_data)
{
	uint64_t first = c * (IMG_CHUNK / PAGE_SIZE), h = 0;

	*has_data = r->enc[c].codec != IMG_CODEC_NONE || img_chunk_has_data(r, c);
	if (*has_data)
		return img_read_chunk(r, c, dst);
	for (uint64_t i = 0; i < IMG_CHUNK / PAGE_SIZE; i++)
		if (!r->mask || img_bit_test(r->mask, first + i))
			h += img_page_hash(first + i, NULL);
	return h == r->chunk_hash[c] ? 0 : -EBADMSG;
}

/* A child's chunk: the parent's (checked up the chain), then each page the child holds
 * over it, a held zero page included. */
static int img_load_child(const struct img_reader *r, uint64_t c, uint8_t *dst, bool *has_data)
{
	static const uint8_t zero[PAGE_SIZE];
	const uint64_t first = c * IMG_PAGES_PER_CHUNK;
	bool own_data;
	uint8_t *own;
	int rc = img_load_chunk(r->parent, c, dst, has_data);

	if (rc)
		return rc;
	own = codec_thread_buffer(CODEC_BUF_CHUNK, IMG_CHUNK); /* the parent is done with it */
	if (!own)
		return -ENOMEM;
	rc = img_load_own(r, c, own, &own_data);
	for (uint64_t i = 0; !rc && i < IMG_PAGES_PER_CHUNK; i++) {
		const uint8_t *src = own_data ? own + i * PAGE_SIZE : zero;

		if (!img_bit_test(r->mask, first + i) || (!*has_data && img_page_is_zero(src)))
			continue;
		if (!*has_data) /* untouched so far: the rest must read as zero */
			memset(dst, 0, IMG_CHUNK);
		*has_data = true;
		memcpy(dst + i * PAGE_SIZE, src, PAGE_SIZE);
	}
	return rc;
}

int img_load_chunk(const struct img_reader *r, uint64_t c, void *dst, bool *has_data)
{
	if (c >= r->n_chunks)
		return -EINVAL;
	if (r->parent)
		return img_load_child(r, c, dst, has_data);
	return img_load_own(r, c, dst, has_data);
}

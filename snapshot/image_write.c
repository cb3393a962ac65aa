/*
 * image_write.c - a snapshot image written: created under a temporary name in a
 * directory held open, pages and chunks written by any thread in any order, sections,
 * then the table and trailer, fsync and the rename into place (image.c has the
 * layout; image_chunk.c each chunk's framing).
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
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define IMG_TMP_TRIES       8  /* names tried before a snapshot gives up */

/* Create the temporary in w->dir: exclusively and never through a symbolic link, so
 * whatever a guest put under that name is neither followed nor written. A name that
 * exists (64 random bits make it a near impossibility) is left alone for another. */
static int img_create_tmp(struct img_writer *w)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;

	w->fd = openat(w->dir, w->tmp_name, flags, IMG_FILE_MODE);
	for (int i = 1; w->fd < 0 && errno == EEXIST && i < IMG_TMP_TRIES; i++) {
		free(w->tmp_name);
		w->tmp_name = img_tmp_name_for(w->final_name);
		if (!w->tmp_name)
			return -ENOMEM;
		w->fd = openat(w->dir, w->tmp_name, flags, IMG_FILE_MODE);
	}
	if (w->fd < 0 || fstat(w->fd, &st) < 0)
		return -errno;
	/* Its identity, to tell it at img_finish from anything put under its name. */
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	return 0;
}

int img_create(const char *final_path, const struct img_header_info *info, struct img_writer **out)
{
	const char *base;
	int dir = img_dir_open(final_path, &base), rc;

	if (dir < 0)
		return dir;
	rc = img_create_at(dir, final_path, info, out);
	close(dir);
	return rc;
}

int img_create_at(int dir, const char *final_path, const struct img_header_info *info,
		  struct img_writer **out)
{
	const char *base = img_base(final_path);
	struct img_writer *w;
	uint8_t hdr[IMG_HDR_SIZE];
	int rc;

	if (!info->ram_size || info->ram_size % IMG_CHUNK || info->ram_size > IMG_MAX_RAM ||
	    codec_level_check(info->codec, info->level) || (info->flags & ~IMG_FLAGS_KNOWN))
		return -EINVAL;
	if (!base)
		return -EISDIR;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	cauto_init(&w->own_auto);
	w->autoc = &w->own_auto;
	w->fd = -1;
	w->dfd = -1;
	w->dir = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	w->info = *info;
	w->tail = IMG_MEM_OFFSET + info->ram_size;
	w->pre.cur = UINT64_MAX;
	w->n_chunks = info->ram_size / IMG_CHUNK;
	w->chunk_hash = calloc(w->n_chunks, sizeof(uint64_t));
	w->chunk_pages = calloc(w->n_chunks, sizeof(uint32_t));
	w->enc = calloc(w->n_chunks, sizeof(*w->enc));
	if (info->flags & IMG_FLAG_CHILD)
		w->held = calloc(info->ram_size / PAGE_SIZE / 8, 1);
	w->final_path = strdup(final_path);
	w->final_name = strdup(base);
	w->tmp_name = img_tmp_name_for(base);
	if (w->dir < 0) {
		rc = -errno;
		goto err;
	}
	if (!w->chunk_hash || !w->chunk_pages || !w->enc || !w->final_path || !w->final_name ||
	    !w->tmp_name || (!w->held && (info->flags & IMG_FLAG_CHILD))) {
		rc = -ENOMEM;
		goto err;
	}
	rc = img_create_tmp(w);
	if (rc)
		goto err;
	/* Marks the temporary as alive for img_sweep_stale; released when we die. A
	 * file system without flock still works, its stale temporaries just stay. */
	(void)flock(w->fd, LOCK_EX | LOCK_NB);
	w->dfd = img_direct_fd(w->fd);
	img_header_encode(hdr, info);
	rc = img_pwrite_all(w->fd, hdr, sizeof(hdr), 0);
	if (!rc && ftruncate(w->fd, (off_t)(IMG_MEM_OFFSET + info->ram_size)) < 0)
		rc = -errno;
	if (rc)
		goto err;
	*out = w;
	return 0;
err:
	img_abort(w);
	return rc;
}

/* A child holds page @pfn (its data, or a zero page over the parent's). */
void img_hold(struct img_writer *w, uint64_t pfn)
{
	if (w->held)
		__atomic_fetch_or(&w->held[pfn / 8], (uint8_t)(1u << (pfn % 8)), __ATOMIC_RELAXED);
}

/* @n data pages of chunk @c recorded, raw. */
void img_count_raw(struct img_writer *w, uint64_t c, uint64_t n)
{
	__atomic_fetch_add(&w->chunk_pages[c], (uint32_t)n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->stored, n * PAGE_SIZE, __ATOMIC_RELAXED);
}

/* A page recorded on its own into a framed chunk goes to its slot: its data (@ctx
 * set), or zeros where its last bytes there were not. */
static bool img_page_takes(struct img_writer *w, uint64_t pfn, const uint8_t *page,
			   const void *ctx)
{
	(void)page;
	return ctx || img_pre_stale(w, pfn);
}

int img_write_page(struct img_writer *w, uint64_t pfn, const void *data)
{
	if (pfn >= w->info.ram_size / PAGE_SIZE)
		return -EINVAL;
	__atomic_fetch_add(&w->chunk_hash[pfn / (IMG_CHUNK / PAGE_SIZE)], img_page_hash(pfn, data),
			   __ATOMIC_RELAXED);
	img_hold(w, pfn);
	if (img_pre_framed(w, pfn / IMG_PAGES_PER_CHUNK)) {
		if (data)
			__atomic_fetch_add(&w->chunk_pages[pfn / IMG_PAGES_PER_CHUNK], 1,
					   __ATOMIC_RELAXED);
		return img_patch_runs(w, pfn, data ? data : img_zero_page(), 1, img_page_takes,
				      data);
	}
	if (!data && img_pre_stale(w, pfn))
		return img_pwrite_all(w->fd, img_zero_page(), PAGE_SIZE,
				      IMG_MEM_OFFSET + pfn * PAGE_SIZE);
	if (!data)
		return 0;
	img_count_raw(w, pfn / IMG_PAGES_PER_CHUNK, 1);
	return img_pwrite_all(w->fd, data, PAGE_SIZE, IMG_MEM_OFFSET + pfn * PAGE_SIZE);
}

/* Write page-aligned memory to the image: O_DIRECT where it works, buffered where
 * the file system (or an unaligned buffer) makes it refuse. */
/* Shorter writes go through the page cache: a synchronous O_DIRECT write per scattered
 * page (an incremental snapshot's, a sparse chunk's) cost ~0.1 ms each here, where
 * buffered ones are merged and written back together by the final fsync. */
#define IMG_DIRECT_MIN (64 * 1024)

int img_write_mem(struct img_writer *w, const void *data, size_t len, uint64_t off)
{
	int rc;

	if (w->dfd >= 0 && len >= IMG_DIRECT_MIN && (uintptr_t)data % PAGE_SIZE == 0) {
		/* The disk's rate: only where the disk takes the bytes (not the cache). */
		uint64_t t0 = mono_ns();

		cauto_io_begin(w->autoc);
		rc = img_pwrite_all(w->dfd, data, len, off);
		cauto_io_end(w->autoc, rc ? 0 : len, mono_ns() - t0);
		if (rc != -EINVAL)
			return rc;
		close(w->dfd); /* refused: buffered from now on */
		w->dfd = -1;
	}
	return img_pwrite_all(w->fd, data, len, off);
}

int img_write_runs(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n,
		   img_take_fn take, const void *ctx)
{
	const uint8_t *d = data;
	uint64_t run = 0;
	int rc = 0;

	for (uint64_t i = 0; i <= n && !rc; i++) {
		if (i < n && take(w, pfn + i, d + i * PAGE_SIZE, ctx))
			continue;
		if (i > run) /* pages [run, i) are one run to write */
			rc = img_write_mem(w, d + run * PAGE_SIZE, (i - run) * PAGE_SIZE,
					   IMG_MEM_OFFSET + (pfn + run) * PAGE_SIZE);
		run = i + 1;
	}
	return rc;
}

int img_write_pages(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n)
{
	const uint8_t *d = data;

	if (pfn >= w->info.ram_size / PAGE_SIZE || n > w->info.ram_size / PAGE_SIZE - pfn)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		__atomic_fetch_add(&w->chunk_hash[(pfn + i) / (IMG_CHUNK / PAGE_SIZE)],
				   img_page_hash(pfn + i, d + i * PAGE_SIZE), __ATOMIC_RELAXED);
		img_count_raw(w, (pfn + i) / IMG_PAGES_PER_CHUNK, 1);
		img_hold(w, pfn + i);
	}
	return img_write_mem(w, data, n * PAGE_SIZE, IMG_MEM_OFFSET + pfn * PAGE_SIZE);
}

#define IMG_FINISH_SECTIONS 4 /* checksums, encoding, parent, page mask */

static int img_add(struct img_writer *w, uint32_t type, const void *data, size_t len, int reserve)
{
	void *copy;

	/* (an open stream keeps its place in the table: img_stream_begin) */
	if (w->n_sections + w->stream.open >= IMG_MAX_SECTIONS - reserve ||
	    len > img_section_max(type, w->info.ram_size))
		return -E2BIG;
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, data, len);
	w->sec[w->n_sections].type = type;
	w->sec[w->n_sections].data = copy;
	w->sec[w->n_sections].len = len;
	w->n_sections++;
	return 0;
}

int img_add_section(struct img_writer *w, uint32_t type, const void *data, size_t len)
{
	return img_add(w, type, data, len, IMG_FINISH_SECTIONS);
}

void img_sections_sink(struct img_writer *w, img_record_sink *fn, void *ctx)
{
	w->sink = fn;
	w->sink_ctx = ctx;
}

/* Where sections go: after the memory, the patch slots and those streamed there. */
static uint64_t img_sections_start(const struct img_writer *w)
{
	return (__atomic_load_n(&w->tail, __ATOMIC_ACQUIRE) + 7) & ~7ULL;
}

int img_stream_begin(struct img_writer *w, uint32_t type)
{
	if (w->stream.open)
		return -EBUSY;
	if (w->fd < 0 && !w->sink)
		return -ENOTSUP;
	if (w->n_sections >= IMG_MAX_SECTIONS - IMG_FINISH_SECTIONS)
		return -E2BIG;
	if (w->fd >= 0) {
		w->stream.xxh = XXH3_createState();
		if (!w->stream.xxh)
			return -ENOMEM;
		XXH3_64bits_reset(w->stream.xxh);
	}
	w->stream.open = true;
	w->stream.type = type;
	w->stream.start = img_sections_start(w);
	w->stream.len = 0;
	return 0;
}

int img_stream_record(struct img_writer *w, const void *head, size_t head_len,
		      const void *data, size_t len)
{
	uint64_t at = w->stream.start + w->stream.len;
	int rc;

	if (!w->stream.open)
		return -EINVAL;
	if (head_len + len > img_section_max(w->stream.type, w->info.ram_size) - w->stream.len)
		return -E2BIG;
	if (w->fd < 0)
		rc = w->sink(w->sink_ctx, w->stream.type, head, head_len, data, len);
	else if (!(rc = img_pwrite_all(w->fd, head, head_len, at)))
		rc = img_pwrite_all(w->fd, data, len, at + head_len);
	if (!rc && w->stream.xxh && (XXH3_64bits_update(w->stream.xxh, head, head_len) ||
				     XXH3_64bits_update(w->stream.xxh, data, len)))
		rc = -EINVAL;
	if (!rc)
		w->stream.len += head_len + len;
	return rc;
}

int img_stream_end(struct img_writer *w)
{
	int i = w->n_sections;

	if (!w->stream.open)
		return -EINVAL;
	w->stream.open = false;
	if (w->fd >= 0) { /* (img_stream_begin kept a place in the table for it) */
		w->sec[i].type = w->stream.type;
		w->sec[i].data = NULL;
		w->sec[i].len = w->stream.len;
		w->sec[i].in_file = true;
		w->sec[i].off = w->stream.start;
		w->sec[i].hash = XXH3_64bits_digest(w->stream.xxh);
		w->n_sections++;
		__atomic_store_n(&w->tail, (w->stream.start + w->stream.len + 7) & ~7ULL,
				 __ATOMIC_RELEASE);
	}
	XXH3_freeState(w->stream.xxh);
	w->stream.xxh = NULL;
	return 0;
}

/* Sections, then the table, then the trailer, all after the memory (the streamed ones
 * are there already, first). */
static int img_write_tail(struct img_writer *w)
{
	uint64_t off = img_sections_start(w);
	uint8_t table[IMG_MAX_SECTIONS * IMG_TABLE_ENT], trailer[IMG_TRAILER];
	uint64_t h;
	int rc;

	if (w->stream.open)
		return -EINVAL; /* a section half written */
	memset(table, 0, sizeof(table));
	for (int i = 0; i < w->n_sections; i++) {
		uint8_t *e = table + i * IMG_TABLE_ENT;
		bool in_file = w->sec[i].in_file;

		img_put32(e, w->sec[i].type);
		img_put64(e + 8, in_file ? w->sec[i].off : off);
		img_put64(e + 16, w->sec[i].len);
		img_put64(e + 24, in_file ? w->sec[i].hash :
					    XXH3_64bits(w->sec[i].data, w->sec[i].len));
		if (in_file)
			continue;
		rc = img_pwrite_all(w->fd, w->sec[i].data, w->sec[i].len, off);
		if (rc)
			return rc;
		off += (w->sec[i].len + 7) & ~7ULL;
	}
	rc = img_pwrite_all(w->fd, table, (size_t)w->n_sections * IMG_TABLE_ENT, off);
	if (rc)
		return rc;
	memset(trailer, 0, sizeof(trailer));
	memcpy(trailer, IMG_END_MAGIC, 8);
	img_put64(trailer + 8, off);
	img_put32(trailer + 16, (uint32_t)w->n_sections);
	img_put32(trailer + 20, IMG_VERSION);
	img_put64(trailer + 24, off + (uint64_t)w->n_sections * IMG_TABLE_ENT + IMG_TRAILER);
	img_put64(trailer + 32, w->info.ram_size);
	rc = img_table_hash(table, w->n_sections, trailer, &h);
	if (rc)
		return rc;
	img_put64(trailer + 40, h);
	return img_pwrite_all(w->fd, trailer, sizeof(trailer),
			  off + (uint64_t)w->n_sections * IMG_TABLE_ENT);
}

void img_writer_bytes(const struct img_writer *w, uint64_t *raw, uint64_t *stored)
{
	uint64_t pages = 0;

	for (uint64_t c = 0; c < w->n_chunks; c++)
		pages += __atomic_load_n(&w->chunk_pages[c], __ATOMIC_RELAXED);
	*raw = pages * PAGE_SIZE;
	*stored = __atomic_load_n(&w->stored, __ATOMIC_RELAXED);
}

void img_writer_mix(const struct img_writer *w, uint64_t chunks[IMG_CODEC_AUTO])
{
	memset(chunks, 0, IMG_CODEC_AUTO * sizeof(chunks[0]));
	for (uint64_t c = 0; c < w->n_chunks; c++)
		if (__atomic_load_n(&w->chunk_pages[c], __ATOMIC_RELAXED))
			chunks[(w->enc[c].codec & ~IMG_ENC_PACKED) % IMG_CODEC_AUTO]++;
}

void img_writer_auto(struct img_writer *w, struct codec_auto *a)
{
	w->autoc = a ? a : &w->own_auto;
}

int img_set_parent(struct img_writer *w, const char *recorded, uint64_t identity)
{
	if (!w->held || !recorded[0] || strlen(recorded) >= IMG_PATH_MAX)
		return -EINVAL;
	free(w->parent_path);
	w->parent_path = strdup(recorded);
	w->parent_identity = identity;
	return w->parent_path ? 0 : -ENOMEM;
}

/* A child's parent and page mask sections. */
static int img_add_lineage(struct img_writer *w)
{
	size_t len;
	uint8_t *buf;
	int rc;

	if (!w->held)
		return 0;
	if (!w->parent_path)
		return -EINVAL; /* a child without a parent could never be restored */
	len = 8 + strlen(w->parent_path);
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	img_put64(buf, w->parent_identity);
	memcpy(buf + 8, w->parent_path, len - 8);
	rc = img_add(w, IMG_SEC_PARENT, buf, len, 0);
	free(buf);
	if (!rc)
		rc = img_add(w, IMG_SEC_PAGEMASK, w->held, w->info.ram_size / PAGE_SIZE / 8, 0);
	return rc;
}

/* The encoding section: the codec asked for, then each chunk's encoding. */
static int img_add_encoding(struct img_writer *w)
{
	size_t len = IMG_ENC_HEAD + w->n_chunks * IMG_ENC_ENT;
	uint8_t *buf = calloc(1, len);
	int rc;

	if (!buf)
		return -ENOMEM;
	img_put32(buf, (uint32_t)w->info.codec);
	img_put32(buf + 4, (uint32_t)w->info.level);
	for (uint64_t c = 0; c < w->n_chunks; c++) {
		uint8_t *e = buf + IMG_ENC_HEAD + c * IMG_ENC_ENT;
		uint32_t pages = w->chunk_pages[c];

		e[0] = w->enc[c].codec;
		e[2] = (uint8_t)pages;
		e[3] = (uint8_t)(pages >> 8);
		img_put32(e + 4, w->enc[c].stored_len);
		img_put64(e + 8, w->enc[c].stored_hash);
	}
	rc = img_add(w, IMG_SEC_ENCODING, buf, len, 0);
	free(buf);
	return rc;
}

/* Whether @name in w->dir is this writer's file itself (not a link, not another). */
static bool img_name_is_ours(const struct img_writer *w, const char *name)
{
	struct stat st;

	return fstatat(w->dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	       st.st_dev == w->dev && st.st_ino == w->ino;
}

/* The patches section, and the header again with the flag that says it is there. */
static int img_add_patches(struct img_writer *w)
{
	uint8_t *buf = NULL, hdr[IMG_HDR_SIZE];
	size_t len = 0;
	int rc = img_patch_section(w, &buf, &len);

	if (rc || !buf)
		return rc;
	rc = img_add(w, IMG_SEC_PATCHES, buf, len, 0);
	free(buf);
	if (rc)
		return rc;
	w->info.flags |= IMG_FLAG_PATCHED;
	img_header_encode(hdr, &w->info);
	return img_pwrite_all(w->fd, hdr, sizeof(hdr), 0);
}

void img_replaces(struct img_writer *w, dev_t dev, ino_t ino)
{
	w->replace_only = true;
	w->replace_dev = dev;
	w->replace_ino = ino;
}

/* img_replaces: the final name still holds the file that was read. */
static bool img_replace_ok(const struct img_writer *w)
{
	struct stat st;

	if (!w->replace_only)
		return true;
	return fstatat(w->dir, w->final_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_dev == w->replace_dev && st.st_ino == w->replace_ino;
}

int img_finish(struct img_writer *w)
{
	int rc;

	/* A chunk round 0 gathered and never stored: its pages are nowhere (a caller that
	 * skipped img_precopy_first_done). */
	rc = w->pre.gathering && w->pre.cur != UINT64_MAX ? -EINVAL : 0;
	if (!rc)
		rc = img_add(w, IMG_SEC_CHUNKS, w->chunk_hash, w->n_chunks * sizeof(uint64_t), 0);
	if (!rc)
		rc = img_add_encoding(w);
	if (!rc)
		rc = img_add_patches(w);
	if (!rc)
		rc = img_add_lineage(w);
	if (!rc)
		rc = img_write_tail(w);
	if (!rc && fsync(w->fd) < 0)
		rc = -errno;
	if (w->dfd >= 0)
		close(w->dfd);
	w->dfd = -1;
	/* w->fd stays open until the name is checked: while it is, no other file can
	 * take the temporary's inode number. */
	if (!rc && (!img_name_is_ours(w, w->tmp_name) || !img_replace_ok(w)))
		rc = -ESTALE;
	if (!rc && renameat(w->dir, w->tmp_name, w->dir, w->final_name) < 0)
		rc = -errno;
	if (!rc && !img_name_is_ours(w, w->final_name)) {
		/* Swapped between the check and the rename: what got the final name is not
		 * this image. Take it away again and report; never claim it. */
		unlinkat(w->dir, w->final_name, 0);
		rc = -ESTALE;
	}
	if (!rc && close(w->fd) < 0)
		rc = -errno;
	if (!rc)
		w->fd = -1;
	if (rc) {
		img_abort(w);
		return rc;
	}
	rc = fsync(w->dir) < 0 ? -errno : 0;
	/* Here, not in img_create: that runs while the guest is paused, and a directory
	 * can be long to read. */
	img_sweep_stale(w);
	free(w->tmp_name);
	w->tmp_name = NULL;
	img_abort(w); /* frees what is left; the temporary name no longer exists */
	return rc;
}

void img_abort(struct img_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp_name && w->dir >= 0)
		unlinkat(w->dir, w->tmp_name, 0);
	w->fd = -1;
	img_forget(w);
}

void img_forget(struct img_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->dfd >= 0)
		close(w->dfd);
	for (int i = 0; i < w->n_sections; i++)
		free(w->sec[i].data);
	XXH3_freeState(w->stream.xxh);
	free(w->chunk_hash);
	free(w->chunk_pages);
	free(w->enc);
	free(w->held);
	free(w->parent_path);
	free(w->pre_hash);
	free(w->pre_bits);
	free(w->pre.buf);
	free(w->pre.scratch);
	free(w->pre.chunk);
	free(w->pre.slot);
	cauto_fini(&w->own_auto);
	if (w->dir >= 0)
		close(w->dir);
	free(w->final_path);
	free(w->final_name);
	free(w->tmp_name);
	free(w);
}

int img_sections_open(uint64_t ram_size, struct img_writer **out)
{
	struct img_writer *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	cauto_init(&w->own_auto);
	w->autoc = &w->own_auto;
	w->fd = w->dfd = w->dir = -1;
	w->info.ram_size = ram_size;
	*out = w;
	return 0;
}

int img_section_get(const struct img_writer *w, int i, uint32_t *type, const void **data,
		    size_t *len)
{
	if (i < 0 || i >= w->n_sections)
		return -ENOENT;
	*type = w->sec[i].type;
	*data = w->sec[i].data;
	*len = w->sec[i].len;
	return 0;
}

/*
 * image.c - write and validate snapshot images.
 *
 * Layout (see docs/image-format.md):
 *
 *   0                    header: magic, version, page size, RAM size, policy, flags,
 *                        creation time, memory offset, chunk size, header checksum
 *   IMG_MEM_OFFSET       guest memory, page p at IMG_MEM_OFFSET + p * 4 KiB; zero pages
 *                        are never written, so they stay holes of a sparse file
 *   after memory         sections: typed payloads (vCPUs, process, chunk checksums...)
 *   end - table - 48     section table: type, offset, length, checksum of each
 *   end - 48             trailer: magic, table offset, section count, file size, RAM
 *                        size, checksum of table + trailer. Written last: an image
 *                        without a valid trailer is incomplete.
 *
 * A chunk's checksum is the sum (mod 2^64) of XXH3-64 of each of its pages seeded with
 * the page number, so pages can be written in any order, by any thread, and a page
 * moved to another place does not checksum the same. The file is built under a
 * temporary name and renamed into place only when complete and fsynced. The writer
 * holds an flock on its temporary, so a later writer, once it has renamed its own
 * image into place, can tell one left by a process that was killed mid-snapshot (no
 * lock, pid gone) and remove it.
 *
 * Version 2 may store a chunk compressed (zstd or LZ4, codec.c): one frame at the
 * chunk's own place, padded to whole pages, the rest of the chunk's 2 MiB a hole. The
 * layout stays the same, so pages stay where their address puts them, any chunk can
 * be written by any thread in any order, and a chunk that does not shrink is stored
 * raw as in version 1. The encoding section says, per chunk, raw or which codec, the
 * frame's length and the XXH3-64 of its bytes: a reader checks the frame before it
 * decompresses it, and the pages after, against the same chunk checksum as a raw
 * chunk's. Neither checksum authenticates anything: an image is data from anyone.
 *
 * An incremental image (a child) holds only the pages written since its parent's
 * instant: a bit per page in its page mask says which (a written zero page is held,
 * as a hole, so it never lets the parent's stale page through), its chunk checksums
 * cover those pages alone, and its parent section names the parent by path and by
 * identity (a hash of the parent's header and table checksums, which cover its chunk
 * checksums). Opening a child opens the chain up to a full image, checking each link;
 * reading a chunk reads the parent's and lays the child's pages over it.
 *
 * Every name is looked up once, in a directory held open: the temporary is created
 * there with O_EXCL | O_NOFOLLOW, written through its descriptors and renamed there,
 * so a guest that races symbolic links in a directory it may write can make a
 * snapshot fail but never redirect a write. A reader opens an image (and each parent)
 * as O_PATH, checks it is a regular file, and reopens that very file.
 *
 * Memory goes through a second descriptor, the temporary reopened through
 * /proc/self/fd with O_DIRECT set, where the file system takes it (runs of 64 KiB and
 * more): a snapshot's pages are written once and never read back by this process,
 * so the page cache would only add a copy and a flush that competes with the guest
 * for memory. A file system that refuses O_DIRECT (tmpfs) gets buffered writes. One
 * fsync at the end makes either durable.
 */
#include "image.h"

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

#define IMG_MAGIC     "CCVMIMG"   /* 8 bytes with the NUL */
#define IMG_END_MAGIC "CCVMEND"
#define IMG_HDR_SIZE  64
#define IMG_TRAILER   48
#define IMG_TABLE_ENT 32
#define IMG_MAX_RAM   (1ULL << 40)
#define IMG_ENC_HEAD  16  /* encoding section: u32 codec, i32 level, 8 reserved */
#define IMG_ENC_ENT   16  /* then per chunk: u8 codec, u8 0, u16 pages, u32 len, u64 hash */
#define IMG_PAGES_PER_CHUNK (IMG_CHUNK / PAGE_SIZE)

struct img_writer {
	int fd;
	int dfd;               /* the same file opened O_DIRECT for memory, or -1 */
	int dir;               /* the directory it is written in: every name is in it */
	dev_t dev;             /* the temporary's identity, to tell it from whatever */
	ino_t ino;             /* else gets under its name */
	char *final_path;      /* as given, for messages */
	char *final_name;      /* its last component, in dir */
	char *tmp_name;        /* the temporary, in dir */
	struct img_header_info info;
	uint64_t n_chunks;
	uint64_t *chunk_hash;  /* summed atomically */
	uint32_t *chunk_pages; /* data pages per chunk, counted atomically */
	struct img_chunk_enc *enc; /* set by the one thread that writes the chunk */
	uint64_t stored;       /* bytes the data takes in the file, added atomically */
	uint8_t *held;         /* a child: a bit per page it holds, set atomically */
	char *parent_path;     /* a child: its parent, as recorded */
	uint64_t parent_identity;
	int n_sections;
	struct {
		uint32_t type;
		void *data;
		size_t len;
	} sec[IMG_MAX_SECTIONS];
};

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static uint64_t page_hash(uint64_t pfn, const void *page)
{
	static const uint8_t zero[PAGE_SIZE];

	return XXH3_64bits_withSeed(page ? page : zero, PAGE_SIZE, pfn);
}

static bool bit_test(const uint8_t *bits, uint64_t i)
{
	return bits[i / 8] >> (i % 8) & 1;
}

/* The checksum of a chunk: of every page, or of the pages set in @mask (a child's,
 * indexed by page number) when it is given. */
static uint64_t img_chunk_hash(uint64_t first_pfn, const void *chunk, const uint8_t *mask)
{
	const uint8_t *p = chunk;
	uint64_t h = 0;

	for (uint64_t i = 0; i < IMG_CHUNK / PAGE_SIZE; i++)
		if (!mask || bit_test(mask, first_pfn + i))
			h += page_hash(first_pfn + i, p + i * PAGE_SIZE);
	return h;
}

static void header_encode(uint8_t hdr[IMG_HDR_SIZE], const struct img_header_info *info)
{
	memset(hdr, 0, IMG_HDR_SIZE);
	memcpy(hdr, IMG_MAGIC, 8);
	put32(hdr + 8, IMG_VERSION);
	put32(hdr + 12, (uint32_t)PAGE_SIZE);
	put64(hdr + 16, info->ram_size);
	put32(hdr + 24, info->policy);
	put32(hdr + 28, info->flags);
	put64(hdr + 32, info->created_ns);
	put64(hdr + 40, IMG_MEM_OFFSET);
	put64(hdr + 48, IMG_CHUNK);
	put64(hdr + 56, XXH3_64bits(hdr, 56));
}

#define IMG_FILE_MODE 0600 /* images are their user's alone, whatever the umask */

static char *tmp_name_for(const char *final_name)
{
	char *out = NULL;

	if (asprintf(&out, ".%s.tmp.%d", final_name, (int)getpid()) < 0)
		out = NULL;
	return out;
}

/* @name is "." BASE ".tmp." PID with PID all digits; returns the pid or 0. */
static pid_t tmp_name_pid(const char *name, const char *base)
{
	size_t blen = strlen(base);
	long pid = 0;
	const char *d;

	if (name[0] != '.' || strncmp(name + 1, base, blen) || strncmp(name + 1 + blen, ".tmp.", 5))
		return 0;
	d = name + 1 + blen + 5;
	if (!*d || strlen(d) > 9)
		return 0;
	for (; *d; d++) {
		if (*d < '0' || *d > '9')
			return 0;
		pid = pid * 10 + (*d - '0');
	}
	return (pid_t)pid;
}

/* Remove @name in @dfd if it is a regular file nobody holds the writer's lock on. */
static void img_remove_if_unlocked(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
		unlinkat(dfd, name, 0);
	close(fd);
}

/*
 * Temporaries of this image's name left by writers that died (kill -9, a crash): each
 * is as large as the image and would stay forever, and enough of them fill the disk the
 * next snapshot needs. One is stale when its pid no longer exists and nobody holds its
 * lock; the lock keeps a live writer's file even when its pid is in another pid
 * namespace. Best effort: a directory that cannot be read is left as it is.
 */
static void img_sweep_stale(const struct img_writer *w)
{
	int fd = openat(w->dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		pid_t pid = tmp_name_pid(de->d_name, w->final_name);

		if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		img_remove_if_unlocked(dirfd(d), de->d_name);
	}
	closedir(d);
}

int img_reopen(int fd, int flags)
{
	char link[IMG_PROC_FD_LEN];
	struct stat a, b;
	int nfd;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	nfd = open(link, flags | O_CLOEXEC);
	if (nfd < 0)
		return -errno;
	if (fstat(fd, &a) < 0 || fstat(nfd, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(nfd);
		return -ESTALE;
	}
	return nfd;
}

int img_append_open(int dir, const char *name, mode_t mode)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		int pfd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd;
		struct stat st;

		if (pfd >= 0) {
			fd = fstat(pfd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -EINVAL :
			     img_reopen(pfd, O_WRONLY | O_APPEND | O_NOCTTY);
			close(pfd);
			return fd;
		}
		if (errno != ENOENT)
			return -errno;
		fd = openat(dir, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    mode);
		if (fd >= 0 || errno != EEXIST)
			return fd < 0 ? -errno : fd;
	}
	return -EAGAIN; /* made and removed under us twice: someone races */
}

/* The descriptor for memory: the temporary again, as its own open file, with O_DIRECT
 * set where the file system takes it (-1 where it does not: buffered writes). */
static int img_direct_fd(int fd)
{
	int dfd = img_reopen(fd, O_WRONLY);

	if (dfd >= 0 && fcntl(dfd, F_SETFL, O_DIRECT) < 0) {
		close(dfd);
		dfd = -1;
	}
	return dfd < 0 ? -1 : dfd;
}

/* The last component of @path, or NULL when it names no file in a directory ("",
 * ".", "..", a trailing '/'). */
static const char *img_base(const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;

	return !*base || !strcmp(base, ".") || !strcmp(base, "..") ? NULL : base;
}

/* Open the directory part of @path (relative to @at) with @flags; *base is set to its
 * last component, which must name something in it (not "", "." or ".."). */
static int img_dir_at(int at, const char *path, int flags, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd;

	*base = img_base(path);
	if (!*base)
		return -EISDIR;
	if (!slash)
		dir = strdup(".");
	else
		dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	fd = openat(at, dir, flags | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	return fd < 0 ? -errno : fd;
}

/* Deeper than this, a directory is not taken to be beneath anything. */
#define IMG_MAX_DEPTH 4096

bool img_dir_beneath(int dir, dev_t dev, ino_t ino)
{
	int cur = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	bool found = false;

	for (int depth = 0; cur >= 0 && depth < IMG_MAX_DEPTH && !found; depth++) {
		struct stat here, up;
		int next;

		if (fstat(cur, &here) < 0)
			break;
		found = here.st_dev == dev && here.st_ino == ino;
		next = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = next;
		if (cur < 0 || fstat(cur, &up) < 0 || (up.st_dev == here.st_dev && up.st_ino == here.st_ino))
			break; /* the root */
	}
	if (cur >= 0)
		close(cur);
	return found;
}

int img_dir_open(const char *path, const char **base)
{
	return img_dir_at(AT_FDCWD, path, O_RDONLY, base);
}

/* Create the temporary in w->dir: exclusively and never through a symbolic link, so
 * whatever a guest put under that name is neither followed nor written. */
static int img_create_tmp(struct img_writer *w)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;

	w->fd = openat(w->dir, w->tmp_name, flags, IMG_FILE_MODE);
	/* The name carries this process's pid, so one that exists is a leftover of a
	 * process killed mid-snapshot that had the same pid (or a guest's plant): it must
	 * not fail this one. unlinkat removes the entry, never what a link points to. */
	if (w->fd < 0 && errno == EEXIST && unlinkat(w->dir, w->tmp_name, 0) == 0)
		w->fd = openat(w->dir, w->tmp_name, flags, IMG_FILE_MODE);
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
	w->fd = -1;
	w->dfd = -1;
	w->dir = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	w->info = *info;
	w->n_chunks = info->ram_size / IMG_CHUNK;
	w->chunk_hash = calloc(w->n_chunks, sizeof(uint64_t));
	w->chunk_pages = calloc(w->n_chunks, sizeof(uint32_t));
	w->enc = calloc(w->n_chunks, sizeof(*w->enc));
	if (info->flags & IMG_FLAG_CHILD)
		w->held = calloc(info->ram_size / PAGE_SIZE / 8, 1);
	w->final_path = strdup(final_path);
	w->final_name = strdup(base);
	w->tmp_name = tmp_name_for(base);
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
	header_encode(hdr, info);
	rc = pwrite_all(w->fd, hdr, sizeof(hdr), 0);
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
static void img_hold(struct img_writer *w, uint64_t pfn)
{
	if (w->held)
		__atomic_fetch_or(&w->held[pfn / 8], (uint8_t)(1u << (pfn % 8)), __ATOMIC_RELAXED);
}

/* @n data pages of chunk @c recorded, raw. */
static void img_count_raw(struct img_writer *w, uint64_t c, uint64_t n)
{
	__atomic_fetch_add(&w->chunk_pages[c], (uint32_t)n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->stored, n * PAGE_SIZE, __ATOMIC_RELAXED);
}

int img_write_page(struct img_writer *w, uint64_t pfn, const void *data)
{
	if (pfn >= w->info.ram_size / PAGE_SIZE)
		return -EINVAL;
	__atomic_fetch_add(&w->chunk_hash[pfn / (IMG_CHUNK / PAGE_SIZE)], page_hash(pfn, data),
			   __ATOMIC_RELAXED);
	img_hold(w, pfn);
	if (!data)
		return 0;
	img_count_raw(w, pfn / IMG_PAGES_PER_CHUNK, 1);
	return pwrite_all(w->fd, data, PAGE_SIZE, IMG_MEM_OFFSET + pfn * PAGE_SIZE);
}

/* Write page-aligned memory to the image: O_DIRECT where it works, buffered where
 * the file system (or an unaligned buffer) makes it refuse. */
/* Shorter writes go through the page cache: a synchronous O_DIRECT write per scattered
 * page (an incremental snapshot's, a sparse chunk's) cost ~0.1 ms each here, where
 * buffered ones are merged and written back together by the final fsync. */
#define IMG_DIRECT_MIN (64 * 1024)

static int img_write_mem(struct img_writer *w, const void *data, size_t len, uint64_t off)
{
	int rc;

	if (w->dfd >= 0 && len >= IMG_DIRECT_MIN && (uintptr_t)data % PAGE_SIZE == 0) {
		rc = pwrite_all(w->dfd, data, len, off);
		if (rc != -EINVAL)
			return rc;
		close(w->dfd); /* refused: buffered from now on */
		w->dfd = -1;
	}
	return pwrite_all(w->fd, data, len, off);
}

int img_write_pages(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n)
{
	const uint8_t *d = data;

	if (pfn >= w->info.ram_size / PAGE_SIZE || n > w->info.ram_size / PAGE_SIZE - pfn)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		__atomic_fetch_add(&w->chunk_hash[(pfn + i) / (IMG_CHUNK / PAGE_SIZE)],
				   page_hash(pfn + i, d + i * PAGE_SIZE), __ATOMIC_RELAXED);
		img_count_raw(w, (pfn + i) / IMG_PAGES_PER_CHUNK, 1);
		img_hold(w, pfn + i);
	}
	return img_write_mem(w, data, n * PAGE_SIZE, IMG_MEM_OFFSET + pfn * PAGE_SIZE);
}

bool img_page_is_zero(const void *p)
{
	static const uint8_t zero[PAGE_SIZE];

	return memcmp(p, zero, PAGE_SIZE) == 0;
}

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
		h += page_hash(first + i, what[i] == IMG_PAGE_DATA ? d + i * PAGE_SIZE : NULL);
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

/* A child's chunk that holds some pages but not all: packed, and compressed when the
 * image has a codec and that saves a page. 1 when it is to be stored raw. */
static int img_chunk_pack(struct img_writer *w, uint64_t c, const uint8_t *data,
			  const uint8_t *what, uint64_t pages, uint8_t *scratch)
{
	uint8_t *packed = w->info.codec == IMG_CODEC_NONE ? scratch :
			  codec_thread_buffer(CODEC_BUF_PACKED, IMG_CHUNK);
	uint64_t k;
	ssize_t n;

	if (!packed)
		return -ENOMEM;
	k = img_pack(data, what, packed);
	if (k == IMG_PAGES_PER_CHUNK)
		return 1; /* all of it: as a full image's chunk */
	if (w->info.codec == IMG_CODEC_NONE)
		return img_chunk_store(w, c, scratch, k * PAGE_SIZE, IMG_ENC_PACKED, pages);
	n = codec_compress(w->info.codec, w->info.level, packed, k * PAGE_SIZE, scratch,
			   (k - 1) * PAGE_SIZE);
	if (n == -ENOSPC || n == 0) { /* packed alone, then */
		memcpy(scratch, packed, k * PAGE_SIZE);
		return img_chunk_store(w, c, scratch, k * PAGE_SIZE, IMG_ENC_PACKED, pages);
	}
	if (n < 0)
		return (int)n;
	return img_chunk_store(w, c, scratch, (uint64_t)n,
			       (uint8_t)(IMG_ENC_PACKED | w->info.codec), pages);
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

/*
 * Chunk @c as one frame: compressed, when the image has a codec, a sample says it is
 * worth it and the frame saves at least one page on disk; or a child's held pages packed, without one. Never when a
 * page of the chunk was recorded on its own. Returns 1 when the chunk is to be stored
 * raw instead, 0 when written, or -errno.
 */
static int img_chunk_compress(struct img_writer *w, uint64_t c, const void *data,
			      const uint8_t *what, uint64_t pages, uint8_t *scratch)
{
	ssize_t n;

	if (!pages || !scratch)
		return 1;
	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		if (what[i] == IMG_PAGE_DONE)
			return 1;
	if (w->held) {
		int rc = img_chunk_pack(w, c, data, what, pages, scratch);

		if (rc != 1 || w->info.codec == IMG_CODEC_NONE)
			return rc; /* else it holds all: compressed as a full image's chunk */
	}
	if (w->info.codec == IMG_CODEC_NONE || !img_worth_compressing(w, data, scratch))
		return 1;
	n = codec_compress(w->info.codec, w->info.level, data, IMG_CHUNK, scratch,
			   (pages - 1) * PAGE_SIZE);
	if (n == -ENOSPC || n == 0)
		return 1;
	if (n < 0)
		return (int)n;
	return img_chunk_store(w, c, scratch, (uint64_t)n, (uint8_t)w->info.codec, pages);
}

/* The data pages of chunk @c as @what says, or -EINVAL when a frame cannot hold it. */
static int64_t img_frame_pages(const struct img_writer *w, uint64_t c, uint64_t len,
			       const uint8_t *what)
{
	uint64_t pages = 0;

	if (c >= w->n_chunks || w->held || w->info.codec == IMG_CODEC_NONE)
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

int img_chunk_write(struct img_writer *w, uint64_t c, const void *data, const uint8_t *what,
		    void *scratch)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;
	const uint8_t *d = data;
	uint64_t run = 0, pages = 0;
	int rc = 0;

	if (c >= w->n_chunks)
		return -EINVAL;
	for (uint64_t i = 0; i < per; i++)
		pages += what[i] == IMG_PAGE_DATA;
	rc = img_chunk_compress(w, c, data, what, pages, scratch);
	if (rc <= 0)
		return rc;
	rc = 0;
	img_count_raw(w, c, pages);
	for (uint64_t i = 0; i <= per && !rc; i++) {
		if (i < per && what[i] == IMG_PAGE_DATA)
			continue;
		if (i > run) /* pages [run, i) are one run of data */
			rc = img_write_mem(w, d + run * PAGE_SIZE, (i - run) * PAGE_SIZE,
					   IMG_MEM_OFFSET + (first + run) * PAGE_SIZE);
		run = i + 1;
	}
	return rc;
}

#define IMG_FINISH_SECTIONS 4 /* checksums, encoding, parent, page mask */

/* Add a section, leaving @reserve slots free. */
/* The longest a section of @type may be in an image of @ram_size bytes of RAM: the
 * tables derived from the RAM size exactly, the others their own bound. */
static uint64_t img_section_max(uint32_t type, uint64_t ram_size)
{
	uint64_t chunks = ram_size / IMG_CHUNK;

	switch (type) {
	case IMG_SEC_VCPUS: return IMG_MAX_VCPUS_LEN;
	case IMG_SEC_PROCESS: return IMG_MAX_PROCESS_LEN;
	case IMG_SEC_CHUNKS: return chunks * sizeof(uint64_t);
	case IMG_SEC_ENCODING: return IMG_ENC_HEAD + chunks * IMG_ENC_ENT;
	case IMG_SEC_PARENT: return sizeof(uint64_t) + IMG_PATH_MAX;
	case IMG_SEC_PAGEMASK: return ram_size / PAGE_SIZE / 8;
	default: return IMG_MAX_OTHER_LEN;
	}
}

static int img_add(struct img_writer *w, uint32_t type, const void *data, size_t len, int reserve)
{
	void *copy;

	if (w->n_sections >= IMG_MAX_SECTIONS - reserve ||
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

/* Sections, then the table, then the trailer, all after the memory. */
static int img_write_tail(struct img_writer *w)
{
	uint64_t off = IMG_MEM_OFFSET + w->info.ram_size;
	uint8_t table[IMG_MAX_SECTIONS * IMG_TABLE_ENT], trailer[IMG_TRAILER];
	XXH3_state_t *st;
	int rc;

	memset(table, 0, sizeof(table));
	for (int i = 0; i < w->n_sections; i++) {
		uint8_t *e = table + i * IMG_TABLE_ENT;

		put32(e, w->sec[i].type);
		put64(e + 8, off);
		put64(e + 16, w->sec[i].len);
		put64(e + 24, XXH3_64bits(w->sec[i].data, w->sec[i].len));
		rc = pwrite_all(w->fd, w->sec[i].data, w->sec[i].len, off);
		if (rc)
			return rc;
		off += (w->sec[i].len + 7) & ~7ULL;
	}
	rc = pwrite_all(w->fd, table, (size_t)w->n_sections * IMG_TABLE_ENT, off);
	if (rc)
		return rc;
	memset(trailer, 0, sizeof(trailer));
	memcpy(trailer, IMG_END_MAGIC, 8);
	put64(trailer + 8, off);
	put32(trailer + 16, (uint32_t)w->n_sections);
	put32(trailer + 20, IMG_VERSION);
	put64(trailer + 24, off + (uint64_t)w->n_sections * IMG_TABLE_ENT + IMG_TRAILER);
	put64(trailer + 32, w->info.ram_size);
	st = XXH3_createState();
	if (!st)
		return -ENOMEM;
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, table, (size_t)w->n_sections * IMG_TABLE_ENT);
	XXH3_64bits_update(st, trailer, 40);
	put64(trailer + 40, XXH3_64bits_digest(st));
	XXH3_freeState(st);
	return pwrite_all(w->fd, trailer, sizeof(trailer),
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
	put64(buf, w->parent_identity);
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
	put32(buf, (uint32_t)w->info.codec);
	put32(buf + 4, (uint32_t)w->info.level);
	for (uint64_t c = 0; c < w->n_chunks; c++) {
		uint8_t *e = buf + IMG_ENC_HEAD + c * IMG_ENC_ENT;
		uint32_t pages = w->chunk_pages[c];

		e[0] = w->enc[c].codec;
		e[2] = (uint8_t)pages;
		e[3] = (uint8_t)(pages >> 8);
		put32(e + 4, w->enc[c].stored_len);
		put64(e + 8, w->enc[c].stored_hash);
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

int img_finish(struct img_writer *w)
{
	int rc;

	rc = img_add(w, IMG_SEC_CHUNKS, w->chunk_hash, w->n_chunks * sizeof(uint64_t), 0);
	if (!rc)
		rc = img_add_encoding(w);
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
	if (!rc && !img_name_is_ours(w, w->tmp_name))
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
	free(w->chunk_hash);
	free(w->chunk_pages);
	free(w->enc);
	free(w->held);
	free(w->parent_path);
	if (w->dir >= 0)
		close(w->dir);
	free(w->final_path);
	free(w->final_name);
	free(w->tmp_name);
	free(w);
}

uint64_t img_disk_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

static int img_fail(char err[IMG_ERR_LEN], int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int img_fail(char err[IMG_ERR_LEN], int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, IMG_ERR_LEN, fmt, ap);
	va_end(ap);
	return rc;
}

static int img_check_header(struct img_reader *r, char err[IMG_ERR_LEN])
{
	uint8_t hdr[IMG_HDR_SIZE];

	if (r->file_size < IMG_HDR_SIZE || pread_all(r->fd, hdr, sizeof(hdr), 0))
		return img_fail(err, -EINVAL, "not a ccvm snapshot image (%llu bytes, too short "
				"for a header)", (unsigned long long)r->file_size);
	if (memcmp(hdr, IMG_MAGIC, 8) != 0)
		return img_fail(err, -EINVAL, "not a ccvm snapshot image (no CCVMIMG magic)");
	r->version = get32(hdr + 8);
	if (r->version < IMG_VERSION_OLDEST || r->version > IMG_VERSION)
		return img_fail(err, -EINVAL, "image format version %u; this ccvm reads versions "
				"%u to %u", r->version, IMG_VERSION_OLDEST, IMG_VERSION);
	if (get64(hdr + 56) != XXH3_64bits(hdr, 56))
		return img_fail(err, -EINVAL, "the image header fails its checksum (damaged)");
	r->info.ram_size = get64(hdr + 16);
	r->info.policy = get32(hdr + 24);
	r->info.flags = get32(hdr + 28);
	r->info.created_ns = get64(hdr + 32);
	r->identity = get64(hdr + 56); /* with the trailer's checksum, once checked */
	if ((r->info.flags & ~IMG_FLAGS_KNOWN) || (r->info.flags && r->version < 2))
		return img_fail(err, -EINVAL, "the image has flags %#x this ccvm does not know "
				"(written by a newer ccvm?)", r->info.flags);
	if (get32(hdr + 12) != PAGE_SIZE || get64(hdr + 40) != IMG_MEM_OFFSET ||
	    get64(hdr + 48) != IMG_CHUNK || !r->info.ram_size || r->info.ram_size % IMG_CHUNK ||
	    r->info.ram_size > IMG_MAX_RAM)
		return img_fail(err, -EINVAL, "the image header has impossible values (page %u, "
				"RAM %llu bytes)", get32(hdr + 12),
				(unsigned long long)r->info.ram_size);
	return 0;
}

static int img_check_trailer(struct img_reader *r, char err[IMG_ERR_LEN], uint64_t *table_off)
{
	uint8_t trailer[IMG_TRAILER], table[IMG_MAX_SECTIONS * IMG_TABLE_ENT];
	uint64_t min = IMG_MEM_OFFSET + r->info.ram_size;
	XXH3_state_t *st;
	uint64_t h;

	if (r->file_size < min + IMG_TRAILER ||
	    pread_all(r->fd, trailer, sizeof(trailer), r->file_size - IMG_TRAILER) ||
	    memcmp(trailer, IMG_END_MAGIC, 8) != 0)
		return img_fail(err, -EINVAL, "truncated or incomplete image: no valid trailer at "
				"the end (%llu bytes; memory alone needs %llu)",
				(unsigned long long)r->file_size, (unsigned long long)min);
	*table_off = get64(trailer + 8);
	r->n_sections = (int)get32(trailer + 16);
	if (get64(trailer + 24) != r->file_size || get64(trailer + 32) != r->info.ram_size ||
	    r->n_sections < 1 || r->n_sections > IMG_MAX_SECTIONS || *table_off < min ||
	    *table_off + (uint64_t)r->n_sections * IMG_TABLE_ENT + IMG_TRAILER != r->file_size)
		return img_fail(err, -EINVAL, "the image trailer does not match the file (size %llu, "
				"trailer says %llu): truncated or damaged",
				(unsigned long long)r->file_size,
				(unsigned long long)get64(trailer + 24));
	if (pread_all(r->fd, table, (size_t)r->n_sections * IMG_TABLE_ENT, *table_off))
		return img_fail(err, -EIO, "cannot read the section table");
	st = XXH3_createState();
	if (!st)
		return -ENOMEM;
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, table, (size_t)r->n_sections * IMG_TABLE_ENT);
	XXH3_64bits_update(st, trailer, 40);
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	if (h != get64(trailer + 40))
		return img_fail(err, -EINVAL, "the section table or trailer fails its checksum");
	/* The table holds every section's checksum, the chunk checksums' among them. */
	r->identity = XXH3_64bits_withSeed(trailer + 40, 8, r->identity);
	for (int i = 0; i < r->n_sections; i++) {
		const uint8_t *e = table + i * IMG_TABLE_ENT;

		r->sec[i].type = get32(e);
		r->sec[i].offset = get64(e + 8);
		r->sec[i].length = get64(e + 16);
		r->sec[i].hash = get64(e + 24);
		if (r->sec[i].offset < min || r->sec[i].offset > *table_off ||
		    r->sec[i].length > *table_off - r->sec[i].offset)
			return img_fail(err, -EINVAL, "section %d lies outside its area", i);
		if (r->sec[i].length > img_section_max(r->sec[i].type, r->info.ram_size))
			return img_fail(err, -EINVAL, "section %d (type %u) is %llu bytes, longer "
					"than that kind may be (%llu)", i, r->sec[i].type,
					(unsigned long long)r->sec[i].length,
					(unsigned long long)img_section_max(r->sec[i].type,
									    r->info.ram_size));
	}
	return 0;
}

int img_read_section(const struct img_reader *r, const struct img_section *s, void **data)
{
	void *buf = malloc(s->length ? s->length : 1);
	int rc;

	if (!buf)
		return -ENOMEM;
	rc = pread_all(r->fd, buf, s->length, s->offset);
	if (!rc && XXH3_64bits(buf, s->length) != s->hash)
		rc = -EBADMSG;
	if (rc) {
		free(buf);
		return rc;
	}
	*data = buf;
	return 0;
}

const struct img_section *img_find(const struct img_reader *r, uint32_t type)
{
	for (int i = 0; i < r->n_sections; i++)
		if (r->sec[i].type == type)
			return &r->sec[i];
	return NULL;
}

/* One chunk's encoding from entry @e; false when no writer could have made it. */
static bool img_enc_decode(const uint8_t *e, bool child, struct img_chunk_enc *out)
{
	out->codec = e[0];
	out->data_pages = (uint16_t)(e[2] | e[3] << 8);
	out->stored_len = get32(e + 4);
	out->stored_hash = get64(e + 8);
	if (e[1] || out->data_pages > IMG_PAGES_PER_CHUNK ||
	    (out->codec & ~IMG_ENC_PACKED) >= IMG_CODEC_NR ||
	    ((out->codec & IMG_ENC_PACKED) && !child))
		return false;
	if (out->codec == IMG_CODEC_NONE)
		return out->stored_len == 0 && out->stored_hash == 0;
	if (out->codec == IMG_ENC_PACKED && out->stored_len % PAGE_SIZE)
		return false;
	/* A frame is kept only when it saves a page, so it is never a whole chunk. */
	return out->stored_len > 0 && out->stored_len <= IMG_CHUNK - PAGE_SIZE &&
	       out->data_pages > 0;
}

/* Version 2's encoding section (@payload, already checked against its checksum);
 * version 1 has none and every chunk is raw. */
static int img_parse_encoding(struct img_reader *r, const uint8_t *payload,
			      char err[IMG_ERR_LEN])
{
	const struct img_section *s = img_find(r, IMG_SEC_ENCODING);

	r->enc = calloc(r->n_chunks ? r->n_chunks : 1, sizeof(*r->enc));
	if (!r->enc)
		return -ENOMEM;
	if (r->version == 1)
		return 0;
	if (!s || !payload || s->length != IMG_ENC_HEAD + r->n_chunks * IMG_ENC_ENT)
		return img_fail(err, -EINVAL, "the chunk encoding table is missing or has the "
				"wrong size");
	r->codec = (enum img_codec)get32(payload);
	r->level = (int)get32(payload + 4);
	if (r->codec >= IMG_CODEC_NR)
		return img_fail(err, -EINVAL, "the image names an unknown codec (%u)", r->codec);
	for (uint64_t c = 0; c < r->n_chunks; c++)
		if (!img_enc_decode(payload + IMG_ENC_HEAD + c * IMG_ENC_ENT,
				    r->info.flags & IMG_FLAG_CHILD, &r->enc[c]))
			return img_fail(err, -EINVAL, "memory chunk %llu has an impossible encoding "
					"(damaged)", (unsigned long long)c);
	return 0;
}

/* A child's parent section (@parent: identity, then the path, no NUL) and page mask
 * (@mask, taken over); nothing for a full image. */
static int img_parse_lineage(struct img_reader *r, const uint8_t *parent, uint8_t **mask,
			     char err[IMG_ERR_LEN])
{
	const struct img_section *sp = img_find(r, IMG_SEC_PARENT), *sm = img_find(r, IMG_SEC_PAGEMASK);
	uint64_t plen;

	if (!(r->info.flags & IMG_FLAG_CHILD))
		return sp || sm ? img_fail(err, -EINVAL, "a full image with a parent section") : 0;
	if (!sp || !parent || !sm || !*mask || sm->length != r->info.ram_size / PAGE_SIZE / 8)
		return img_fail(err, -EINVAL, "an incremental image without its parent or page "
				"mask section");
	plen = sp->length - 8;
	if (sp->length <= 8 || plen >= IMG_PATH_MAX || memchr(parent + 8, 0, plen))
		return img_fail(err, -EINVAL, "the parent's path is empty, too long or holds a NUL");
	r->parent_identity = get64(parent);
	r->parent_path = strndup((const char *)parent + 8, plen);
	if (!r->parent_path)
		return -ENOMEM;
	r->mask = *mask;
	*mask = NULL;
	return 0;
}

static int img_check_sections(struct img_reader *r, char err[IMG_ERR_LEN])
{
	const struct img_section *chunks;
	uint8_t *encoding = NULL, *parent = NULL, *mask = NULL;
	void *data;
	int rc;

	for (int i = 0; i < r->n_sections; i++) {
		rc = img_read_section(r, &r->sec[i], &data);
		if (rc)
			return img_fail(err, -EINVAL, "section %d (type %u, %llu bytes) %s", i,
					r->sec[i].type, (unsigned long long)r->sec[i].length,
					rc == -EBADMSG ? "fails its checksum (damaged)" :
							 "cannot be read");
		if (r->sec[i].type == IMG_SEC_CHUNKS && !r->chunk_hash)
			r->chunk_hash = data;
		else if (r->sec[i].type == IMG_SEC_ENCODING && !encoding)
			encoding = data;
		else if (r->sec[i].type == IMG_SEC_PARENT && !parent)
			parent = data;
		else if (r->sec[i].type == IMG_SEC_PAGEMASK && !mask)
			mask = data;
		else
			free(data);
	}
	chunks = img_find(r, IMG_SEC_CHUNKS);
	r->n_chunks = r->info.ram_size / IMG_CHUNK;
	if (!chunks || chunks->length != r->n_chunks * sizeof(uint64_t))
		rc = img_fail(err, -EINVAL, "the memory checksum table is missing or has the "
			      "wrong size");
	else
		rc = img_parse_encoding(r, encoding, err);
	if (!rc)
		rc = img_parse_lineage(r, parent, &mask, err);
	free(encoding);
	free(parent);
	free(mask);
	return rc;
}

/* Where a child's parent is: its recorded path, from the child's directory when
 * relative. NULL when out of memory. */
static char *img_parent_location(const char *child, const char *recorded)
{
	char *dup, *out = NULL;

	if (recorded[0] == '/')
		return strdup(recorded);
	dup = strdup(child);
	if (dup && asprintf(&out, "%s/%s", dirname(dup), recorded) < 0)
		out = NULL;
	free(dup);
	return out;
}

static int img_open_at(int at, const char *path, bool parent, struct img_reader *r,
		       char err[IMG_ERR_LEN], int depth);

/* Open a child's parent (and so its ancestors) and check it is the image the child
 * was taken after: the same RAM size and the identity recorded. A relative name is
 * looked up in @dir, the directory the child was opened in. */
static int img_open_parent(int dir, const char *path, struct img_reader *r,
			   char err[IMG_ERR_LEN], int depth)
{
	char *where = img_parent_location(path, r->parent_path), why[IMG_ERR_LEN];
	int rc;

	if (!where)
		return -ENOMEM;
	if (depth + 1 >= IMG_MAX_CHAIN) {
		rc = img_fail(err, -ELOOP, "its chain of parents is longer than %d images (a loop?)",
			      IMG_MAX_CHAIN);
		goto out;
	}
	r->parent = calloc(1, sizeof(*r->parent));
	if (!r->parent) {
		rc = -ENOMEM;
		goto out;
	}
	rc = img_open_at(dir, r->parent_path, true, r->parent, why, depth + 1);
	if (rc) {
		free(r->parent);
		r->parent = NULL;
		img_fail(err, rc, "its parent %s %s: %s", where,
			 rc == -ENOENT ? "is missing" : "cannot be used", why);
		goto out;
	}
	if (r->parent->identity != r->parent_identity || r->parent->info.ram_size != r->info.ram_size)
		rc = img_fail(err, -EINVAL, "its parent %s is not the image it was taken after (it "
			      "was replaced or changed since)", where);
out:
	free(where);
	return rc;
}

int img_open(const char *path, struct img_reader *r, char err[IMG_ERR_LEN])
{
	return img_open_at(AT_FDCWD, path, false, r, err, 0);
}

/* Why @st cannot be an image, or NULL when it is a regular file. */
static const char *img_not_regular(const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		return NULL;
	return S_ISLNK(st->st_mode) ? "a symbolic link, which an image's parent may not be" :
				      "not a regular file";
}

/*
 * Open @base in @dir for reading without acting on whatever else it names. Its type is
 * read first without opening anything; a regular file is then looked up once as an
 * O_PATH descriptor (which opens no device or FIFO), checked to be that same file,
 * and reopened through that descriptor, so the file read is the file checked. A
 * parent, which an image names, may not be a symbolic link either.
 */
static int img_open_file(int dir, const char *base, bool parent, char err[IMG_ERR_LEN])
{
	struct stat pre, st = { 0 };
	const char *why;
	int pfd, fd;

	if (fstatat(dir, base, &pre, parent ? AT_SYMLINK_NOFOLLOW : 0) < 0)
		return img_fail(err, -errno, "cannot open: %s", strerror(errno));
	why = img_not_regular(&pre);
	if (why)
		return img_fail(err, -EINVAL, "%s", why);
	pfd = openat(dir, base, O_PATH | O_CLOEXEC | (parent ? O_NOFOLLOW : 0));
	if (pfd < 0)
		return img_fail(err, -errno, "cannot open: %s", strerror(errno));
	if (fstat(pfd, &st) < 0 || (why = img_not_regular(&st)) || st.st_dev != pre.st_dev ||
	    st.st_ino != pre.st_ino) {
		fd = img_fail(err, -EINVAL, "%s", why ? why : "replaced while it was opened");
	} else {
		fd = img_reopen(pfd, O_RDONLY | O_NOCTTY);
		if (fd < 0)
			img_fail(err, fd, "cannot reopen it through /proc/self/fd: %s", strerror(-fd));
	}
	close(pfd);
	return fd;
}

static int img_open_at(int at, const char *path, bool parent, struct img_reader *r,
		       char err[IMG_ERR_LEN], int depth)
{
	const char *base;
	struct stat st;
	uint64_t table_off;
	int dir, rc;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	dir = img_dir_at(at, path, O_PATH, &base);
	if (dir < 0)
		return img_fail(err, dir, "cannot open its directory: %s", strerror(-dir));
	r->fd = img_open_file(dir, base, parent, err);
	if (r->fd < 0) {
		rc = r->fd;
		goto fail;
	}
	if (fstat(r->fd, &st) < 0) {
		rc = img_fail(err, -errno, "fstat: %s", strerror(errno));
		goto fail;
	}
	r->file_size = (uint64_t)st.st_size;
	rc = img_check_header(r, err);
	if (!rc)
		rc = img_check_trailer(r, err, &table_off);
	if (!rc)
		rc = img_check_sections(r, err);
	if (!rc && r->parent_path)
		rc = img_open_parent(dir, path, r, err, depth);
	if (!rc) {
		close(dir);
		return 0;
	}
fail:
	close(dir);
	img_close(r);
	return rc;
}

void img_close(struct img_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->chunk_hash);
	free(r->enc);
	free(r->parent_path);
	free(r->mask);
	if (r->parent) {
		img_close(r->parent);
		free(r->parent);
	}
	r->chunk_hash = NULL;
	r->enc = NULL;
	r->parent_path = NULL;
	r->mask = NULL;
	r->parent = NULL;
	r->fd = -1;
}

/* Pages the child holds in chunk @c. */
static uint64_t img_held_in(const struct img_reader *r, uint64_t c)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < IMG_PAGES_PER_CHUNK; i++)
		k += bit_test(r->mask, c * IMG_PAGES_PER_CHUNK + i);
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
		if (!bit_test(r->mask, first + i))
			continue;
		if ((k + 1) * PAGE_SIZE > len)
			return -EBADMSG;
		memcpy(dst + i * PAGE_SIZE, frame + k++ * PAGE_SIZE, PAGE_SIZE);
	}
	return k * PAGE_SIZE == len ? 0 : -EBADMSG;
}

/* A compressed chunk's frame, read into this thread's buffer, checked, decompressed. */
static int img_read_frame(const struct img_reader *r, uint64_t c, void *dst)
{
	const struct img_chunk_enc *e = &r->enc[c];
	void *frame = codec_thread_buffer(CODEC_BUF_FRAME, e->stored_len);
	int rc;

	if (!frame)
		return -ENOMEM;
	rc = pread_all(r->fd, frame, e->stored_len, IMG_MEM_OFFSET + c * IMG_CHUNK);
	if (rc)
		return rc;
	if (XXH3_64bits(frame, e->stored_len) != e->stored_hash)
		return -EBADMSG;
	if (e->codec & IMG_ENC_PACKED)
		return img_unpack(r, c, frame, e->stored_len, dst);
	return codec_decompress((enum img_codec)e->codec, frame, e->stored_len, dst, IMG_CHUNK);
}

int img_read_chunk(const struct img_reader *r, uint64_t c, void *dst)
{
	int rc;

	if (c >= r->n_chunks)
		return -EINVAL;
	if (r->enc[c].codec != IMG_CODEC_NONE)
		rc = img_read_frame(r, c, dst);
	else
		rc = pread_all(r->fd, dst, IMG_CHUNK, IMG_MEM_OFFSET + c * IMG_CHUNK);
	if (rc)
		return rc;
	return img_chunk_hash(c * (IMG_CHUNK / PAGE_SIZE), dst, r->mask) == r->chunk_hash[c] ?
		       0 : -EBADMSG;
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
		if (!r->mask || bit_test(r->mask, first + i))
			h += page_hash(first + i, NULL);
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

		if (!bit_test(r->mask, first + i) || (!*has_data && img_page_is_zero(src)))
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

void img_reader_bytes(const struct img_reader *r, uint64_t *raw, uint64_t *stored)
{
	*raw = *stored = 0;
	for (uint64_t c = 0; c < r->n_chunks; c++) {
		*raw += (uint64_t)r->enc[c].data_pages * PAGE_SIZE;
		*stored += r->enc[c].codec == IMG_CODEC_NONE ?
				   (uint64_t)r->enc[c].data_pages * PAGE_SIZE : r->enc[c].stored_len;
	}
}

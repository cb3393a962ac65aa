/*
 * image.c - snapshot images: their layout, and the files and directories they live in.
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
 *
 * The format's parts: writing an image (image_write.c), each chunk's framing, stored
 * raw, packed or compressed and read back (image_chunk.c), and opening and checking
 * one (image_read.c). This file holds what they share: names and directories, and the
 * encoding helpers.
 */
#include "image_impl.h"

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

/* One page of zeros, written where a page ends as a hole over bytes a pre-copy left. */
static const uint8_t img_zeros[PAGE_SIZE];

const void *img_zero_page(void)
{
	return img_zeros;
}

int img_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
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

int img_pread_all(int fd, void *buf, size_t len, uint64_t off)
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

uint64_t img_page_hash(uint64_t pfn, const void *page)
{
	static const uint8_t zero[PAGE_SIZE];

	return XXH3_64bits_withSeed(page ? page : zero, PAGE_SIZE, pfn);
}

bool img_bit_test(const uint8_t *bits, uint64_t i)
{
	return bits[i / 8] >> (i % 8) & 1;
}

int img_table_hash(const uint8_t *table, int n_sections, const uint8_t *trailer, uint64_t *h)
{
	XXH3_state_t *st = XXH3_createState();

	if (!st)
		return -ENOMEM;
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, table, (size_t)n_sections * IMG_TABLE_ENT);
	XXH3_64bits_update(st, trailer, IMG_TRAILER_HASHED);
	*h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return 0;
}

/* The checksum of a chunk: of every page, or of the pages set in @mask (a child's,
 * indexed by page number) when it is given. */
uint64_t img_chunk_hash(uint64_t first_pfn, const void *chunk, const uint8_t *mask)
{
	const uint8_t *p = chunk;
	uint64_t h = 0;

	for (uint64_t i = 0; i < IMG_CHUNK / PAGE_SIZE; i++)
		if (!mask || img_bit_test(mask, first_pfn + i))
			h += img_page_hash(first_pfn + i, p + i * PAGE_SIZE);
	return h;
}

void img_header_encode(uint8_t hdr[IMG_HDR_SIZE], const struct img_header_info *info)
{
	memset(hdr, 0, IMG_HDR_SIZE);
	memcpy(hdr, IMG_MAGIC, 8);
	img_put32(hdr + 8, IMG_VERSION);
	img_put32(hdr + 12, (uint32_t)PAGE_SIZE);
	img_put64(hdr + 16, info->ram_size);
	img_put32(hdr + 24, info->policy);
	img_put32(hdr + 28, info->flags);
	img_put64(hdr + 32, info->created_ns);
	img_put64(hdr + 40, IMG_MEM_OFFSET);
	img_put64(hdr + 48, IMG_CHUNK);
	img_put64(hdr + 56, XXH3_64bits(hdr, 56));
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
int img_direct_fd(int fd)
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
const char *img_base(const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;

	return !*base || !strcmp(base, ".") || !strcmp(base, "..") ? NULL : base;
}

/* Open the directory part of @path (relative to @at) with @flags; *base is set to its
 * last component, which must name something in it (not "", "." or ".."). */
int img_dir_at(int at, const char *path, int flags, const char **base)
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

bool img_page_is_zero(const void *p)
{
	static const uint8_t zero[PAGE_SIZE];

	return memcmp(p, zero, PAGE_SIZE) == 0;
}

/* Add a section, leaving @reserve slots free. */
/* The longest a section of @type may be in an image of @ram_size bytes of RAM: the
 * tables derived from the RAM size exactly, the others their own bound. */
uint64_t img_section_max(uint32_t type, uint64_t ram_size)
{
	uint64_t chunks = ram_size / IMG_CHUNK;

	switch (type) {
	case IMG_SEC_VCPUS: return IMG_MAX_VCPUS_LEN;
	case IMG_SEC_PROCESS: return IMG_MAX_PROCESS_LEN;
	case IMG_SEC_CHUNKS: return chunks * sizeof(uint64_t);
	case IMG_SEC_ENCODING: return IMG_ENC_HEAD + chunks * IMG_ENC_ENT;
	case IMG_SEC_PARENT: return sizeof(uint64_t) + IMG_PATH_MAX;
	case IMG_SEC_PAGEMASK: return ram_size / PAGE_SIZE / 8;
	case IMG_SEC_TREE: return IMG_MAX_PROCESS_LEN;
	case IMG_SEC_WINDOWS: return ram_size * IMG_WINDOWS_RAM_TIMES;
	case IMG_SEC_SHM: return ram_size * IMG_SHM_RAM_TIMES;
	case IMG_SEC_PATCHES: return IMG_PATCH_HEAD + ram_size / PAGE_SIZE * IMG_PATCH_ENT;
	default: return IMG_MAX_OTHER_LEN;
	}
}

uint64_t img_disk_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

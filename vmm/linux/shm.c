/*
 * shm.c - memory shared between processes: memfds and MAP_SHARED mappings,
 * anonymous or of a memfd, whose bytes every process that maps them holds.
 *
 * Each process's memory is a window of the monitor's host mapping of guest RAM
 * (docs/processes.md). A shared mapping maps a host memfd over its range of the window
 * (gmem_alias), in every process that has the mapping: the guest reaches the bytes
 * through KVM and the monitor in place, in every window the same ones, with no copy and
 * no exit. MAP_SHARED | MAP_ANONYMOUS gets a memfd of ccvm's own, as large as the
 * mapping; a guest's memfd is mapped as far as its end (pages past it stay the
 * process's own zero memory, where Linux would raise SIGBUS), and it cannot shrink
 * below what a process maps of it (EBUSY): a page of a mapping past its file's end
 * would fault the monitor, not the guest. One lock orders mappings against those
 * truncations for the whole VM (rare calls; the lock is never held across a wait).
 *
 * The 2 MiB blocks holding a shared range are never shared copy-on-write: a shared
 * mapping makes its blocks the process's own first, and a fork copies them for the
 * child at once and maps the shared ranges over its copy (vm_process_fork).
 *
 * A range mapped anew leaves the snapshot engine's userfaultfd registration, which the
 * engine makes again at each snapshot's pause (cow_protect); before_discard lets a
 * running snapshot save the range's old bytes first and marks it written.
 *
 * Snapshots save each memfd any process maps or holds open once, while the VM is
 * paused (lx_shm_save, image section IMG_SEC_SHM), streamed a MiB at a time; a restore
 * makes them again before the processes (lx_shm_restore_src), reading the section the
 * same way, and maps them where they were.
 */
#include "shm.h"
#include "fdtable.h"
#include "../../base/log.h"
#include "../../mmu/layout.h"
#include "../../base/x86.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_NAME_MAX     249              /* memfd_create's limit on a name, as Linux's */
#define SHM_ANON_NAME    "ccvm-shared"    /* the memfd behind MAP_SHARED | MAP_ANONYMOUS */
#define SHM_MEMFD_PREFIX "/memfd:"        /* what /proc/self/fd says of a memfd */
#define SHM_DELETED      " (deleted)"

static pthread_mutex_t shm_lock = PTHREAD_MUTEX_INITIALIZER;

void lx_shm_lock(void)
{
	pthread_mutex_lock(&shm_lock);
}

void lx_shm_unlock(void)
{
	pthread_mutex_unlock(&shm_lock);
}

/* The name a memfd was made with, from /proc/self/fd: 0, or -EINVAL when @host is not
 * a memfd. */
static int shm_memfd_name(int host, char name[SHM_NAME_MAX + 1])
{
	char link[64], target[sizeof(SHM_MEMFD_PREFIX) + SHM_NAME_MAX + sizeof(SHM_DELETED)];
	size_t pre = strlen(SHM_MEMFD_PREFIX), del = strlen(SHM_DELETED);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", host);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0 || (size_t)n < pre || strncmp(target, SHM_MEMFD_PREFIX, pre))
		return -EINVAL;
	target[n] = '\0';
	if ((size_t)n >= pre + del && strcmp(target + n - del, SHM_DELETED) == 0)
		target[n - del] = '\0';
	n = (ssize_t)strnlen(target + pre, SHM_NAME_MAX);
	memcpy(name, target + pre, (size_t)n);
	name[n] = '\0';
	return 0;
}

bool lx_shm_is_memfd(int host)
{
	char name[SHM_NAME_MAX + 1];

	return shm_memfd_name(host, name) == 0;
}

int lx_shm_anon(uint64_t len)
{
	int fd = memfd_create(SHM_ANON_NAME, MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* [start, end) of @p's memory is about to be mapped anew: a snapshot running saves
 * its old bytes first (window 0's: the one the engine saves). */
static void shm_before(struct lx_proc *p, uint64_t start, uint64_t end)
{
	if (p->mem->base == 0 && p->hooks && p->hooks->before_discard)
		p->hooks->before_discard(p->hooks->ctx, start, end - start);
}

int lx_shm_alias(struct lx_proc *p, uint64_t start, uint64_t end, int host, uint64_t off)
{
	struct stat st;
	uint64_t size, len;

	if (fstat(host, &st) < 0)
		return -errno;
	size = (uint64_t)st.st_size;
	len = off < size ? page_up(size - off) : 0;
	if (len > end - start)
		len = end - start;
	if (!len)
		return 0; /* all of it past the file's end: the process's own zeros */
	shm_before(p, start, start + len); /* its old bytes, zero, are what a snapshot saves */
	return gmem_alias(p->mem, start, len, host, off);
}

int lx_shm_drop(struct lx_proc *p, uint64_t start, uint64_t end)
{
	int rc = 0;

	for (int i = vma_index_at(&p->mm.map, start);
	     i < p->mm.map.n && p->mm.map.v[i].start < end && !rc; i++) {
		const struct vma *v = &p->mm.map.v[i];
		uint64_t lo = v->start > start ? v->start : start, hi = v->end < end ? v->end : end;

		if (v->kind != VMA_SHM)
			continue;
		shm_before(p, lo, hi);
		rc = gmem_unalias(p->mem, lo, hi - lo);
	}
	return rc;
}

int lx_shm_map_all(struct lx_proc *p)
{
	int rc = 0;

	for (int i = 0; i < p->mm.map.n && !rc; i++) {
		const struct vma *v = &p->mm.map.v[i];

		/* (a memfd a restore did not find: the process's own copy, logged there) */
		if (v->kind != VMA_SHM || v->file_id < 0 || v->file_id >= p->n_mfiles ||
		    p->mfiles[v->file_id] < 0)
			continue;
		rc = lx_shm_alias(p, v->start, v->end, p->mfiles[v->file_id], v->file_off);
	}
	return rc;
}

/* How far into the file of @ino, @dev @q's shared mappings reach (q->lock held). */
static uint64_t shm_reach(struct lx_proc *q, dev_t dev, ino_t ino)
{
	uint64_t reach = 0;

	for (int i = 0; i < q->mm.map.n; i++) {
		const struct vma *v = &q->mm.map.v[i];
		struct stat st;

		if (v->kind != VMA_SHM || v->file_id < 0 || v->file_id >= q->n_mfiles ||
		    q->mfiles[v->file_id] < 0 || fstat(q->mfiles[v->file_id], &st) < 0 ||
		    st.st_dev != dev || st.st_ino != ino)
			continue;
		if (v->file_off + (v->end - v->start) > reach)
			reach = v->file_off + (v->end - v->start);
	}
	return reach;
}

int lx_shm_may_truncate(struct lx_proc *p, int host, uint64_t len)
{
	struct lx_tree *t = p->tree;
	uint64_t reach = 0;
	struct stat st;

	if (fstat(host, &st) < 0 || len >= (uint64_t)st.st_size)
		return 0;
	if (t)
		pthread_mutex_lock(&t->lock);
	for (int i = 0; i < (t ? LX_MAX_PROCS : 1); i++) {
		struct lx_proc *q = t ? t->procs[i] : p;
		uint64_t r;

		if (!q || q->ended)
			continue;
		pthread_mutex_lock(&q->lock);
		r = shm_reach(q, st.st_dev, st.st_ino);
		pthread_mutex_unlock(&q->lock);
		if (r > reach)
			reach = r;
	}
	if (t)
		pthread_mutex_unlock(&t->lock);
	return reach > page_up(len) ? -EBUSY : 0;
}

/* ---- snapshots ---- */

/* A record of the shared-memory section: u64 inode, u64 size, u32 seals, u32 name
 * length; the name, padded to 8 bytes; then the file's bytes. */
struct shm_head {
	uint64_t ino, size;
	uint32_t seals, name_len;
};

#define SHM_ALIGN 8
#define SHM_PIECE (1 << 20) /* a memfd's bytes go (and come back) this many at a time */

/* Where records go as they are made: @put (lx_shm_save's), at most @max bytes. */
struct shm_out {
	lx_shm_put_fn *put;
	void *ctx;
	size_t len, max;
	uint8_t *piece;
};

static size_t shm_pad(size_t n)
{
	return (n + SHM_ALIGN - 1) & ~(size_t)(SHM_ALIGN - 1);
}

/* @hl bytes of head and @n of data out: 0, -E2BIG past the most, or put's error. */
static int shm_emit(struct shm_out *o, const void *head, size_t hl, const void *data, size_t n)
{
	if (hl + n > o->max - o->len)
		return -E2BIG;
	o->len += hl + n;
	return o->put(o->ctx, head, hl, data, n);
}

/* Memfd @host out through @o, unless it is not one or its inode is in @seen already:
 * its head and name, then its bytes a piece at a time. */
static int shm_save_one(int host, json_t *seen, struct shm_out *o)
{
	uint8_t head[sizeof(struct shm_head) + SHM_NAME_MAX + 1 + SHM_ALIGN];
	struct shm_head h = { 0 };
	char name[SHM_NAME_MAX + 1], key[32];
	struct stat st;
	size_t hl;
	int rc;

	if (host < 0 || shm_memfd_name(host, name) || fstat(host, &st) < 0)
		return 0;
	snprintf(key, sizeof(key), "%llu", (unsigned long long)st.st_ino);
	if (json_object_get(seen, key))
		return 0;
	json_object_set_new(seen, key, json_true());
	h = (struct shm_head){ .ino = st.st_ino, .size = (uint64_t)st.st_size,
			       .name_len = (uint32_t)strlen(name) };
	rc = fcntl(host, F_GET_SEALS);
	h.seals = rc > 0 ? (uint32_t)rc : 0;
	hl = sizeof(h) + shm_pad(h.name_len);
	memset(head, 0, hl);
	memcpy(head, &h, sizeof(h));
	memcpy(head + sizeof(h), name, h.name_len);
	if (h.size > o->max - o->len || hl > o->max - o->len - h.size)
		return -E2BIG;
	if (!h.size)
		return shm_emit(o, head, hl, NULL, 0);
	for (uint64_t done = 0; done < h.size;) {
		size_t want = h.size - done < SHM_PIECE ? (size_t)(h.size - done) : SHM_PIECE;
		ssize_t n = pread(host, o->piece, want, (off_t)done);

		if (n <= 0)
			return n < 0 ? -errno : -EIO; /* it shrank while paused: nothing may */
		rc = shm_emit(o, done ? NULL : head, done ? 0 : hl, o->piece, (size_t)n);
		if (rc)
			return rc;
		done += (uint64_t)n;
	}
	return 0;
}

/* Every memfd @q maps or holds open (q->lock held). */
static int shm_save_proc(struct lx_proc *q, json_t *seen, struct shm_out *o)
{
	int rc = 0;

	for (int i = 0; i < q->n_mfiles && !rc; i++)
		rc = shm_save_one(q->mfiles[i], seen, o);
	lx_fd_lock(q);
	for (int fd = 0; fd < q->fdt.n_files && !rc; fd++)
		rc = shm_save_one(q->fdt.files[fd].host_fd, seen, o);
	lx_fd_unlock(q);
	return rc;
}

int lx_shm_save(struct lx_proc *const *procs, int n, size_t max, lx_shm_put_fn *put, void *ctx)
{
	struct shm_out o = { .put = put, .ctx = ctx, .max = max, .piece = malloc(SHM_PIECE) };
	json_t *seen = json_object();
	int rc = seen && o.piece ? 0 : -ENOMEM;

	for (int i = 0; i < n && !rc; i++) {
		pthread_mutex_lock(&procs[i]->lock);
		rc = shm_save_proc(procs[i], seen, &o);
		pthread_mutex_unlock(&procs[i]->lock);
	}
	json_decref(seen);
	free(o.piece);
	return rc;
}

bool lx_shm_memfd_ino(int host, uint64_t *ino)
{
	struct stat st;

	if (!lx_shm_is_memfd(host) || fstat(host, &st) < 0)
		return false;
	*ino = st.st_ino;
	return true;
}

/* The record at @off of @src into @h and @name (NUL-terminated), and where its bytes
 * start: the offset of the next, or 0 when it does not fit, cannot be read or is not
 * one ccvm writes. */
static uint64_t shm_record(const struct lx_shm_src *src, uint64_t off, struct shm_head *h,
			   char name[SHM_NAME_MAX + 1], uint64_t *bytes_at)
{
	uint64_t left = src->len - off;
	uint8_t padded[SHM_NAME_MAX + SHM_ALIGN];

	if (left < sizeof(*h) || src->read(src->ctx, off, h, sizeof(*h)))
		return 0;
	left -= sizeof(*h);
	if (h->name_len > SHM_NAME_MAX || shm_pad(h->name_len) > left ||
	    src->read(src->ctx, off + sizeof(*h), padded, shm_pad(h->name_len)) ||
	    memchr(padded, '\0', h->name_len) || h->size > left - shm_pad(h->name_len))
		return 0;
	memcpy(name, padded, h->name_len);
	name[h->name_len] = '\0';
	*bytes_at = off + sizeof(*h) + shm_pad(h->name_len);
	return *bytes_at + h->size;
}

int lx_shm_check_src(const struct lx_shm_src *src, char *err, size_t errlen)
{
	json_t *seen = json_object();
	int rc = seen ? 0 : -ENOMEM, i = 0;

	for (uint64_t off = 0; off < src->len && !rc; i++) {
		struct shm_head h;
		char name[SHM_NAME_MAX + 1], key[32];
		uint64_t bytes_at, next = shm_record(src, off, &h, name, &bytes_at);

		snprintf(key, sizeof(key), "%llu", (unsigned long long)h.ino);
		if (!next)
			rc = log_set_err(-EINVAL, err, errlen, "shared memory record %d: does not fit "
					 "the section or has a bad name", i);
		else if (json_object_get(seen, key))
			rc = log_set_err(-EINVAL, err, errlen, "shared memory record %d: inode %s "
					 "twice", i, key);
		else
			json_object_set_new(seen, key, json_true());
		off = next;
	}
	json_decref(seen);
	return rc;
}

/* A memfd for record @h, of its size, with nothing written yet: the fd, or -errno. */
static int shm_memfd_new(const struct shm_head *h, const char *name)
{
	bool sealable = h->seals != F_SEAL_SEAL; /* made without MFD_ALLOW_SEALING */
	int fd = memfd_create(name, MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0));

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)h->size) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* Record @h's seals on its filled memfd @fd. 0 or -errno. */
static int shm_seal(const struct shm_head *h, int fd)
{
	bool sealable = h->seals != F_SEAL_SEAL;

	if (sealable && h->seals && fcntl(fd, F_ADD_SEALS, (int)h->seals) < 0)
		return -errno;
	return 0;
}

/* @len bytes at @off of memfd @fd, each page-aligned piece that is all zero left a hole
 * (a new memfd reads as zero): 0 or -EIO. */
static int shm_write(int fd, uint64_t off, const uint8_t *data, size_t len)
{
	static const uint8_t zero[PAGE_SIZE];

	for (size_t p = 0; p < len;) {
		size_t n = PAGE_SIZE - (size_t)((off + p) % PAGE_SIZE);

		if (n > len - p)
			n = len - p;
		if (memcmp(data + p, zero, n) &&
		    pwrite(fd, data + p, n, (off_t)(off + p)) != (ssize_t)n)
			return -EIO;
		p += n;
	}
	return 0;
}

/* A new memfd holding record @h's bytes, read from @src at @at a piece at a time (zero
 * pages left holes), and its seals. */
static int shm_make(const struct shm_head *h, const char *name, const struct lx_shm_src *src,
		    uint64_t at)
{
	int fd = shm_memfd_new(h, name), rc = 0;
	uint8_t *piece = fd >= 0 ? malloc(SHM_PIECE) : NULL;

	if (fd < 0)
		return fd;
	if (!piece)
		rc = -ENOMEM;
	for (uint64_t done = 0; done < h->size && !rc; done += SHM_PIECE) {
		size_t len = h->size - done < SHM_PIECE ? (size_t)(h->size - done) : SHM_PIECE;

		rc = src->read(src->ctx, at + done, piece, len) ? -EIO : 0;
		if (!rc)
			rc = shm_write(fd, done, piece, len);
	}
	if (!rc)
		rc = shm_seal(h, fd);
	free(piece);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int lx_shm_restore_src(const struct lx_shm_src *src, json_t **out)
{
	json_t *reg = json_object();
	int rc = reg ? 0 : -ENOMEM;

	for (uint64_t off = 0; off < src->len && !rc;) {
		struct shm_head h;
		char name[SHM_NAME_MAX + 1], key[32];
		uint64_t bytes_at, next = shm_record(src, off, &h, name, &bytes_at);
		int fd;

		if (!next) {
			rc = -EINVAL; /* lx_shm_check let it through: not this section */
			break;
		}
		fd = shm_make(&h, name, src, bytes_at);
		snprintf(key, sizeof(key), "%llu", (unsigned long long)h.ino);
		if (fd < 0)
			rc = fd;
		else
			json_object_set_new(reg, key, json_integer(fd));
		off = next;
	}
	if (rc) {
		lx_shm_restored_close(reg);
		return rc;
	}
	*out = reg;
	return 0;
}

/* A section whole in memory, as a source. */
struct shm_mem {
	const uint8_t *data;
	size_t len;
};

static int shm_mem_read(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct shm_mem *m = ctx;

	if (off > m->len || n > m->len - off)
		return -EINVAL;
	memcpy(buf, m->data + off, n);
	return 0;
}

int lx_shm_check(const uint8_t *data, size_t len, char *err, size_t errlen)
{
	struct shm_mem m = { data, len };

	return lx_shm_check_src(&(struct lx_shm_src){ .len = len, .read = shm_mem_read,
						      .ctx = &m }, err, errlen);
}

int lx_shm_restore(const uint8_t *data, size_t len, json_t **out)
{
	struct shm_mem m = { data, len };

	return lx_shm_restore_src(&(struct lx_shm_src){ .len = len, .read = shm_mem_read,
							.ctx = &m }, out);
}

/* ---- a section that arrives in pieces ---- */

_Static_assert(sizeof(struct shm_head) + SHM_NAME_MAX + SHM_ALIGN <=
		       sizeof(((struct lx_shm_in *)0)->head), "a record's head and name fit");

void lx_shm_in_init(struct lx_shm_in *in, uint64_t max)
{
	memset(in, 0, sizeof(*in));
	in->fd = -1;
	in->max = max;
}

/* The head and name of the record being read are whole: checked, and its memfd made
 * (and registered at once, so that an error closes it). 0, or -EINVAL/-errno with why
 * in @err. */
static int shm_in_start(struct lx_shm_in *in, char *err, size_t errlen)
{
	struct shm_head h;
	char name[SHM_NAME_MAX + 1], key[32];
	int fd;

	memcpy(&h, in->head, sizeof(h));
	if (memchr(in->head + sizeof(h), '\0', h.name_len))
		return log_set_err(-EINVAL, err, errlen, "shared memory record %d: a bad name",
				   in->records);
	if (h.size > in->max - in->total) /* its bytes could never all come */
		return log_set_err(-EINVAL, err, errlen, "shared memory record %d: %llu bytes, "
				   "more than the section may hold", in->records,
				   (unsigned long long)h.size);
	snprintf(key, sizeof(key), "%llu", (unsigned long long)h.ino);
	if (json_object_get(in->reg, key))
		return log_set_err(-EINVAL, err, errlen, "shared memory record %d: inode %s "
				   "twice", in->records, key);
	memcpy(name, in->head + sizeof(h), h.name_len);
	name[h.name_len] = '\0';
	fd = shm_memfd_new(&h, name);
	if (fd < 0)
		return log_set_err(fd, err, errlen, "shared memory record %d: %s", in->records,
				   strerror(-fd));
	json_object_set_new(in->reg, key, json_integer(fd));
	in->fd = fd;
	in->done = 0;
	return 0;
}

/* The record's memfd is whole: sealed, and the next record's head is awaited. */
static int shm_in_done(struct lx_shm_in *in, char *err, size_t errlen)
{
	struct shm_head h;
	int rc;

	memcpy(&h, in->head, sizeof(h));
	rc = shm_seal(&h, in->fd);
	in->fd = -1;
	in->got = 0;
	in->records++;
	return rc ? log_set_err(rc, err, errlen, "shared memory: %s", strerror(-rc)) : 0;
}

/* After bytes were taken: a record's head and name whole start its memfd (one with no
 * bytes is whole at once), a memfd's last byte ends it. 0 or the error. */
static int shm_in_step(struct lx_shm_in *in, char *err, size_t errlen)
{
	struct shm_head h;
	int rc;

	memcpy(&h, in->head, sizeof(h));
	if (in->fd >= 0)
		return in->done == h.size ? shm_in_done(in, err, errlen) : 0;
	if (in->got < sizeof(h) || h.name_len > SHM_NAME_MAX ||
	    in->got < sizeof(h) + shm_pad(h.name_len))
		return 0; /* (a bad length is refused as the next bytes come, or at the end) */
	rc = shm_in_start(in, err, errlen);
	if (!rc && !h.size)
		rc = shm_in_done(in, err, errlen);
	return rc;
}

/* @n bytes of @data into the record's head and name, as far as @want: taken. */
static size_t shm_in_take(struct lx_shm_in *in, const uint8_t *data, size_t len, size_t want)
{
	size_t n = want - in->got < len ? want - in->got : len;

	memcpy(in->head + in->got, data, n);
	in->got += n;
	return n;
}

int lx_shm_in_put(struct lx_shm_in *in, const uint8_t *data, size_t len, char *err,
		  size_t errlen)
{
	if (!in->reg && !(in->reg = json_object()))
		return log_set_err(-ENOMEM, err, errlen, "no memory");
	if (len > in->max - in->total)
		return log_set_err(-EINVAL, err, errlen, "shared memory: more than %llu bytes",
				   (unsigned long long)in->max);
	while (len) {
		struct shm_head h;
		size_t n;
		int rc = 0;

		if (in->fd >= 0) { /* the record's bytes */
			memcpy(&h, in->head, sizeof(h));
			n = h.size - in->done < len ? (size_t)(h.size - in->done) : len;
			if (shm_write(in->fd, in->done, data, n))
				return log_set_err(-EIO, err, errlen, "shared memory: cannot write");
			in->done += n;
		} else if (in->got < sizeof(h)) { /* its head */
			n = shm_in_take(in, data, len, sizeof(h));
		} else { /* its name, padded to 8 bytes (the head says how long) */
			memcpy(&h, in->head, sizeof(h));
			if (h.name_len > SHM_NAME_MAX)
				return log_set_err(-EINVAL, err, errlen, "shared memory record %d: "
						   "a bad name", in->records);
			n = shm_in_take(in, data, len, sizeof(h) + shm_pad(h.name_len));
		}
		data += n;
		len -= n;
		in->total += n;
		rc = shm_in_step(in, err, errlen);
		if (rc)
			return rc;
	}
	return shm_in_step(in, err, errlen); /* (a head whose name is empty: whole now) */
}

int lx_shm_in_end(struct lx_shm_in *in, json_t **reg, char *err, size_t errlen)
{
	*reg = NULL;
	if (in->fd >= 0 || in->got)
		return log_set_err(-EINVAL, err, errlen, "shared memory record %d: cut short",
				   in->records);
	if (in->reg && json_object_size(in->reg)) {
		*reg = in->reg;
		in->reg = NULL;
	}
	return 0;
}

void lx_shm_in_free(struct lx_shm_in *in)
{
	if (in->reg)
		lx_shm_restored_close(in->reg);
	in->reg = NULL;
	in->fd = -1;
}

int lx_shm_restored(json_t *reg, uint64_t ino)
{
	char key[32];
	json_t *v;

	snprintf(key, sizeof(key), "%llu", (unsigned long long)ino);
	v = reg ? json_object_get(reg, key) : NULL;
	return v ? fcntl((int)json_integer_value(v), F_DUPFD_CLOEXEC, 3) : -1;
}

void lx_shm_restored_close(json_t *reg)
{
	const char *key;
	json_t *v;

	json_object_foreach(reg, key, v)
		close((int)json_integer_value(v));
	json_decref(reg);
}

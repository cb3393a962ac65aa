/*
 * sys_mm.c - memory system calls: mmap, munmap, mprotect, mremap, madvise, brk, and
 * memfd_create.
 *
 * Guest RAM is mapped once by the page tables, so these calls only hand out and take
 * back ranges (mmu/vma.c) and manage contents. The invariant that makes anonymous
 * mmap free: every range that is not mapped holds zeros. Whatever gives memory back
 * (munmap, MAP_FIXED over old pages, shrinking brk, MADV_DONTNEED) discards it on the
 * host, which makes it read as zero again and frees the host pages. mprotect is
 * recorded but not enforced: the page tables do not change at run time. Shared
 * mappings (MAP_SHARED anonymous, or of a memfd) map a host memfd over their range
 * (shm.c): taking one back maps private zero memory there again, and MADV_DONTNEED
 * leaves its bytes, which are the file's, as Linux does.
 */
#include "sys.h"
#include "../../base/log.h"
#include "../../mmu/layout.h"
#include "../../base/x86.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MM_MAP_TYPE 0x0f
#define MM_MEMFD_NAME_MAX 249 /* memfd_create's limit on a name, as Linux's */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* Linux 6.3; older headers lack it */
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#define MM_MFD_KNOWN (MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL | MFD_EXEC)
#define MM_KNOWN_ADVICE_MASK                                                             \
	((1ULL << MADV_NORMAL) | (1ULL << MADV_RANDOM) | (1ULL << MADV_SEQUENTIAL) |       \
	 (1ULL << MADV_WILLNEED) | (1ULL << MADV_FREE) | (1ULL << MADV_DONTFORK) |         \
	 (1ULL << MADV_DOFORK) | (1ULL << MADV_MERGEABLE) | (1ULL << MADV_UNMERGEABLE) |   \
	 (1ULL << MADV_HUGEPAGE) | (1ULL << MADV_NOHUGEPAGE) | (1ULL << MADV_DONTDUMP) |   \
	 (1ULL << MADV_DODUMP) | (1ULL << MADV_WIPEONFORK) | (1ULL << MADV_KEEPONFORK) |   \
	 (1ULL << MADV_COLD) | (1ULL << MADV_PAGEOUT) | (1ULL << 22) | (1ULL << 23))

static bool mm_user_range(struct lx_proc *p, uint64_t start, uint64_t len)
{
	return start % PAGE_SIZE == 0 && gmem_user_range_ok(p->mem, start, len);
}

/**
 * lx_mm_discard - give [start, end) back: it reads as zero afterwards and leaves the
 * memory map. Caller holds p->lock.
 */
/* Give pages back to the host, first letting a running snapshot keep what it needs. */
static int mm_discard_pages(struct lx_proc *p, uint64_t start, uint64_t len)
{
	if (p->hooks && p->hooks->before_discard)
		p->hooks->before_discard(p->hooks->ctx, start, len);
	return gmem_discard(p->mem, start, len);
}

/* Whether a mapping still names mapped file @id. */
static bool mm_file_used(const struct lx_proc *p, int id)
{
	for (int i = 0; i < p->mm.map.n; i++)
		if (VMA_HAS_FILE(p->mm.map.v[i].kind) && p->mm.map.v[i].file_id == id)
			return true;
	return false;
}

/* Shared mapping @v left [start, end): once no mapping names its file, the file is let
 * go of and its slot serves again, so that a program mapping and unmapping memfds (a
 * JIT's double mapping, MAP_SHARED | MAP_ANONYMOUS) keeps no descriptor per mapping. */
static void mm_file_release(struct lx_proc *p, int id)
{
	if (id < 0 || id >= p->n_mfiles || p->mfiles[id] < 0 || mm_file_used(p, id))
		return;
	close(p->mfiles[id]);
	p->mfiles[id] = -1;
	free(p->mfile_paths[id]);
	p->mfile_paths[id] = NULL;
}

#define MM_RELEASE_MAX 8 /* shared files one discard looks at letting go of */

int lx_mm_discard(struct lx_proc *p, uint64_t start, uint64_t end)
{
	int ids[MM_RELEASE_MAX], n = 0, rc;

	if (start >= end)
		return 0;
	/* Only the mappings the range meets (most discards meet no shared one). */
	for (int i = vma_index_at(&p->mm.map, start);
	     i < p->mm.map.n && p->mm.map.v[i].start < end && n < MM_RELEASE_MAX; i++)
		if (p->mm.map.v[i].kind == VMA_SHM)
			ids[n++] = p->mm.map.v[i].file_id;
	rc = mm_discard_pages(p, start, end - start);
	if (!rc && n)
		rc = lx_shm_drop(p, start, end);
	if (!rc)
		rc = vma_remove(&p->mm.map, start, end);
	for (int i = 0; i < n && !rc; i++)
		mm_file_release(p, ids[i]);
	return rc;
}

/* Remember the file behind a mapping so MADV_DONTNEED can read it again. One entry
 * per distinct file, so a program mapping the same file often does not grow this. */
static int mm_file_id(struct lx_proc *p, int host_fd)
{
	struct stat st, other;
	char gpath[PATH_MAX], **np;
	int *nf, dup_fd;

	if (fstat(host_fd, &st) < 0)
		return -errno;
	for (int i = 0; i < p->n_mfiles; i++)
		if (fstat(p->mfiles[i], &other) == 0 && other.st_dev == st.st_dev &&
		    other.st_ino == st.st_ino)
			return i;
	for (int i = 0; i < p->n_mfiles; i++) {
		if (p->mfiles[i] >= 0 || mm_file_used(p, i))
			continue;
		/* a slot mm_file_release let go of */
		p->mfiles[i] = fcntl(host_fd, F_DUPFD_CLOEXEC, 3);
		if (p->mfiles[i] < 0)
			return -errno;
		p->mfile_paths[i] = lx_fs_guest_path(&p->fs, p->mfiles[i], gpath) == 0 ?
					    strdup(gpath) : NULL;
		return i;
	}
	nf = realloc(p->mfiles, (size_t)(p->n_mfiles + 1) * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	p->mfiles = nf;
	np = realloc(p->mfile_paths, (size_t)(p->n_mfiles + 1) * sizeof(*np));
	if (!np)
		return -ENOMEM;
	p->mfile_paths = np;
	dup_fd = fcntl(host_fd, F_DUPFD_CLOEXEC, 3);
	if (dup_fd < 0)
		return -errno;
	p->mfiles[p->n_mfiles] = dup_fd;
	p->mfile_paths[p->n_mfiles] =
		lx_fs_guest_path(&p->fs, dup_fd, gpath) == 0 ? strdup(gpath) : NULL;
	return p->n_mfiles++;
}

/* Fill [addr, addr + len) of guest memory from the file at @off; bytes past the end
 * of the file stay zero. */
static int mm_read_file(struct lx_proc *p, int host_fd, uint64_t addr, uint64_t len, uint64_t off)
{
	uint8_t *dst = gmem_user_ptr(p->mem, addr, len);
	uint64_t done = 0;

	if (!dst)
		return -EFAULT;
	while (done < len) {
		ssize_t n = pread(host_fd, dst + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (uint64_t)n;
	}
	return 0;
}

/* Choose where a new mapping of @len bytes goes. Caller holds p->lock. */
static int64_t mm_place(struct lx_proc *p, uint64_t hint, uint64_t len, uint64_t flags)
{
	struct lx_mm *mm = &p->mm;
	uint64_t addr;
	int rc;

	if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
		if (hint % PAGE_SIZE)
			return -EINVAL;
		if (!mm_user_range(p, hint, len))
			return -ENOMEM;
		if ((flags & MAP_FIXED_NOREPLACE) && !(flags & MAP_FIXED) &&
		    !vma_range_free(&mm->map, hint, hint + len))
			return -EEXIST;
		rc = lx_mm_discard(p, hint, hint + len);
		return rc ? rc : (int64_t)hint;
	}
	hint &= ~(PAGE_SIZE - 1);
	if (hint && mm_user_range(p, hint, len) && hint + len <= mm->mmap_top &&
	    vma_range_free(&mm->map, hint, hint + len))
		return (int64_t)hint;
	rc = vma_find_free(&mm->map, len, mm->mmap_top, PAGE_SIZE, &addr);
	return rc ? rc : (int64_t)addr;
}

/* A shared mapping of memfd @host: 0 with *@shm set when it is mapped shared (the
 * descriptor open for reading and writing, the file not sealed against writes); 0
 * with *@shm clear for a read-only mapping that a copy serves as well (its bytes
 * cannot change, or the descriptor could not write them anyway); -errno as Linux. */
static int mm_check_memfd(int host, uint64_t prot, bool *shm)
{
	int seals = fcntl(host, F_GET_SEALS);
	bool sealed = seals > 0 && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE));
	bool rw = (fcntl(host, F_GETFL) & O_ACCMODE) == O_RDWR;

	if (prot & PROT_WRITE) {
		if (!rw)
			return -EACCES;
		if (sealed)
			return -EPERM;
	}
	*shm = rw && !sealed;
	return 0;
}

static int mm_check_file(struct lx_call *c, uint64_t fd, uint64_t type, uint64_t prot, int *host,
			 bool *shm)
{
	static bool warned;
	struct stat st;

	*host = lx_host_fd(c, fd);
	if (*host < 0)
		return *host;
	if (fstat(*host, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENODEV;
	if ((fcntl(*host, F_GETFL) & O_ACCMODE) == O_WRONLY)
		return -EACCES;
	if (type != MAP_PRIVATE && lx_shm_is_memfd(*host))
		return mm_check_memfd(*host, prot, shm);
	if (type != MAP_PRIVATE && (prot & PROT_WRITE)) {
		/* Guest RAM is private to the VM: writes could never reach the file. */
		if (!__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
			log_warn("guest asked for a shared writable file mapping; not supported "
				 "(returning ENODEV)");
		return -ENODEV;
	}
	return 0;
}

/* A shared mapping of @host (-1: a new anonymous one) at [addr, addr + len) into @v.
 * Caller holds lx_shm_lock and p->lock. */
static int mm_shm_map(struct lx_proc *p, uint64_t addr, uint64_t len, int host, uint64_t off,
		      struct vma *v)
{
	int own = -1, rc;

	if (host < 0) {
		own = host = lx_shm_anon(len);
		if (host < 0)
			return host;
		off = 0;
	}
	v->kind = VMA_SHM;
	v->file_off = off;
	v->file_id = mm_file_id(p, host);
	rc = v->file_id < 0 ? v->file_id : lx_shm_alias(p, addr, addr + len, host, off);
	if (own >= 0)
		close(own); /* mm_file_id keeps its own descriptor */
	return rc;
}

int64_t sys_mmap(struct lx_call *c)
{
	uint64_t hint = c->a[0], len = c->a[1], prot = c->a[2], flags = c->a[3], off = c->a[5];
	uint64_t type = flags & MM_MAP_TYPE;
	bool anon = flags & MAP_ANONYMOUS, shm = anon && type != MAP_PRIVATE;
	struct vma v = { .prot = (uint32_t)prot, .flags = (uint32_t)flags, .kind = VMA_ANON };
	int host = -1, rc;
	int64_t addr;

	if (!len || off % PAGE_SIZE)
		return -EINVAL;
	if (len > c->p->mem->size)
		return -ENOMEM;
	len = page_up(len);
	if (type != MAP_PRIVATE && type != MAP_SHARED && type != MAP_SHARED_VALIDATE)
		return -EINVAL;
	if (!anon) {
		rc = mm_check_file(c, c->a[4], type, prot, &host, &shm);
		if (rc)
			return rc;
	}
	if (shm)
		lx_shm_lock();
	pthread_mutex_lock(&c->p->lock);
	addr = mm_place(c->p, hint, len, flags);
	if (addr < 0)
		goto out;
	if (shm) {
		rc = mm_shm_map(c->p, (uint64_t)addr, len, host, off, &v);
		if (rc) {
			addr = rc;
			goto out;
		}
	} else if (!anon) {
		v.kind = VMA_FILE;
		v.file_off = off;
		v.file_id = mm_file_id(c->p, host);
		rc = v.file_id < 0 ? v.file_id : mm_read_file(c->p, host, (uint64_t)addr, len, off);
		if (rc) {
			addr = rc;
			goto out;
		}
	}
	rc = vma_insert(&c->p->mm.map, (uint64_t)addr, (uint64_t)addr + len, &v);
	if (rc)
		addr = rc;
out:
	pthread_mutex_unlock(&c->p->lock);
	if (shm)
		lx_shm_unlock();
	return addr;
}

/* Clip [start, start + len) to user RAM; a range wholly outside it holds nothing. */
static void mm_clip(struct lx_proc *p, uint64_t *start, uint64_t *end)
{
	if (*start < LAYOUT_USER_BASE)
		*start = LAYOUT_USER_BASE;
	if (*end > p->mem->size)
		*end = p->mem->size;
	if (*end < *start)
		*end = *start;
}

int64_t sys_munmap(struct lx_call *c)
{
	uint64_t start = c->a[0], len = c->a[1], end;
	int rc;

	if (start % PAGE_SIZE || !len || len > (1ULL << 47))
		return -EINVAL;
	end = start + page_up(len);
	mm_clip(c->p, &start, &end);
	pthread_mutex_lock(&c->p->lock);
	rc = lx_mm_discard(c->p, start, end);
	pthread_mutex_unlock(&c->p->lock);
	return rc;
}

/* [start, start + len) for mprotect/madvise: page aligned, inside user RAM, wholly
 * mapped. Returns 0 with *end set, or -EINVAL / -ENOMEM as Linux does. Caller holds
 * p->lock. */
static int mm_mapped_range(struct lx_proc *p, uint64_t start, uint64_t len, uint64_t *end)
{
	if (start % PAGE_SIZE)
		return -EINVAL;
	if (len > p->mem->size)
		return -ENOMEM;
	*end = start + page_up(len);
	if (*end == start)
		return 0;
	if (!mm_user_range(p, start, *end - start) || !vma_range_mapped(&p->mm.map, start, *end))
		return -ENOMEM;
	return 0;
}

int64_t sys_mprotect(struct lx_call *c)
{
	uint64_t start = c->a[0], end, at;
	int rc;

	pthread_mutex_lock(&c->p->lock);
	rc = mm_mapped_range(c->p, start, c->a[1], &end);
	for (at = start; at < end && !rc;) {
		struct vma piece = *vma_find(&c->p->mm.map, at);
		uint64_t piece_end = piece.end < end ? piece.end : end;

		if (VMA_HAS_FILE(piece.kind))
			piece.file_off += at - piece.start;
		piece.prot = (uint32_t)c->a[2];
		rc = vma_insert(&c->p->mm.map, at, piece_end, &piece);
		at = piece_end;
	}
	pthread_mutex_unlock(&c->p->lock);
	return rc;
}

/* MADV_DONTNEED on one mapping piece: anonymous memory reads as zero afterwards, a
 * private file mapping reads as the file again (what Linux does). */
static int mm_dontneed(struct lx_proc *p, uint64_t start, uint64_t end)
{
	struct vma piece = *vma_find(&p->mm.map, start);
	int rc;

	if (piece.kind == VMA_SHM)
		return 0; /* its bytes are the file's: they stay */
	rc = mm_discard_pages(p, start, end - start);
	if (rc || piece.kind != VMA_FILE)
		return rc;
	if (p->mfiles[piece.file_id] < 0)
		return 0; /* the file was not found again after a restore: zeroes it is */
	return mm_read_file(p, p->mfiles[piece.file_id], start, end - start,
			    piece.file_off + (start - piece.start));
}

int64_t sys_madvise(struct lx_call *c)
{
	uint64_t start = c->a[0], advice = c->a[2], end, at;
	int rc;

	if (advice >= 64 || !((MM_KNOWN_ADVICE_MASK | (1ULL << MADV_DONTNEED)) & (1ULL << advice)))
		return -EINVAL;
	pthread_mutex_lock(&c->p->lock);
	rc = mm_mapped_range(c->p, start, c->a[1], &end);
	for (at = start; advice == MADV_DONTNEED && at < end && !rc;) {
		struct vma *v = vma_find(&c->p->mm.map, at);
		uint64_t piece_end = v->end < end ? v->end : end;

		rc = mm_dontneed(c->p, at, piece_end);
		at = piece_end;
	}
	pthread_mutex_unlock(&c->p->lock);
	return rc;
}

/* A shared mapping @v grown to end at @end: [from, end) maps its file's bytes there,
 * as far as the file goes (an anonymous one's does not grow: Linux raises SIGBUS past
 * it, ccvm leaves zeros of the process's own). */
static int mm_shm_extend(struct lx_proc *p, const struct vma *v, uint64_t from, uint64_t end)
{
	int host = p->mfiles[v->file_id];

	if (host < 0)
		return -EBADF;
	return lx_shm_alias(p, from, end, host, v->file_off + (from - v->start));
}

/* Move [old, old + len) to @to: copy the contents (a shared mapping maps its file there
 * instead), then give the old range back. */
static int mm_move(struct lx_proc *p, struct vma *v, uint64_t old, uint64_t old_len, uint64_t to,
		   uint64_t new_len)
{
	struct vma moved = *v;
	uint8_t *src = gmem_user_ptr(p->mem, old, old_len);
	uint8_t *dst = gmem_user_ptr(p->mem, to, new_len);
	int rc;

	if (!src || !dst)
		return -EFAULT;
	if (VMA_HAS_FILE(moved.kind))
		moved.file_off += old - v->start;
	rc = lx_mm_discard(p, to, to + new_len);
	if (rc)
		return rc;
	if (moved.kind == VMA_SHM) {
		moved.start = to;
		rc = mm_shm_extend(p, &moved, to, to + new_len);
		if (rc)
			return rc;
	} else {
		memmove(dst, src, old_len < new_len ? old_len : new_len);
	}
	rc = vma_insert(&p->mm.map, to, to + new_len, &moved);
	if (rc)
		return rc;
	/* The old range may overlap the new one only with MREMAP_FIXED; discard what
	 * is not part of the new mapping. */
	if (old < to)
		rc = lx_mm_discard(p, old, old + old_len < to ? old + old_len : to);
	if (!rc && old + old_len > to + new_len)
		rc = lx_mm_discard(p, old > to + new_len ? old : to + new_len, old + old_len);
	return rc;
}

static int64_t mm_remap(struct lx_proc *p, uint64_t old, uint64_t old_len, uint64_t new_len,
			uint64_t flags, uint64_t new_addr)
{
	struct vma *v = vma_find(&p->mm.map, old);
	uint64_t to;
	int rc;

	if (!v || old + old_len > v->end)
		return -EFAULT;
	if (flags & MREMAP_FIXED) {
		if (new_addr % PAGE_SIZE)
			return -EINVAL;
		if (!mm_user_range(p, new_addr, new_len))
			return -ENOMEM;
		if (new_addr < old + old_len && old < new_addr + new_len)
			return -EINVAL;
		rc = mm_move(p, v, old, old_len, new_addr, new_len);
		return rc ? rc : (int64_t)new_addr;
	}
	if (new_len <= old_len) {
		rc = lx_mm_discard(p, old + new_len, old + old_len);
		return rc ? rc : (int64_t)old;
	}
	if (old + old_len == v->end && mm_user_range(p, old, new_len) &&
	    vma_range_free(&p->mm.map, old + old_len, old + new_len)) {
		struct vma grown = *v;

		if (grown.kind == VMA_SHM && (rc = mm_shm_extend(p, &grown, old + old_len,
								 old + new_len)))
			return rc;
		rc = vma_insert(&p->mm.map, v->start, old + new_len, &grown);
		return rc ? rc : (int64_t)old;
	}
	if (!(flags & MREMAP_MAYMOVE))
		return -ENOMEM;
	rc = vma_find_free(&p->mm.map, new_len, p->mm.mmap_top, PAGE_SIZE, &to);
	if (rc)
		return rc;
	rc = mm_move(p, v, old, old_len, to, new_len);
	return rc ? rc : (int64_t)to;
}

int64_t sys_mremap(struct lx_call *c)
{
	uint64_t old = c->a[0], old_len = page_up(c->a[1]), new_len = page_up(c->a[2]);
	uint64_t flags = c->a[3];
	int64_t rc;

	if (old % PAGE_SIZE || !new_len || (flags & ~(uint64_t)(MREMAP_MAYMOVE | MREMAP_FIXED)))
		return -EINVAL;
	if ((flags & MREMAP_FIXED) && !(flags & MREMAP_MAYMOVE))
		return -EINVAL;
	if (!old_len)
		return -EINVAL; /* duplicating a shared mapping: not for private memory */
	if (new_len > c->p->mem->size)
		return -ENOMEM;
	lx_shm_lock(); /* a shared mapping may grow over its file */
	pthread_mutex_lock(&c->p->lock);
	rc = mm_remap(c->p, old, old_len, new_len, flags, c->a[4]);
	pthread_mutex_unlock(&c->p->lock);
	lx_shm_unlock();
	return rc;
}

int64_t sys_brk(struct lx_call *c)
{
	struct lx_mm *mm = &c->p->mm;
	uint64_t want = c->a[0], old_end, new_end;
	struct vma heap = { .prot = PROT_READ | PROT_WRITE, .kind = VMA_BRK };
	int64_t ret;

	pthread_mutex_lock(&c->p->lock);
	ret = (int64_t)mm->brk;
	if (want < mm->brk_start || want > c->p->mem->size)
		goto out;
	old_end = page_up(mm->brk);
	new_end = page_up(want);
	if (new_end > old_end) {
		if (!vma_range_free(&mm->map, old_end, new_end) || new_end > mm->mmap_top)
			goto out; /* would run into another mapping: Linux refuses too */
		if (vma_insert(&mm->map, mm->brk_start, new_end, &heap))
			goto out;
	} else if (new_end < old_end) {
		if (lx_mm_discard(c->p, new_end, old_end))
			goto out;
	}
	mm->brk = want;
	ret = (int64_t)want;
out:
	pthread_mutex_unlock(&c->p->lock);
	return ret;
}

int64_t sys_memfd_create(struct lx_call *c)
{
	char name[MM_MEMFD_NAME_MAX + 1];
	uint64_t flags = c->a[1];
	int rc = gmem_copy_str(c->p->mem, name, c->a[0], sizeof(name), NULL), host;

	if (rc)
		return rc == -ENAMETOOLONG ? -EINVAL : rc;
	if (flags & MFD_HUGETLB) {
		if (lx_first_time(c))
			log_warn("guest asked for a memfd of huge pages; not supported (returning "
				 "EINVAL)");
		return -EINVAL;
	}
	if (flags & ~(uint64_t)MM_MFD_KNOWN)
		return -EINVAL;
	host = memfd_create(name, (unsigned)flags | MFD_CLOEXEC);
	if (host < 0)
		return -errno;
	return lx_install(c, host, 0, flags & MFD_CLOEXEC);
}

/*
 * gmem.c - guest RAM and the one checked translation from guest addresses.
 *
 * Guest RAM is a single anonymous MAP_NORESERVE mapping, aligned to 2 MiB and advised
 * MADV_HUGEPAGE so the host backs it with transparent huge pages (first touch is ~30x
 * faster with THP on our machines, and write-protecting it later is ~200x faster).
 * It becomes one KVM memslot at guest-physical 0. Every address the guest hands the
 * monitor goes through gmem_user_ptr(), which refuses anything outside user RAM:
 * this is what keeps a guest from steering the monitor at its own memory.
 *
 * Guest structures, strings and lengths are read with gmem_copy_in/gmem_copy_str
 * exactly once into monitor memory (other vCPUs may rewrite them mid-call), and small
 * results go back with gmem_copy_out. The bulk paths that touch guest RAM in place
 * through gmem_user_ptr() by design are named in gmem.h.
 *
 * A process of a VM with several sees guest memory through a view: its window of
 * guest-physical memory (docs/processes.md). A block it shares with another process
 * is read where it lies and made its own before anything writes it in place; while
 * it shares nothing, a view costs an addition.
 */
#include "gmem.h"
#include "layout.h"
#include "../base/log.h"
#include "../base/x86.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static void gmem_advise(uint8_t *at, uint64_t len, bool huge);

/**
 * gmem_map - reserve guest RAM.
 * @mem:  filled on success
 * @size: bytes, a multiple of 2 MiB between LAYOUT_MIN_RAM and LAYOUT_MAX_RAM
 *
 * Returns 0, -EINVAL for a bad size, or -errno from mmap.
 */
int gmem_map(struct gmem *mem, uint64_t size)
{
	return gmem_map_windows(mem, size, 1);
}

int gmem_map_windows(struct gmem *mem, uint64_t window, int n)
{
	uint64_t size = window * (uint64_t)n;
	uint8_t *base, *aligned;
	size_t len;

	memset(mem, 0, sizeof(*mem));
	if (window < LAYOUT_MIN_RAM || window > LAYOUT_MAX_RAM || window % HUGE_SIZE || n < 1 ||
	    n > GMEM_MAX_WINDOWS)
		return -EINVAL;
	len = size + HUGE_SIZE; /* slack to align the start to 2 MiB */
	base = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	aligned = (uint8_t *)(((uintptr_t)base + HUGE_SIZE - 1) & ~(uintptr_t)(HUGE_SIZE - 1));
	if (madvise(aligned, size, MADV_HUGEPAGE) < 0)
		log_debug("madvise(MADV_HUGEPAGE) on guest RAM: %s (continuing with 4 KiB pages)",
			  strerror(errno));
	/* Guest RAM must not leak into a core dump of the monitor, nor be copied by a fork. */
	gmem_advise(aligned, size, false);
	pthread_mutex_init(&mem->lock, NULL);
	mem->host = aligned;
	mem->size = size;
	mem->map_base = base;
	mem->map_len = len;
	return 0;
}

void gmem_unmap(struct gmem *mem)
{
	if (mem->map_base)
		munmap(mem->map_base, mem->map_len);
	memset(mem, 0, sizeof(*mem));
}

void gmem_view(struct gmem *view, struct gmem *root, uint64_t base, uint64_t size,
	       const struct gmem_cow *cow)
{
	memset(view, 0, sizeof(*view));
	view->host = root->host + base;
	view->size = size;
	view->root = root;
	view->base = base;
	view->cow = cow;
}

/* The guest memory a view is of (itself for guest memory). */
static struct gmem *gmem_phys(const struct gmem *mem)
{
	return mem->root ? mem->root : (struct gmem *)mem;
}

/* Does @mem share blocks that must be looked up or made its own? */
bool gmem_is_shared(const struct gmem *mem)
{
	return mem->cow && !mem->cow->alone(mem->cow->ctx);
}

/* Pages [gpa, gpa + len) of @mem may be written by the monitor: marked while a
 * pre-copy runs. */
static void gmem_mark(const struct gmem *mem, uint64_t gpa, uint64_t len)
{
	const struct gmem *phys = gmem_phys(mem);
	uint64_t *bits = __atomic_load_n(&phys->written, __ATOMIC_ACQUIRE);
	uint64_t last;

	if (!bits || !len)
		return;
	gpa += mem->base;
	/* Only the memory the pre-copy runs over has bits: other windows are not its. */
	last = (gpa + len - 1) / PAGE_SIZE;
	if (last >= phys->written_pages)
		last = phys->written_pages - 1;
	for (uint64_t p = gpa / PAGE_SIZE; p <= last; p++)
		__atomic_fetch_or(&bits[p / 64], 1ULL << (p % 64), __ATOMIC_RELEASE);
}

void gmem_mark_held(const struct gmem *view)
{
	const struct gmem *mem = gmem_phys(view);

	for (int i = 0; i < mem->n_held; i++)
		gmem_mark(mem, mem->held[i].gpa, mem->held[i].len);
}

static void gmem_mark_span(const struct gmem *mem, const struct gmem_span *s)
{
	for (int i = 0; i < s->n; i++)
		gmem_mark(mem, s->gpa[i], s->end[i] - s->gpa[i]);
}

void gmem_mark_start(struct gmem *view, uint64_t *bits)
{
	struct gmem *mem = gmem_phys(view);

	pthread_mutex_lock(&mem->lock);
	mem->written_pages = (view->base + view->size) / PAGE_SIZE;
	__atomic_store_n(&mem->written, bits, __ATOMIC_RELEASE);
	gmem_mark_held(mem);
	for (struct gmem_span *s = mem->waiting; s; s = s->next)
		gmem_mark_span(mem, s);
	pthread_mutex_unlock(&mem->lock);
}

void gmem_span_add(const struct gmem *mem, struct gmem_span *s, uint64_t gva, uint64_t len)
{
	const int last = GMEM_SPAN_RANGES - 1;

	if (!len)
		return;
	gva += mem->base; /* from here on a guest-physical address */
	if (s->n < GMEM_SPAN_RANGES) {
		s->gpa[s->n] = gva;
		s->end[s->n++] = gva + len;
		return;
	}
	/* full: the last range grows (more pages marked, never fewer) */
	if (gva < s->gpa[last])
		s->gpa[last] = gva;
	if (gva + len > s->end[last])
		s->end[last] = gva + len;
}

void gmem_wait_begin(struct gmem *view, struct gmem_span *s)
{
	struct gmem *mem = gmem_phys(view);

	pthread_mutex_lock(&mem->lock);
	gmem_mark_span(mem, s); /* a pre-copy that started already does not look again */
	if (s->listed) {
		pthread_mutex_unlock(&mem->lock);
		return;
	}
	s->listed = true;
	s->prev = NULL;
	s->next = mem->waiting;
	if (mem->waiting)
		mem->waiting->prev = s;
	mem->waiting = s;
	pthread_mutex_unlock(&mem->lock);
}

void gmem_wait_end(struct gmem *view, struct gmem_span *s)
{
	struct gmem *mem = gmem_phys(view);

	pthread_mutex_lock(&mem->lock);
	if (!s->listed) {
		pthread_mutex_unlock(&mem->lock);
		return;
	}
	s->listed = false;
	if (s->prev)
		s->prev->next = s->next;
	else if (mem->waiting == s)
		mem->waiting = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
	pthread_mutex_unlock(&mem->lock);
}

void gmem_waiting_blocks(struct gmem *view, uint64_t from, uint64_t len, uint64_t block,
			 uint64_t *bits)
{
	struct gmem *mem = gmem_phys(view);

	memset(bits, 0, (len / block + 63) / 64 * sizeof(*bits));
	pthread_mutex_lock(&mem->lock);
	for (struct gmem_span *s = mem->waiting; s; s = s->next) {
		for (int i = 0; i < s->n; i++) {
			uint64_t lo = s->gpa[i] > from ? s->gpa[i] : from;
			uint64_t hi = s->end[i] < from + len ? s->end[i] : from + len;

			for (uint64_t at = lo; at < hi; at = (at / block + 1) * block)
				bits[(at - from) / block / 64] |= 1ULL << ((at - from) / block % 64);
		}
	}
	pthread_mutex_unlock(&mem->lock);
}

void gmem_mark_stop(struct gmem *view)
{
	__atomic_store_n(&gmem_phys(view)->written, NULL, __ATOMIC_RELEASE);
}

/* The checks alone: a host pointer, nothing marked (reads into the monitor). */
static void *gmem_sys_at(const struct gmem *mem, uint64_t gpa, uint64_t len)
{
	if (gpa > mem->size || len > mem->size - gpa)
		return NULL;
	return mem->host + gpa;
}

void *gmem_sys_ptr(const struct gmem *mem, uint64_t gpa, uint64_t len)
{
	void *p = gmem_sys_at(mem, gpa, len);

	if (p)
		gmem_mark(mem, gpa, len);
	return p;
}

bool gmem_user_range_ok(const struct gmem *mem, uint64_t gva, uint64_t len)
{
	return gva >= LAYOUT_USER_BASE && gva <= mem->size && len <= mem->size - gva;
}

static void *gmem_user_at(const struct gmem *mem, uint64_t gva, uint64_t len)
{
	if (!gmem_user_range_ok(mem, gva, len))
		return NULL;
	return mem->host + gva;
}

/* Whoever asks for a pointer may write through it (the bulk paths in gmem.h): made the
 * view's own, and marked. */
void *gmem_user_ptr(const struct gmem *mem, uint64_t gva, uint64_t len)
{
	void *p = gmem_user_at(mem, gva, len);

	if (p && gmem_is_shared(mem) && mem->cow->own(mem->cow->ctx, gva, len))
		return NULL;
	if (p)
		gmem_mark(mem, gva, len);
	return p;
}

void *gmem_user_ptr_held(struct gmem *view, uint64_t gva, uint64_t len)
{
	void *p = gmem_user_ptr(view, gva, len);
	struct gmem *mem = gmem_phys(view);
	int i;

	/* Held ranges are the root's, guest-physical: window 0's, where guest addresses
	 * are guest-physical, and the only one pre-copies see (docs/processes.md). */
	if (!p || view->base)
		return p;
	for (i = 0; i < mem->n_held; i++)
		if (mem->held[i].gpa == gva && mem->held[i].len == len)
			return p;
	if (mem->n_held == GMEM_HELD_MAX) {
		log_err("more than %d guest ranges held by the monitor: a pre-copy would miss "
			"its writes there", GMEM_HELD_MAX);
		return NULL;
	}
	mem->held[mem->n_held].gpa = gva;
	mem->held[mem->n_held].len = len;
	mem->n_held++;
	return p;
}

/* [gva, gva + len) of @mem, checked, into @dst: from where each block's bytes are. */
static void gmem_read(const struct gmem *mem, void *dst, uint64_t gva, uint64_t len)
{
	const struct gmem *phys = gmem_phys(mem);

	if (!gmem_is_shared(mem)) {
		memcpy(dst, mem->host + gva, len);
		return;
	}
	while (len) {
		uint64_t n = HUGE_SIZE - gva % HUGE_SIZE;
		int64_t gpa = mem->cow->where(mem->cow->ctx, gva);

		if (n > len)
			n = len;
		/* where() only fails outside user memory, which the caller ruled out */
		memcpy(dst, gpa < 0 ? mem->host + gva : phys->host + gpa, n);
		dst = (uint8_t *)dst + n;
		gva += n;
		len -= n;
	}
}

int gmem_copy_in(const struct gmem *mem, void *dst, uint64_t gva, uint64_t len)
{
	if (!gmem_user_at(mem, gva, len))
		return -EFAULT;
	gmem_read(mem, dst, gva, len);
	return 0;
}

int gmem_copy_out(const struct gmem *mem, uint64_t gva, const void *src, uint64_t len)
{
	void *dst = gmem_user_ptr(mem, gva, len);

	if (!dst)
		return -EFAULT;
	memcpy(dst, src, len);
	return 0;
}

/* Chunks keep a short path from costing a PATH_MAX copy; the NUL is looked for in
 * the monitor's copy, never in guest memory, so what was checked is what is used. */
#define GMEM_STR_CHUNK 256

int gmem_copy_str(const struct gmem *mem, char *dst, uint64_t gva, size_t max, size_t *len)
{
	uint64_t avail;
	size_t done = 0;

	if (!gmem_user_range_ok(mem, gva, 1))
		return -EFAULT;
	avail = mem->size - gva;
	while (done < max) {
		size_t n = max - done < GMEM_STR_CHUNK ? max - done : GMEM_STR_CHUNK;
		const char *nul;

		if (done >= avail)
			return -EFAULT;
		if (n > avail - done)
			n = (size_t)(avail - done);
		gmem_read(mem, dst + done, gva + done, n);
		nul = memchr(dst + done, '\0', n);
		if (nul) {
			if (len)
				*len = (size_t)(nul - dst);
			return 0;
		}
		done += n;
	}
	return -ENAMETOOLONG;
}

int gmem_discard(struct gmem *mem, uint64_t gpa, uint64_t len)
{
	if (gpa % PAGE_SIZE || len % PAGE_SIZE || !gmem_sys_at(mem, gpa, len))
		return -EINVAL;
	/* Others keep the bytes of a shared block (gmem_cow's drop). */
	if (len && gmem_is_shared(mem) && mem->cow->drop(mem->cow->ctx, gpa, len))
		return -EINVAL;
	gmem_mark(mem, gpa, len); /* it reads as zero from now on */
	if (len && madvise(mem->host + gpa, len, MADV_DONTNEED) < 0)
		return -errno;
	return 0;
}

/* What every host range of guest RAM is advised (gmem_map_windows says why), again
 * after a range was mapped anew. */
static void gmem_advise(uint8_t *at, uint64_t len, bool huge)
{
	if (huge)
		madvise(at, len, MADV_HUGEPAGE);
	madvise(at, len, MADV_DONTDUMP);
	madvise(at, len, MADV_DONTFORK);
}

/* Make [gpa, gpa + len) of a view its own before its host range is mapped anew (a
 * shared block's bytes stay with the others). */
static int gmem_remap_prepare(struct gmem *mem, uint64_t gpa, uint64_t len)
{
	if (gpa % PAGE_SIZE || len % PAGE_SIZE || !len || !gmem_sys_at(mem, gpa, len))
		return -EINVAL;
	if (gmem_is_shared(mem) && mem->cow->own(mem->cow->ctx, gpa, len))
		return -EINVAL;
	gmem_mark(mem, gpa, len);
	return 0;
}

/* [gpa, gpa + len) of @mem's window private zero memory, mapped anew. */
static int gmem_anon(struct gmem *mem, uint64_t gpa, uint64_t len)
{
	if (mmap(mem->host + gpa, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
		return -errno;
	gmem_advise(mem->host + gpa, len, true);
	return 0;
}

int gmem_alias(struct gmem *mem, uint64_t gpa, uint64_t len, int fd, uint64_t off)
{
	int rc = gmem_remap_prepare(mem, gpa, len);

	if (rc)
		return rc;
	/* One byte of each 2 MiB read first (private memory still: nothing shared is ever
	 * mapped twice over): a lazy restore still registered there loads that chunk now,
	 * for it could not fill a range mapped anew under it. */
	for (uint64_t at = gpa; at < gpa + len; at = (at | (HUGE_SIZE - 1)) + 1)
		(void)*(volatile uint8_t *)(mem->host + at);
	if (mmap(mem->host + gpa, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		 (off_t)off) == MAP_FAILED) {
		rc = -errno;
		/* A failed MAP_FIXED may have unmapped the range: private zero memory there
		 * again, which is what it held (a range being mapped reads as zero). */
		gmem_anon(mem, gpa, len);
		return rc;
	}
	gmem_advise(mem->host + gpa, len, false);
	return 0;
}

int gmem_unalias(struct gmem *mem, uint64_t gpa, uint64_t len)
{
	int rc = gmem_remap_prepare(mem, gpa, len);

	return rc ? rc : gmem_anon(mem, gpa, len);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; our build headers may predate it */
#endif

void gmem_collapse(struct gmem *mem, uint64_t gpa, uint64_t len)
{
	if (gmem_sys_at(mem, gpa, len))
		madvise(mem->host + gpa, len, MADV_COLLAPSE);
}

int gmem_populate(struct gmem *mem, uint64_t gpa, uint64_t len)
{
	uint8_t *p = gmem_sys_at(mem, gpa, len);

	if (!p || gpa % PAGE_SIZE || len % PAGE_SIZE)
		return -EINVAL;
	return pages_populate(p, len);
}

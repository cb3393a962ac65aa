/*
 * vma.c - address-range allocation inside guest user RAM.
 *
 * The guest's page tables map all of RAM once and never change; "mapping" memory is
 * therefore bookkeeping: this sorted array says which ranges the guest program owns
 * and what they hold, so that mmap can find free space, munmap/madvise know what to
 * discard, and a snapshot can record the memory map. A few hundred entries at most
 * in practice, so a sorted array with memmove beats a tree on simplicity and speed.
 */
#include "vma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void vma_map_init(struct vma_map *m, uint64_t lo, uint64_t hi)
{
	memset(m, 0, sizeof(*m));
	m->lo = lo;
	m->hi = hi;
}

void vma_map_free(struct vma_map *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

int vma_map_copy(struct vma_map *dst, const struct vma_map *src)
{
	vma_map_init(dst, src->lo, src->hi);
	if (!src->n)
		return 0;
	dst->v = malloc((size_t)src->n * sizeof(*dst->v));
	if (!dst->v)
		return -ENOMEM;
	memcpy(dst->v, src->v, (size_t)src->n * sizeof(*dst->v));
	dst->n = dst->cap = src->n;
	return 0;
}

static int vma_reserve(struct vma_map *m, int extra)
{
	struct vma *nv;
	int cap;

	if (m->n + extra <= m->cap)
		return 0;
	cap = m->cap ? m->cap * 2 : 32;
	while (cap < m->n + extra)
		cap *= 2;
	nv = realloc(m->v, (size_t)cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	m->v = nv;
	m->cap = cap;
	return 0;
}

/* Index of the first mapping whose end is above @addr. */
static int vma_first_after(const struct vma_map *m, uint64_t addr)
{
	int lo = 0, hi = m->n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (m->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int vma_index_at(const struct vma_map *m, uint64_t addr)
{
	return vma_first_after(m, addr);
}

static void vma_advance_file(struct vma *v, uint64_t new_start)
{
	if (VMA_HAS_FILE(v->kind))
		v->file_off += new_start - v->start;
	v->start = new_start;
}

int vma_remove(struct vma_map *m, uint64_t start, uint64_t end)
{
	int i = vma_first_after(m, start);

	if (start >= end)
		return 0;
	if (i < m->n && m->v[i].start < start && m->v[i].end > end) {
		/* A hole in the middle of one mapping: split it in two. */
		if (vma_reserve(m, 1))
			return -ENOMEM;
		memmove(&m->v[i + 1], &m->v[i], (size_t)(m->n - i) * sizeof(m->v[0]));
		m->n++;
		m->v[i].end = start;
		vma_advance_file(&m->v[i + 1], end);
		return 0;
	}
	if (i < m->n && m->v[i].start < start) {
		m->v[i].end = start;
		i++;
	}
	int j = i;
	while (j < m->n && m->v[j].end <= end)
		j++;
	if (j < m->n && m->v[j].start < end)
		vma_advance_file(&m->v[j], end);
	memmove(&m->v[i], &m->v[j], (size_t)(m->n - j) * sizeof(m->v[0]));
	m->n -= j - i;
	return 0;
}

/* Two neighbours that describe one continuous mapping become one entry, so that
 * mprotect and brk churn do not grow the map without bound. */
static bool vma_mergeable(const struct vma *a, const struct vma *b)
{
	if (a->end != b->start || a->kind != b->kind || a->prot != b->prot || a->flags != b->flags)
		return false;
	if (VMA_HAS_FILE(a->kind))
		return a->file_id == b->file_id && a->file_off + (a->end - a->start) == b->file_off;
	return true;
}

static void vma_merge_at(struct vma_map *m, int i)
{
	if (i + 1 < m->n && vma_mergeable(&m->v[i], &m->v[i + 1])) {
		m->v[i].end = m->v[i + 1].end;
		memmove(&m->v[i + 1], &m->v[i + 2], (size_t)(m->n - i - 2) * sizeof(m->v[0]));
		m->n--;
	}
	if (i > 0 && vma_mergeable(&m->v[i - 1], &m->v[i])) {
		m->v[i - 1].end = m->v[i].end;
		memmove(&m->v[i], &m->v[i + 1], (size_t)(m->n - i - 1) * sizeof(m->v[0]));
		m->n--;
	}
}

int vma_insert(struct vma_map *m, uint64_t start, uint64_t end, const struct vma *proto)
{
	int rc, i;

	if (start >= end)
		return -EINVAL;
	rc = vma_reserve(m, 2);
	if (rc)
		return rc;
	rc = vma_remove(m, start, end);
	if (rc)
		return rc;
	i = vma_first_after(m, start);
	memmove(&m->v[i + 1], &m->v[i], (size_t)(m->n - i) * sizeof(m->v[0]));
	m->v[i] = *proto;
	m->v[i].start = start;
	m->v[i].end = end;
	m->n++;
	vma_merge_at(m, i);
	return 0;
}

struct vma *vma_find(struct vma_map *m, uint64_t addr)
{
	int i = vma_first_after(m, addr);

	if (i < m->n && m->v[i].start <= addr)
		return &m->v[i];
	return NULL;
}

bool vma_range_free(const struct vma_map *m, uint64_t start, uint64_t end)
{
	int i = vma_first_after(m, start);

	return i >= m->n || m->v[i].start >= end;
}

bool vma_range_mapped(const struct vma_map *m, uint64_t start, uint64_t end)
{
	int i = vma_first_after(m, start);
	uint64_t at = start;

	for (; i < m->n && at < end; i++) {
		if (m->v[i].start > at)
			return false;
		at = m->v[i].end;
	}
	return at >= end;
}

uint64_t vma_next_start(const struct vma_map *m, uint64_t addr)
{
	int i = vma_first_after(m, addr);

	if (i < m->n)
		return m->v[i].start > addr ? m->v[i].start : addr;
	return m->hi;
}

int vma_find_free(const struct vma_map *m, uint64_t len, uint64_t below, uint64_t align,
		  uint64_t *addr)
{
	uint64_t gap_end = below > m->hi ? m->hi : below;
	int i = vma_first_after(m, gap_end);

	if (!len || !align || (align & (align - 1)))
		return -EINVAL;
	/* Walk gaps from the top down: between mapping i-1 and min(mapping i, gap_end). */
	for (;;) {
		uint64_t gap_start = i > 0 ? m->v[i - 1].end : m->lo;
		uint64_t end = gap_end;

		if (i < m->n && m->v[i].start < end)
			end = m->v[i].start;
		if (gap_start < m->lo)
			gap_start = m->lo;
		if (end > gap_start && end - gap_start >= len) {
			uint64_t a = (end - len) & ~(align - 1);

			if (a >= gap_start) {
				*addr = a;
				return 0;
			}
		}
		if (i == 0)
			return -ENOMEM;
		i--;
		gap_end = m->v[i].start;
	}
}

static void vma_blocks(const struct vma_map *m, int kind, uint64_t block, uint64_t *bits,
		       uint32_t n)
{
	memset(bits, 0, (n + 63) / 64 * sizeof(*bits));
	for (int i = 0; i < m->n; i++) {
		uint64_t first = m->v[i].start / block, last = (m->v[i].end - 1) / block;

		if (kind >= 0 && m->v[i].kind != (enum vma_kind)kind)
			continue;
		for (uint64_t b = first; b <= last && b < n; b++)
			bits[b / 64] |= 1ULL << (b % 64);
	}
}

void vma_map_blocks(const struct vma_map *m, uint64_t block, uint64_t *bits, uint32_t n)
{
	vma_blocks(m, -1, block, bits, n);
}

void vma_map_blocks_of(const struct vma_map *m, enum vma_kind kind, uint64_t block, uint64_t *bits,
		       uint32_t n)
{
	vma_blocks(m, (int)kind, block, bits, n);
}

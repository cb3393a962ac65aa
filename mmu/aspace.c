/*
 * aspace.c - the address spaces of a VM's processes.
 *
 * Each process has a window of guest-physical memory as large as the RAM a VM with
 * one process had, window w at w * window, and page tables in that window's system
 * area that map virtual [0, window) with 2 MiB pages. Below LAYOUT_USER_BASE every
 * process maps window 0's system and stub areas (one GDT, IDT, TSSes and stubs for all);
 * above, block b of virtual space is block b of the process's own window, so the
 * monitor reaches a process's memory at one host address plus the guest address, as
 * it always did. Window 0 maps RAM to itself: a VM with one process is unchanged.
 *
 * A fork shares instead of copying: the child maps the parent's blocks read-only, and
 * so does the parent from then on. The first write on either side faults, and the
 * writer gets the block for itself: a child copies it into its own window, a parent
 * first gives each reader its own copy. 2 MiB at a time: on our hosts an exit costs
 * ~77 us and a 2 MiB copy ~0.15-0.7 ms, while 512 exits for its 4 KiB pages would
 * cost ~40 ms (docs/processes.md). The data of a block stays in the window of the
 * space that wrote it last; a reader always maps the window that holds its data, and
 * that space maps it too (the invariant the unit tests check).
 *
 * Page tables are written once (aspace.h says why): a change writes fresh tables and
 * moves the space's CR3. Nothing here runs a vCPU: the spaces whose CR3 moved go to
 * the set's flush callback before the change is done, and the VM has their vCPUs
 * leave the old tables. Each window's pool of table pages is used one half at a time:
 * when a half runs out, every space is written afresh in the other half (never used
 * since KVM last forgot its tables), the vCPUs leave the old half, and the VM makes KVM
 * forget every translation (s->recycle), after which the old half may serve again.
 *
 * Memory is charged a block at a time (aspace.h): s->backed marks the window blocks
 * that may hold bytes. A block that does not is zero and its host pages untouched, so
 * a fork need not share it, a hold need not save it, and a lazy space maps it not
 * present: its first touch faults to the monitor, which charges it then. Every way
 * bytes reach a window passes here (a claim, a copy, a restore's fill), so the charge
 * bounds the host memory the windows take. A write by a block's owner never fails
 * for its readers' sake: it first gives each reader its copy, charged, and a reader
 * whose copy does not fit loses the block instead (s->lost: not present, and its next
 * touch is the program's SIGBUS), as the kernel's OOM killer ends a child rather
 * than its parent.
 */
#include "aspace_impl.h"
#include "../base/x86.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ASPACE_PD_ENTRIES 512                            /* 2 MiB entries per directory */

/* Block @b of window @w may hold bytes from now on: charged (the caller checked the
 * budget, or gives back at least as much at once: as_hand_over). */
void as_back(struct aspace_set *s, int w, uint32_t b)
{
	if (as_backed(s, w, b))
		return;
	s->backed[(size_t)w * s->blocks + b] = 1;
	s->n_backed++;
}

/* Every user block of window @w given back: its memory was just wiped. */
static void as_unback(struct aspace_set *s, int w)
{
	for (uint32_t b = ASPACE_USER_BLOCK; b < s->blocks; b++)
		if (as_backed(s, w, b)) {
			s->backed[(size_t)w * s->blocks + b] = 0;
			s->n_backed--;
		}
}

/* @need more blocks may be charged. */
bool as_fits(const struct aspace_set *s, uint64_t need)
{
	return s->budget == ASPACE_NO_BUDGET || (uint64_t)s->n_backed + need <= s->budget;
}

/* Block @b of window @w stops being a snapshot's: saved first if it still was. */
void as_unhold(struct aspace_set *s, int w, uint32_t b)
{
	if (!as_held(s, w, b))
		return;
	s->hold_copy(s->hold_ctx, w, b);
	s->held[(size_t)w * s->blocks + b] = 0;
	s->n_held--;
}

/* The window holding block @b's data for @as. */
static int as_home(const struct aspace *as, uint32_t b)
{
	return as->src[b] == ASPACE_OWN ? as->win : as->src[b];
}

/* Set @as's entry for block @b from its state (as_commit writes it out): writable only
 * when its own and read by nobody else; not present when its own and never backed. */
void as_put(struct aspace *as, uint32_t b)
{
	const struct aspace_set *s = as->set;
	uint64_t gva = (uint64_t)b * HUGE_SIZE, pde;
	bool shared = false, absent = false;

	if (b < ASPACE_USER_BLOCK) {
		pde = pt_sys_entry(gva);
	} else {
		shared = as->src[b] != ASPACE_OWN || *as_readers(s, as->win, b) ||
			 as_held(s, as->win, b);
		absent = !shared && !as_backed(s, as->win, b);
		pde = as_gpa(s, as_home(as, b), b) | PTE_P | PTE_PS | PTE_US;
		if (!shared)
			pde |= PTE_RW;
		if (absent)
			pde = 0;
	}
	/* Every change of a block's sharing or presence passes here: the counts the fast
	 * path reads. */
	if (shared != as->shared[b]) {
		as->shared[b] = shared;
		__atomic_store_n(&as->n_shared, as->n_shared + (shared ? 1 : -1), __ATOMIC_RELEASE);
	}
	/* A user block's entry is 0 exactly while it is absent (a new space's are, all). */
	if (b >= ASPACE_USER_BLOCK && absent != !as->pde[b])
		__atomic_store_n(&as->n_absent, as->n_absent + (absent ? 1 : -1), __ATOMIC_RELEASE);
	if (as->pde[b] != pde) { /* written out by as_commit, never in place */
		as->pde[b] = pde;
		as->dirty[b / ASPACE_PD_ENTRIES] = 1;
	}
}

/* The next page-table page of window @w never used yet (the caller checked there is
 * one). */
static uint64_t as_pool_page(struct aspace_set *s, int w)
{
	return as_gpa(s, w, 0) + LAYOUT_PGTABLE + (uint64_t)s->next[w]++ * PAGE_SIZE;
}

/* Fresh tables for @as if an entry changed: its changed directories, a PDPT and a
 * PML4, in that window's unused pages; @as's bit into @flush. 0, or -ENOSPC when the
 * pool has too few left. */
int as_commit(struct aspace *as, uint64_t *flush)
{
	struct aspace_set *s = as->set;
	uint64_t links[ASPACE_PD_ENTRIES], pml4, pdpt;
	uint32_t n = 0;

	for (uint32_t i = 0; i < as->n_pd; i++)
		n += as->dirty[i];
	if (!n)
		return 0;
	if (s->next[as->win] + n + 2 > (s->half + 1) * ASPACE_HALF)
		return -ENOSPC;
	pml4 = as_pool_page(s, as->win);
	pdpt = as_pool_page(s, as->win);
	for (uint32_t i = 0; i < as->n_pd; i++) {
		uint32_t first = i * ASPACE_PD_ENTRIES, left = s->blocks - first;

		if (as->dirty[i]) {
			as->pd[i] = as_pool_page(s, as->win);
			pt_write_table(s->mem->host, as->pd[i], as->pde + first,
				       left < ASPACE_PD_ENTRIES ? left : ASPACE_PD_ENTRIES);
			as->dirty[i] = 0;
		}
		links[i] = pt_link(as->pd[i]);
	}
	pt_write_table(s->mem->host, pdpt, links, as->n_pd);
	links[0] = pt_link(pdpt);
	pt_write_table(s->mem->host, pml4, links, 1);
	__atomic_store_n(&as->cr3, pml4, __ATOMIC_RELEASE);
	*flush |= 1ULL << as->win;
	return 0;
}

/* Every space written afresh in the other half of its pool; then, once no vCPU uses
 * the old half's tables (flush), KVM forgets them (recycle). */
static void as_flip(struct aspace_set *s, uint64_t *flush)
{
	uint64_t moved = 0;

	s->half ^= 1;
	for (int w = 0; w < s->n; w++) {
		s->next[w] = as_half_start(s);
		s->canon[w] = false;
		if (s->as[w]) {
			memset(s->as[w]->dirty, 1, s->as[w]->n_pd);
			(void)as_commit(s->as[w], &moved); /* a whole space fits in a half */
		}
	}
	if (s->flush)
		s->flush(s->flush_ctx, moved);
	if (s->recycle)
		s->recycle(s->recycle_ctx);
	*flush |= moved;
}

/* Every space's changes written out, and the vCPUs of those whose CR3 moved off their
 * old tables before the change goes on (the flush callback). Called with the lock
 * held, at the end of each change. */
void as_commit_all(struct aspace_set *s, uint64_t *flush)
{
	uint64_t moved = 0;
	bool full = false;

	for (int w = 0; w < s->n; w++)
		if (s->as[w] && as_commit(s->as[w], &moved))
			full = true;
	if (moved && s->flush)
		s->flush(s->flush_ctx, moved);
	*flush |= moved;
	if (full)
		as_flip(s, flush);
}

/* Block @b's 2 MiB from window @from to window @to (marked as the monitor's write,
 * for a pre-copy in progress: gmem_sys_ptr). */
static void as_copy(struct aspace_set *s, int from, int to, uint32_t b)
{
	const void *src = gmem_sys_ptr(s->mem, as_gpa(s, from, b), HUGE_SIZE);
	void *dst = gmem_sys_ptr(s->mem, as_gpa(s, to, b), HUGE_SIZE);

	as_unhold(s, to, b);
	memcpy(dst, src, HUGE_SIZE);
	as_back(s, to, b);
}

/* @as stops reading block @b from window @q: @q's space may write it again once
 * nobody else reads it (a stale read-only entry there only faults once more). */
static void as_unread(struct aspace *as, uint32_t b)
{
	struct aspace_set *s = as->set;
	int q = as->src[b];

	as->src[b] = ASPACE_OWN;
	if (--*as_readers(s, q, b) == 0 && s->as[q])
		as_put(s->as[q], b);
}

/* Reader @as gets a copy of block @b in its own window. */
static void as_take(struct aspace *as, uint32_t b, uint64_t *flush)
{
	as_copy(as->set, as->src[b], as->win, b);
	as_unread(as, b);
	as_put(as, b);
	*flush |= 1ULL << as->win;
}

/* Reader @as loses block @b: past the budget there is no room for its copy. */
static void as_lose(struct aspace *as, uint32_t b, uint64_t *flush)
{
	as_unread(as, b);
	as->lost[b] = 1;
	as_put(as, b); /* not present: its own block was never backed */
	*flush |= 1ULL << as->win;
}

/* Every reader of @as's block @b gets its own copy, or loses the block if the copy
 * does not fit in the budget. */
static void as_evict(struct aspace *as, uint32_t b, uint64_t *flush)
{
	struct aspace_set *s = as->set;

	for (int r = 0; r < s->n && *as_readers(s, as->win, b); r++) {
		struct aspace *o = s->as[r];

		if (!o || r == as->win || o->src[b] != as->win)
			continue;
		if (as_fits(s, !as_backed(s, r, b)))
			as_take(o, b, flush);
		else
			as_lose(o, b, flush);
	}
}

/* Block @b of @as leaves it with its data: the first reader takes a copy, the others
 * read that one. */
static void as_hand_over(struct aspace *as, uint32_t b, uint64_t *flush)
{
	struct aspace_set *s = as->set;
	struct aspace *heir = NULL;

	for (int r = 0; r < s->n && *as_readers(s, as->win, b); r++) {
		struct aspace *o = s->as[r];

		if (!o || r == as->win || o->src[b] != as->win)
			continue;
		if (!heir) {
			heir = o;
			as_take(o, b, flush);
			continue;
		}
		--*as_readers(s, as->win, b);
		o->src[b] = (int8_t)heir->win;
		++*as_readers(s, heir->win, b);
		as_put(o, b);
		*flush |= 1ULL << o->win;
	}
	if (heir)
		as_put(heir, b);
}

/* Every user block of @as let go of, as an exit or an exec does. */
static void as_let_go(struct aspace *as, uint64_t *flush)
{
	for (uint32_t b = ASPACE_USER_BLOCK; b < as->set->blocks; b++) {
		if (as->src[b] != ASPACE_OWN)
			as_unread(as, b);
		else if (*as_readers(as->set, as->win, b))
			as_hand_over(as, b, flush);
	}
}

static bool as_user(const struct aspace *as, uint64_t gva, uint64_t len)
{
	return gva >= LAYOUT_USER_BASE && gva <= as->set->window &&
	       len <= as->set->window - gva;
}

/* The blocks as_claim(@as, @b) would charge (its readers' copies are theirs to fit,
 * as_evict); a block the space lost costs more than any budget. */
static uint32_t as_claim_cost(const struct aspace *as, uint32_t b)
{
	return as->lost[b] ? ASPACE_NO_BUDGET : !as_backed(as->set, as->win, b);
}

/* The block of @as at @b made its own, backed and writable (a snapshot's hold saved
 * first). */
static void as_claim(struct aspace *as, uint32_t b, uint64_t *flush)
{
	if (as->src[b] != ASPACE_OWN) {
		as_take(as, b, flush);
		return;
	}
	as_unhold(as->set, as->win, b);
	if (*as_readers(as->set, as->win, b))
		as_evict(as, b, flush);
	as_back(as->set, as->win, b);
	as_put(as, b);
}

/* Every block of @as a snapshot holds, saved: its memory is about to go. */
static void as_unhold_all(struct aspace *as)
{
	for (uint32_t b = ASPACE_USER_BLOCK; b < as->set->blocks && as->set->n_held; b++)
		as_unhold(as->set, as->win, b);
}

int aspace_set_init(struct aspace_set *s, struct gmem *mem, uint64_t window, int n)
{
	memset(s, 0, sizeof(*s));
	if (window < LAYOUT_MIN_RAM || window > LAYOUT_MAX_RAM || window % HUGE_SIZE || n < 1 ||
	    n > ASPACE_MAX || mem->size / window < (uint64_t)n)
		return -EINVAL;
	s->mem = mem;
	s->window = window;
	s->blocks = (uint32_t)(window / HUGE_SIZE);
	/* A space's whole tables must fit in half a pool (as_flip): windows above ~246 GiB
	 * hold one space only, so nothing ever flips. */
	s->n = 2 + (s->blocks + ASPACE_PD_ENTRIES - 1) / ASPACE_PD_ENTRIES > ASPACE_HALF ? 1 : n;
	s->budget = ASPACE_NO_BUDGET;
	s->readers = calloc((size_t)n * s->blocks, sizeof(*s->readers));
	s->held = calloc((size_t)n * s->blocks, sizeof(*s->held));
	s->backed = calloc((size_t)n * s->blocks, sizeof(*s->backed));
	s->next = calloc((size_t)n, sizeof(*s->next));
	s->canon = calloc((size_t)n, sizeof(*s->canon));
	if (!s->readers || !s->held || !s->backed || !s->next || !s->canon) {
		free(s->readers);
		free(s->held);
		free(s->backed);
		free(s->next);
		free(s->canon);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

static void as_free(struct aspace *as)
{
	free(as->dirty);
	free(as->pd);
	free(as->pde);
	free(as->shared);
	free(as->lost);
	free(as->src);
	free(as);
}

void aspace_set_fini(struct aspace_set *s)
{
	for (int w = 0; w < s->n; w++)
		if (s->as[w])
			as_free(s->as[w]);
	free(s->readers);
	free(s->held);
	free(s->backed);
	free(s->next);
	free(s->canon);
	if (s->mem)
		pthread_mutex_destroy(&s->lock);
	memset(s, 0, sizeof(*s));
}

void aspace_set_budget(struct aspace_set *s, uint32_t blocks)
{
	s->budget = blocks;
}

uint32_t aspace_set_charged(struct aspace_set *s)
{
	uint32_t n;

	pthread_mutex_lock(&s->lock);
	n = s->n_backed;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* A space in window @w (-1: the lowest free one), every block its own, all of them
 * backed when @eager. Called with the lock held. */
int as_new_at(struct aspace_set *s, int w, bool eager, struct aspace **out)
{
	struct aspace *as;

	if (w < 0) {
		w = 0;
		while (w < s->n && s->as[w])
			w++;
	}
	if (w == s->n)
		return -EAGAIN;
	if (eager && !as_fits(s, s->blocks - ASPACE_USER_BLOCK))
		return -ENOMEM;
	as = calloc(1, sizeof(*as));
	if (!as)
		return -ENOMEM;
	as->n_pd = (s->blocks + ASPACE_PD_ENTRIES - 1) / ASPACE_PD_ENTRIES;
	as->src = malloc(s->blocks);
	as->shared = calloc(s->blocks, 1);
	as->lost = calloc(s->blocks, 1);
	as->pde = calloc(s->blocks, sizeof(*as->pde));
	as->pd = calloc(as->n_pd, sizeof(*as->pd));
	as->dirty = calloc(as->n_pd, 1);
	if (!as->src || !as->shared || !as->lost || !as->pde || !as->pd || !as->dirty) {
		as_free(as);
		return -ENOMEM;
	}
	memset(as->src, ASPACE_OWN, s->blocks);
	as->set = s;
	as->win = w;
	as->eager = eager;
	as->n_absent = s->blocks - ASPACE_USER_BLOCK; /* every entry 0 until as_put */
	for (uint32_t b = ASPACE_USER_BLOCK; eager && b < s->blocks; b++)
		as_back(s, w, b);
	for (uint32_t b = 0; b < s->blocks; b++)
		as_put(as, b); /* written out by the caller's as_commit_all */
	s->as[w] = as;
	*out = as;
	return 0;
}

/* A space that owns every block has the same tables in a window every time: the ones
 * its first such space wrote at the start of the pool, still unchanged (tables are
 * written once), serve again, and creating processes never runs a pool dry. */
static void as_canon(struct aspace *as, uint64_t *flush)
{
	struct aspace_set *s = as->set;
	uint64_t first = as_gpa(s, as->win, 0) + LAYOUT_PGTABLE + as_half_start(s) * PAGE_SIZE;

	if (!s->canon[as->win]) {
		bool fresh = s->next[as->win] == as_half_start(s);

		as_commit_all(s, flush);
		s->canon[as->win] = fresh && as->cr3 == first;
		return;
	}
	for (uint32_t i = 0; i < as->n_pd; i++) {
		as->pd[i] = first + (2 + i) * PAGE_SIZE; /* PML4, PDPT, then the directories */
		as->dirty[i] = 0;
	}
	__atomic_store_n(&as->cr3, first, __ATOMIC_RELEASE);
	as_commit_all(s, flush);
}

/* A space in the lowest free window: an eager one reuses its window's first tables
 * (as_canon); a lazy one's differ, and are written afresh. Nothing runs it yet. */
static int as_create(struct aspace_set *s, bool eager, struct aspace **out)
{
	uint64_t flush = 0;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = as_new_at(s, -1, eager, out);
	if (!rc && eager)
		as_canon(*out, &flush);
	else if (!rc)
		as_commit_all(s, &flush);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_create(struct aspace_set *s, struct aspace **out)
{
	return as_create(s, true, out);
}

int aspace_create_lazy(struct aspace_set *s, struct aspace **out)
{
	return as_create(s, false, out);
}

static bool as_used(const uint64_t *used, uint32_t b)
{
	return !used || (used[b / 64] >> (b % 64)) & 1;
}

int aspace_fork(struct aspace *parent, const uint64_t *used, struct aspace **out,
		uint64_t *flush)
{
	return aspace_fork_copy(parent, used, NULL, out, flush);
}

int aspace_fork_copy(struct aspace *parent, const uint64_t *used, const uint64_t *copy,
		     struct aspace **out, uint64_t *flush)
{
	struct aspace_set *s = parent->set;
	struct aspace *child;
	uint32_t need = 0;
	int rc;

	pthread_mutex_lock(&s->lock);
	for (uint32_t b = ASPACE_USER_BLOCK; copy && b < s->blocks; b++)
		need += as_used(used, b) && as_backed(s, as_home(parent, b), b) &&
			(copy[b / 64] >> (b % 64) & 1);
	rc = as_fits(s, need) ? as_new_at(s, -1, false, &child) : -ENOMEM;
	if (rc)
		goto out;
	for (uint32_t b = ASPACE_USER_BLOCK; b < s->blocks; b++) {
		int home = as_home(parent, b);

		if (!as_used(used, b) || !as_backed(s, home, b))
			continue; /* zero: the child's own zero is the same */
		if (copy && (copy[b / 64] >> (b % 64) & 1)) {
			as_copy(s, home, child->win, b); /* the child's own from the start */
			as_put(child, b);
			continue;
		}
		child->src[b] = (int8_t)home;
		if (++*as_readers(s, home, b) == 1 && home == parent->win)
			as_put(parent, b); /* read-only from now on */
		as_put(child, b);
	}
	*out = child;
	as_commit_all(s, flush);
	*flush &= ~(1ULL << child->win); /* nothing runs it yet */
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_write_fault(struct aspace *as, uint64_t gva, uint64_t *flush)
{
	return aspace_own(as, gva, 1, flush);
}

/* What aspace_drop does to @as's block @b, covered @whole or in part; with @cost,
 * only the blocks it would charge (nothing changes). */
static uint32_t as_drop_block(struct aspace *as, uint32_t b, bool whole, bool cost,
			      uint64_t *flush)
{
	if (whole && !cost)
		as->lost[b] = 0; /* dropped whole: nothing left to lose */
	if (as->src[b] == ASPACE_OWN && !as_backed(as->set, as->win, b))
		return 0; /* zero, and nobody reads it */
	if (!whole)
		return cost ? as_claim_cost(as, b) : (as_claim(as, b, flush), 0);
	if (as->src[b] != ASPACE_OWN) {
		if (!cost) {
			as_unread(as, b); /* its own block is wiped with the rest */
			as_put(as, b);
		}
		return 0;
	}
	if (cost)
		return 0; /* its own is backed; its readers' copies are theirs (as_evict) */
	as_unhold(as->set, as->win, b);
	if (*as_readers(as->set, as->win, b))
		as_evict(as, b, flush);
	as_put(as, b);
	return 0;
}

/* Each block of [@gva, @gva + @len) claimed (aspace_own) or dropped (aspace_drop):
 * first what that would charge, and only if it fits, the change. */
static int as_range(struct aspace *as, uint64_t gva, uint64_t len, bool drop, uint64_t *flush)
{
	struct aspace_set *s = as->set;
	uint64_t first = gva / HUGE_SIZE, last, need = 0;
	int rc = 0;

	if (!as_user(as, gva, len))
		return -EFAULT;
	if (!len)
		return 0;
	last = (gva + len - 1) / HUGE_SIZE;
	pthread_mutex_lock(&s->lock);
	for (int pass = 0; pass < 2; pass++) {
		bool cost = pass == 0;

		for (uint64_t b = first; b <= last; b++) {
			bool whole = b * HUGE_SIZE >= gva && (b + 1) * HUGE_SIZE <= gva + len;

			if (drop)
				need += as_drop_block(as, (uint32_t)b, whole, cost, flush);
			else if (cost)
				need += as_claim_cost(as, (uint32_t)b);
			else
				as_claim(as, (uint32_t)b, flush);
		}
		if (cost && !as_fits(s, need)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	as_commit_all(s, flush);
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_own(struct aspace *as, uint64_t gva, uint64_t len, uint64_t *flush)
{
	return as_range(as, gva, len, false, flush);
}

int aspace_drop(struct aspace *as, uint64_t gva, uint64_t len, uint64_t *flush)
{
	return as_range(as, gva, len, true, flush);
}

int64_t aspace_gpa(struct aspace *as, uint64_t gva)
{
	struct aspace_set *s = as->set;
	uint32_t b = (uint32_t)(gva / HUGE_SIZE);
	int64_t gpa;

	if (!as_user(as, gva, 1))
		return -1;
	pthread_mutex_lock(&s->lock);
	gpa = (int64_t)(as_gpa(s, as_home(as, b), b) + gva % HUGE_SIZE);
	pthread_mutex_unlock(&s->lock);
	return gpa;
}

/* The user part of @as's window reads as zero again: private zero memory mapped anew,
 * which also ends any shared mapping its process had there (gmem_alias). */
static void as_wipe(struct aspace *as)
{
	struct aspace_set *s = as->set;

	gmem_unalias(s->mem, as_gpa(s, as->win, ASPACE_USER_BLOCK), s->window - LAYOUT_USER_BASE);
}

int aspace_reset(struct aspace *as, uint64_t *flush)
{
	struct aspace_set *s = as->set;

	pthread_mutex_lock(&s->lock);
	as_unhold_all(as);
	as_let_go(as, flush);
	if (!as->eager)
		as_unback(s, as->win); /* wiped below, before anything can write it */
	memset(as->lost, 0, s->blocks);
	for (uint32_t b = ASPACE_USER_BLOCK; b < s->blocks; b++)
		as_put(as, b);
	as_commit_all(s, flush); /* its readers left its window first */
	as_wipe(as);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void aspace_destroy(struct aspace *as, uint64_t *flush)
{
	struct aspace_set *s = as->set;

	pthread_mutex_lock(&s->lock);
	as_unhold_all(as);
	as_let_go(as, flush);
	s->as[as->win] = NULL; /* its used table pages stay used: never written again */
	as_commit_all(s, flush); /* its readers left its window first */
	if (s->window_off)
		s->window_off(s->window_off_ctx, as->win);
	as_wipe(as);
	as_unback(s, as->win);
	*flush &= ~(1ULL << as->win);
	pthread_mutex_unlock(&s->lock);
	as_free(as);
}

/* ---- the view: mmu/gmem.h's side of a space ---- */

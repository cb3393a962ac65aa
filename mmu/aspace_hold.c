/*
 * aspace_hold.c - address spaces as snapshots, restores and the personality see
 * them: a snapshot's hold on the blocks it saves, a restore's blocks backed, filled and
 * read back, and a space's view (mmu/gmem.h) through which the personality reaches
 * its memory. The spaces themselves are aspace.c's (its opening says how blocks are
 * shared, owned and charged).
 */
#include "aspace_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int aspace_restore_back(struct aspace_set *s, int w, uint32_t b)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (w <= 0 || w >= s->n || s->as[w] || b < ASPACE_USER_BLOCK || b >= s->blocks)
		rc = -EINVAL;
	else if (as_backed(s, w, b))
		rc = -EEXIST;
	else if (!as_fits(s, 1 + (s->as[0] ? 0 : s->blocks - ASPACE_USER_BLOCK)))
		rc = -ENOMEM;
	if (!rc)
		as_back(s, w, b);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_restore_fill(struct aspace_set *s, int w, uint32_t b)
{
	int rc = -EINVAL;

	pthread_mutex_lock(&s->lock);
	if (w >= 0 && w < s->n && s->as[w] && b >= ASPACE_USER_BLOCK && b < s->blocks) {
		rc = as_backed(s, w, b) || as_fits(s, 1) ? 0 : -ENOMEM;
		if (!rc) {
			as_back(s, w, b);
			as_put(s->as[w], b);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_restore_read(struct aspace *as, uint32_t b, int from)
{
	struct aspace_set *s = as->set;
	int rc = -EINVAL;

	pthread_mutex_lock(&s->lock);
	if (b >= ASPACE_USER_BLOCK && b < s->blocks && from >= 0 && from < s->n &&
	    from != as->win && s->as[from] && s->as[from]->src[b] == ASPACE_OWN &&
	    as->src[b] == ASPACE_OWN && !*as_readers(s, as->win, b)) {
		as->src[b] = (int8_t)from;
		++*as_readers(s, from, b);
		as_put(as, b);
		as_put(s->as[from], b); /* read-only from now on */
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_hold(struct aspace_set *s, uint64_t *const *bits,
		void (*copy)(void *ctx, int win, uint32_t b), void *ctx, uint64_t *flush)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->hold_copy) {
		rc = -EBUSY;
		goto out;
	}
	s->hold_copy = copy;
	s->hold_ctx = ctx;
	for (int w = 1; w < s->n; w++) {
		struct aspace *as = s->as[w];

		for (uint32_t b = ASPACE_USER_BLOCK; as && bits[w] && b < s->blocks; b++) {
			if (!((bits[w][b / 64] >> (b % 64)) & 1) || as->src[b] != ASPACE_OWN ||
			    !as_backed(s, w, b))
				continue; /* not its own, or zero: nothing to save */
			s->held[(size_t)w * s->blocks + b] = 1;
			s->n_held++;
			as_put(as, b);
		}
	}
	as_commit_all(s, flush);
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void aspace_hold_end(struct aspace_set *s, uint64_t *flush)
{
	/* One block under the lock at a time: a write fault waits for one copy at most. */
	for (size_t i = 0, n = (size_t)s->n * s->blocks; i < n; i++) {
		if (!__atomic_load_n(&s->held[i], __ATOMIC_RELAXED))
			continue;
		pthread_mutex_lock(&s->lock);
		as_unhold(s, (int)(i / s->blocks), (uint32_t)(i % s->blocks));
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_lock(&s->lock);
	for (int w = 1; w < s->n; w++)
		for (uint32_t b = ASPACE_USER_BLOCK; s->as[w] && b < s->blocks; b++)
			as_put(s->as[w], b);
	as_commit_all(s, flush);
	s->hold_copy = NULL;
	s->hold_ctx = NULL;
	pthread_mutex_unlock(&s->lock);
}

static int as_view_own(void *ctx, uint64_t gva, uint64_t len)
{
	struct aspace *as = ctx;
	uint64_t flush = 0; /* flushed before aspace_own returns */

	return aspace_own(as, gva, len, &flush);
}

static int as_view_drop(void *ctx, uint64_t gva, uint64_t len)
{
	uint64_t flush = 0; /* flushed before aspace_drop returns */

	return aspace_drop(ctx, gva, len, &flush);
}

static int64_t as_view_where(void *ctx, uint64_t gva)
{
	return aspace_gpa(ctx, gva);
}

/* Nothing shared and nothing absent: every user block the space's own, writable. */
static bool as_view_alone(void *ctx)
{
	const struct aspace *as = ctx;

	return !__atomic_load_n(&as->n_shared, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&as->n_absent, __ATOMIC_ACQUIRE);
}

struct gmem *aspace_view(struct aspace *as)
{
	struct aspace_set *s = as->set;

	as->cow = (struct gmem_cow){ .own = as_view_own, .drop = as_view_drop,
				     .where = as_view_where,
				     .alone = as_view_alone, .ctx = as };
	gmem_view(&as->view, s->mem, as_gpa(s, as->win, 0), s->window, &as->cow);
	return &as->view;
}

void aspace_tables(struct aspace *as)
{
	struct aspace_set *s = as->set;
	uint64_t flush = 0;

	pthread_mutex_lock(&s->lock);
	s->next[as->win] = as_half_start(s); /* no vCPU ran yet: nothing holds a translation */
	s->canon[as->win] = false;
	memset(as->dirty, 1, as->n_pd);
	(void)as_commit(as, &flush);
	pthread_mutex_unlock(&s->lock);
}

int aspace_create_at(struct aspace_set *s, int win, struct aspace **out)
{
	int rc;

	if (win <= 0 || win >= s->n)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	rc = s->as[win] ? -EEXIST : as_new_at(s, win, false, out);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int aspace_source(struct aspace *as, uint32_t b)
{
	int src;

	pthread_mutex_lock(&as->set->lock);
	src = b < as->set->blocks ? as->src[b] : ASPACE_OWN;
	pthread_mutex_unlock(&as->set->lock);
	return src;
}

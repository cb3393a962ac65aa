/*
 * track.c - write tracking between snapshots, for incremental snapshots.
 *
 * A snapshot taken with tracking leaves every page it saved write-protected (the
 * writer skips its usual unprotect), so the guest's first write to a page afterwards
 * traps once: the fault thread marks the page written and unprotects it. The rule kept
 * everywhere is that a page is either write-protected or marked written: every place
 * that lifts protection without a fault (a hot region copied whole, a region copied in
 * the pause, memory the monitor discards) marks its pages. The monitor's own writes
 * into guest RAM (read payloads, futex words, the vDSO data page, the fastio ring,
 * clear_child_tid) go through the same host mapping, so they trap like the guest's;
 * KVM's dirty log would miss them, and the coverage tracker clears it besides.
 *
 * Protection covers only present pages, so the instant also compares which pages are
 * present with the last instant: a page that appeared (first touch) or disappeared
 * since counts as written. A failed snapshot puts back what it took as written.
 */
#include "track.h"
#include "image.h"
#include "../base/pages.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void track_init(struct snap_track *tr, struct snap_ptab *pt)
{
	memset(tr, 0, sizeof(*tr));
	tr->pt = pt;
}

void track_unprotected(struct snap_track *tr, uint64_t first, uint64_t n)
{
	for (uint64_t p = first; p < first + n; p++) /* fault threads mark pages meanwhile */
		__atomic_store_n(&tr->pt->dirty[p], 1, __ATOMIC_RELAXED);
}

void track_fault(struct snap_track *tr, uint64_t p)
{
	if (ps_get(&tr->pt->state[p]) != PS_PROTECTED)
		__atomic_fetch_add(&tr->faults, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&tr->pt->dirty[p], 1, __ATOMIC_RELAXED);
}

static bool track_policy_ok(enum snap_policy p)
{
	return p == SNAP_COW || p == SNAP_CCOW;
}

int track_check(struct snap_track *tr, const struct snap_request *req, char *err,
		size_t errlen)
{
	char real[PATH_MAX];

	tr->next = req->track || req->parent;
	if (!tr->next)
		return 0;
	if (!track_policy_ok(req->policy)) {
		snprintf(err, errlen, "incremental snapshots and --track need the cow or ccow policy "
			 "(writes are tracked with userfaultfd write protection)");
		return -EINVAL;
	}
	if (!req->parent)
		return 0;
	if (!tr->tracking) {
		snprintf(err, errlen, "--parent %s: write tracking is off; take a snapshot with "
			 "--track (or run with --snapshot-incremental) first", req->parent);
		return -EINVAL;
	}
	if (!realpath(req->parent, real)) {
		snprintf(err, errlen, "--parent %s: %s", req->parent, strerror(errno));
		return -EINVAL;
	}
	if (strcmp(real, tr->file) != 0) {
		snprintf(err, errlen, "--parent %s is not this VM's latest snapshot taken with "
			 "tracking on (that is %s)", req->parent, tr->file);
		return -EINVAL;
	}
	return 0;
}

/* The real path of the directory @file is (to be) in; false when it cannot be known. */
static bool track_dir_of(const char *file, char out[PATH_MAX])
{
	char *dup = strdup(file);
	bool ok = dup && realpath(dirname(dup), out);

	free(dup);
	return ok;
}

int track_parent_path(const struct snap_track *tr, const char *child, char *out, size_t len)
{
	char cdir[PATH_MAX], *pdup = strdup(tr->file);
	const char *pdir = pdup ? dirname(pdup) : NULL;
	bool same = pdir && track_dir_of(child, cdir) && strcmp(cdir, pdir) == 0;
	int n = snprintf(out, len, "%s", same ? strrchr(tr->file, '/') + 1 : tr->file);

	free(pdup);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

void track_instant(struct snap_track *tr, bool incremental, uint64_t *held_out,
		   uint64_t *faults)
{
	struct snap_ptab *t = tr->pt;
	uint64_t held = 0;

	for (uint64_t p = 0; p < tr->pt->pages; p++) {
		bool present = ps_get(&t->state[p]) != PS_ZERO;
		bool written = t->dirty[p] || present != (bool)t->was_present[p];

		if (incremental && !written)
			ps_set(&t->state[p], PS_PARENT);
		held += written;
		t->dirty_instant[p] = written;
		t->dirty[p] = 0;
		t->was_present[p] = present;
	}
	*held_out = incremental ? held : tr->pt->pages;
	*faults = __atomic_exchange_n(&tr->faults, 0, __ATOMIC_RELAXED);
}

void track_failed(struct snap_track *tr)
{
	struct snap_ptab *t = tr->pt;

	for (uint64_t p = 0; p < tr->pt->pages; p++) {
		if (t->dirty_instant[p])
			__atomic_store_n(&t->dirty[p], 1, __ATOMIC_RELAXED);
		/* not saved: a later write is tracked, not copied */
		(void)ps_take(&t->state[p], PS_SAVED);
	}
}

void track_done(struct snap_track *tr, const char *file, struct uffd *wp)
{
	char err[IMG_ERR_LEN], real[PATH_MAX];
	struct img_reader r;

	/* Tracking ends: what it left protected would only cost the guest faults. */
	if (tr->tracking && !tr->next && wp->fd >= 0)
		uffd_protect(wp, 0, tr->pt->pages * PAGE_SIZE, false);
	tr->tracking = false;
	if (!tr->next || !realpath(file, real) || strlen(real) >= sizeof(tr->file) ||
	    img_open(file, &r, err) != 0)
		return;
	snprintf(tr->file, sizeof(tr->file), "%s", real);
	tr->identity = r.identity;
	img_close(&r);
	tr->tracking = true;
}

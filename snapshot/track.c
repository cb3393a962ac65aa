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
#include "pagestate.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void track_unprotected(struct snap_engine *e, uint64_t first, uint64_t n)
{
	for (uint64_t p = first; p < first + n; p++) /* fault threads mark pages meanwhile */
		__atomic_store_n(&e->dirty[p], 1, __ATOMIC_RELAXED);
}

void track_fault(struct snap_engine *e, uint64_t p)
{
	if (ps_get(&e->state[p]) != PS_PROTECTED)
		__atomic_fetch_add(&e->track_faults, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->dirty[p], 1, __ATOMIC_RELAXED);
}

static bool track_policy_ok(enum snap_policy p)
{
	return p == SNAP_COW || p == SNAP_CCOW;
}

int track_check(struct snap_engine *e, const struct snap_request *req, char *err, size_t errlen)
{
	char real[PATH_MAX];

	e->track_next = req->track || req->parent;
	if (!e->track_next)
		return 0;
	if (!track_policy_ok(req->policy)) {
		snprintf(err, errlen, "incremental snapshots and --track need the cow or ccow policy "
			 "(writes are tracked with userfaultfd write protection)");
		return -EINVAL;
	}
	if (!req->parent)
		return 0;
	if (!e->tracking) {
		snprintf(err, errlen, "--parent %s: write tracking is off; take a snapshot with "
			 "--track (or run with --snapshot-incremental) first", req->parent);
		return -EINVAL;
	}
	if (!realpath(req->parent, real)) {
		snprintf(err, errlen, "--parent %s: %s", req->parent, strerror(errno));
		return -EINVAL;
	}
	if (strcmp(real, e->track_file) != 0) {
		snprintf(err, errlen, "--parent %s is not this VM's latest snapshot taken with "
			 "tracking on (that is %s)", req->parent, e->track_file);
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

int track_parent_path(const struct snap_engine *e, const char *child, char *out, size_t len)
{
	char cdir[PATH_MAX], *pdup = strdup(e->track_file);
	const char *pdir = pdup ? dirname(pdup) : NULL;
	bool same = pdir && track_dir_of(child, cdir) && strcmp(cdir, pdir) == 0;
	int n = snprintf(out, len, "%s", same ? strrchr(e->track_file, '/') + 1 : e->track_file);

	free(pdup);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

void track_instant(struct snap_engine *e, bool incremental)
{
	uint64_t held = 0;

	for (uint64_t p = 0; p < e->size / PAGE_SIZE; p++) {
		bool present = ps_get(&e->state[p]) != PS_ZERO;
		bool written = e->dirty[p] || present != (bool)e->was_present[p];

		if (incremental && !written)
			ps_set(&e->state[p], PS_PARENT);
		held += written;
		e->dirty_instant[p] = written;
		e->dirty[p] = 0;
		e->was_present[p] = present;
	}
	e->cur.incremental = incremental;
	e->cur.pages_held = incremental ? held : e->size / PAGE_SIZE;
	e->cur.track_faults = __atomic_exchange_n(&e->track_faults, 0, __ATOMIC_RELAXED);
}

void track_failed(struct snap_engine *e)
{
	for (uint64_t p = 0; p < e->size / PAGE_SIZE; p++) {
		uint8_t *st = &e->state[p];

		if (e->dirty_instant[p])
			__atomic_store_n(&e->dirty[p], 1, __ATOMIC_RELAXED);
		(void)ps_take(st, PS_SAVED); /* not saved: a later write is tracked, not copied */
	}
}

void track_done(struct snap_engine *e, const char *file)
{
	char err[IMG_ERR_LEN], real[PATH_MAX];
	struct img_reader r;

	/* Tracking ends: what it left protected would only cost the guest faults. */
	if (e->tracking && !e->track_next && e->wp.fd >= 0)
		uffd_protect(&e->wp, 0, e->size, false);
	e->tracking = false;
	if (!e->track_next || !realpath(file, real) || strlen(real) >= sizeof(e->track_file) ||
	    img_open(file, &r, err) != 0)
		return;
	snprintf(e->track_file, sizeof(e->track_file), "%s", real);
	e->track_identity = r.identity;
	img_close(&r);
	e->tracking = true;
}

/*
 * engine_state.c - the target's own part of a snapshot: the state its capture adds in
 * the pause, and, for a target that saves some of its memory after the pause
 * (capture_live: a VM's children, vmm/persist_tree.c), the sections it adds once that
 * is done, before the image is finished, or its giving up when the snapshot fails.
 */
#include "engine_impl.h"

int snap_capture(struct snap_engine *e, const struct snap_request *req)
{
	const struct snap_ops *ops = e->t.ops;
	int rc;

	/* The fork policy's child finishes the image: nothing may be added after it. */
	if (req->policy == SNAP_FORK || !ops->capture_live || !ops->finish)
		return ops->capture(e->t.ctx, e->img);
	rc = ops->capture_live(e->t.ctx, e->img);
	e->finish_due = !rc;
	return rc;
}

int snap_finish_live(struct snap_engine *e, int rc)
{
	int r;

	if (!e->finish_due)
		return rc;
	e->finish_due = false;
	r = e->t.ops->finish(e->t.ctx, rc ? NULL : e->img);
	if (!rc && r)
		snap_fail(e, r, "saving the memory left after the pause");
	return rc ? rc : r;
}

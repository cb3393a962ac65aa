/*
 * figures.c - a snapshot's figures as JSON (the control socket's replies and events,
 * --snapshot-log), and the names of policies and options as users write them.
 */
#include "engine.h"

#include <errno.h>
#include <string.h>

static const char *const policy_names[SNAP_NR_POLICIES] = { "stop", "cow", "ccow", "fork" };

const char *snap_policy_name(enum snap_policy p)
{
	return (unsigned)p < SNAP_NR_POLICIES ? policy_names[p] : "?";
}

int snap_policy_parse(const char *name, enum snap_policy *p)
{
	for (int i = 0; i < SNAP_NR_POLICIES; i++)
		if (strcmp(name, policy_names[i]) == 0) {
			*p = (enum snap_policy)i;
			return 0;
		}
	return -EINVAL;
}

int snap_order_parse(const char *name, enum snap_order *o)
{
	if (strcmp(name, "hot-first") == 0)
		*o = SNAP_HOT_FIRST;
	else if (strcmp(name, "linear") == 0)
		*o = SNAP_LINEAR;
	else
		return -EINVAL;
	return 0;
}

int snap_precopy_parse(const char *name, enum snap_precopy *p)
{
	if (strcmp(name, "lazy") == 0)
		*p = SNAP_PRECOPY_LAZY;
	else if (strcmp(name, "eager") == 0)
		*p = SNAP_PRECOPY_EAGER;
	else
		return -EINVAL;
	return 0;
}

json_t *snap_figures_json(const struct snap_figures *f)
{
	json_t *o = json_pack("{s:b, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			      "s:I}",
			      "ok", f->ok || !f->done, "id", (json_int_t)f->id, "file", f->file,
			      "policy", snap_policy_name(f->policy), "state",
			      !f->done ? "running" : f->ok ? "done" : "failed", "pause_us",
			      (json_int_t)f->pause_us, "duration_ms", (json_int_t)f->duration_ms,
			      "bytes", (json_int_t)f->bytes, "pages_total",
			      (json_int_t)f->pages_total, "pages_zero", (json_int_t)f->pages_zero,
			      "pages_saved_by_writer", (json_int_t)f->pages_saved_by_writer,
			      "cow_faults", (json_int_t)f->cow_faults, "pages_copied",
			      (json_int_t)f->pages_copied, "copy_bytes_peak",
			      (json_int_t)f->copy_bytes_peak);

	if (f->policy == SNAP_CCOW) {
		json_t *c = json_pack("{s:f, s:I, s:s, s:I, s:I, s:I, s:I, s:I}", "threshold",
				      f->threshold, "region_size", (json_int_t)f->region_size,
				      "precopy", f->precopy == SNAP_PRECOPY_EAGER ? "eager" : "lazy",
				      "regions_eager", (json_int_t)f->regions_eager, "regions_hot",
				      (json_int_t)f->regions_hot, "regions_precopied",
				      (json_int_t)f->regions_precopied, "pages_precopied",
				      (json_int_t)f->pages_precopied, "pages_precopied_unwritten",
				      (json_int_t)f->pages_precopied_unwritten);

		json_object_update_new(o, c);
	}
	if (f->policy == SNAP_FORK)
		json_object_set_new(o, "extra_bytes", json_integer((json_int_t)f->extra_bytes));
	if (f->policy == SNAP_CCOW)
		json_object_set_new(o, "regions_background",
				    json_integer((json_int_t)f->regions_background));
	if (f->policy == SNAP_COW || f->policy == SNAP_CCOW) {
		json_object_set_new(o, "faults_parallel_max",
				    json_integer((json_int_t)f->faults_parallel_max));
		json_object_set_new(o, "pool_bytes", json_integer((json_int_t)f->pool_bytes));
		json_object_set_new(o, "pool_resident_bytes",
				    json_integer((json_int_t)f->pool_resident_bytes));
		json_object_update_new(o, json_pack("{s:I, s:I, s:I}", "held_raw_bytes",
						    (json_int_t)f->held_raw_bytes,
						    "held_stored_bytes",
						    (json_int_t)f->held_stored_bytes,
						    "held_compressed_bytes",
						    (json_int_t)f->held_compressed_bytes));
	}
	json_object_update_new(o, json_pack("{s:s, s:i, s:i, s:I, s:I}", "compress",
					    codec_name(f->codec), "compress_level", f->level,
					    "threads", f->threads, "bytes_raw",
					    (json_int_t)f->bytes_raw, "bytes_stored",
					    (json_int_t)f->bytes_stored));
	json_object_update_new(o, json_pack("{s:b, s:I, s:I}", "incremental", f->incremental,
					    "pages_held", (json_int_t)f->pages_held, "track_faults",
					    (json_int_t)f->track_faults));
	json_object_set_new(o, "dirty_harvests", json_integer((json_int_t)f->dirty_harvests));
	json_object_set_new(o, "harvest_ms", json_integer((json_int_t)f->harvest_ms));
	if (f->done && !f->ok)
		json_object_set_new(o, "error", json_string(f->error));
	return o;
}

json_t *snap_engine_stats_json(struct snap_engine *e)
{
	bool running, tracking;
	char base[sizeof(e->track_file)];
	json_t *o;

	pthread_mutex_lock(&e->lock);
	running = e->busy;
	tracking = e->tracking;
	snprintf(base, sizeof(base), "%s", tracking ? e->track_file : "");
	pthread_mutex_unlock(&e->lock);
	/* held_*: the copies held now, as guest pages and as the pool bytes they take
	 * (less when compressed under pressure); pool_in_use_bytes is the latter. */
	o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:b}", "pool_bytes",
		      (json_int_t)pool_ready_bytes(&e->pool), "pool_resident_bytes",
		      (json_int_t)pool_resident_bytes(&e->pool), "pool_in_use_bytes",
		      (json_int_t)pool_in_use(&e->pool), "held_raw_bytes",
		      (json_int_t)pool_raw(&e->pool), "held_stored_bytes",
		      (json_int_t)pool_in_use(&e->pool), "faults_parallel_max",
		      (json_int_t)__atomic_load_n(&e->faults_most, __ATOMIC_RELAXED),
		      "fault_threads", e->n_faulters, "running", running);
	/* Write tracking: the image the next incremental snapshot may name as --parent,
	 * and the faults tracking has cost since the last snapshot's instant. */
	json_object_update_new(o, json_pack("{s:b, s:s?, s:I}", "tracking", tracking,
					    "parent", tracking ? base : NULL, "track_faults",
					    (json_int_t)__atomic_load_n(&e->track_faults,
									__ATOMIC_RELAXED)));
	return o;
}

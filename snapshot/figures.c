/*
 * figures.c - a snapshot's figures as JSON (the control socket's replies and events,
 * --snapshot-log), and the engine's state between snapshots for `ccvm ctl stats`.
 */
#include "engine_impl.h"
#include "image.h"
#include "../base/mono.h"

#include <stdio.h>
#include <string.h>

json_t *snap_codec_mix_json(const uint64_t chunks[IMG_CODEC_AUTO])
{
	uint64_t all = 0;
	json_t *o = json_object();

	for (int i = 0; i < IMG_CODEC_AUTO; i++)
		all += chunks[i];
	for (int i = 0; i < IMG_CODEC_AUTO && o; i++)
		json_object_set_new(o, codec_stored_name((enum img_codec)i),
				    json_real(all ? (double)chunks[i] / (double)all : 0.0));
	return o;
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
				      "precopy", snap_precopy_name(f->precopy),
				      "regions_eager", (json_int_t)f->regions_eager, "regions_hot",
				      (json_int_t)f->regions_hot, "regions_precopied",
				      (json_int_t)f->regions_precopied, "pages_eager",
				      (json_int_t)f->pages_eager, "pages_precopied_unwritten",
				      (json_int_t)f->pages_precopied_unwritten);

		json_object_update_new(o, c);
	}
	json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I}", "extra_bytes_peak",
					    (json_int_t)f->extra_bytes_peak, "pages_precopied",
					    (json_int_t)f->pages_precopied, "pause_copy_us",
					    (json_int_t)f->pause_copy_us, "pause_protect_us",
					    (json_int_t)f->pause_protect_us));
	if (f->policy == SNAP_FORK)
		json_object_set_new(o, "extra_bytes", json_integer((json_int_t)f->extra_bytes));
	if (f->policy == SNAP_CCOW)
		json_object_set_new(o, "regions_background",
				    json_integer((json_int_t)f->regions_background));
	if (f->policy == SNAP_CCOW && f->precopy == SNAP_PRECOPY_ROUNDS)
		json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:b}", "rounds",
						    (json_int_t)f->rounds, "pages_presaved",
						    (json_int_t)f->pages_presaved, "presave_ms",
						    (json_int_t)f->presave_ms, "pages_redirtied",
						    (json_int_t)f->pages_redirtied, "rounds_gave_up",
						    f->rounds_gave_up));
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
	json_object_update_new(o, json_pack("{s:o, s:f, s:f}", "codec_mix",
					    snap_codec_mix_json(f->codec_chunks),
					    "compress_mb_per_s", f->compress_mb_s,
					    "disk_mb_per_s", f->disk_mb_s));
	json_object_update_new(o, json_pack("{s:b, s:I, s:I}", "incremental", f->incremental,
					    "pages_held", (json_int_t)f->pages_held, "track_faults",
					    (json_int_t)f->track_faults));
	json_object_set_new(o, "dirty_harvests", json_integer((json_int_t)f->dirty_harvests));
	json_object_set_new(o, "harvest_ms", json_integer((json_int_t)f->harvest_ms));
	if (f->done && !f->ok)
		json_object_set_new(o, "error", json_string(f->error));
	return o;
}

/* The stages' counters of the running snapshot into @f. */
void snap_figures_collect(struct snap_engine *e, struct snap_figures *f)
{
	const struct cow_counts *n = &e->cow.n;

	f->regions_hot = e->plan.regions_hot;
	if (e->policy != SNAP_FORK) /* (the child wrote the image: its rates are its own) */
		cauto_rates(&e->cauto, &f->compress_mb_s, &f->disk_mb_s);
	f->pages_zero = __atomic_load_n(&e->wr.pages_zero, __ATOMIC_RELAXED);
	f->pages_saved_by_writer = __atomic_load_n(&e->wr.pages_saved, __ATOMIC_RELAXED);
	if (e->policy == SNAP_FORK) {
		f->cow_faults = e->fork.cow_faults;
		f->extra_bytes = e->fork.extra_bytes;
		f->pages_zero = e->fork.pages_zero;
		f->pages_saved_by_writer = e->fork.pages_saved;
		return;
	}
	if (e->policy == SNAP_STOP)
		return;
	f->cow_faults = __atomic_load_n(&n->cow_faults, __ATOMIC_RELAXED);
	f->faults_parallel_max = __atomic_load_n(&n->faults_parallel_max, __ATOMIC_RELAXED);
	f->pages_copied = __atomic_load_n(&n->pages_copied, __ATOMIC_RELAXED);
	f->regions_precopied = __atomic_load_n(&n->regions_precopied, __ATOMIC_RELAXED);
	f->pages_precopied = __atomic_load_n(&n->pages_precopied, __ATOMIC_RELAXED);
	f->regions_background = __atomic_load_n(&n->regions_background, __ATOMIC_RELAXED);
	f->regions_eager = n->regions_eager;
	f->pages_eager = n->pages_eager;
	f->pause_copy_us = n->pause_copy_ns / 1000;
	f->pause_protect_us = n->protect_ns / 1000;
	f->held_compressed_bytes = __atomic_load_n(&e->sq.compressed_bytes, __ATOMIC_RELAXED);
}

void snap_figures_final(struct snap_engine *e)
{
	struct snap_figures *f = &e->cur;
	bool wp = e->policy == SNAP_COW || e->policy == SNAP_CCOW;

	snap_figures_collect(e, f);
	cauto_end(&e->cauto);
	f->copy_bytes_peak = pool_take_peak(&e->pool);
	f->held_stored_bytes = f->copy_bytes_peak;
	f->held_raw_bytes = pool_take_raw_peak(&e->pool);
	f->pool_bytes = pool_ready_bytes(&e->pool);
	/* The pool never shrinks while a snapshot runs: its size at the end is its most. */
	f->extra_bytes_peak = e->policy == SNAP_FORK ? f->extra_bytes :
			      wq_memory(f->threads) + (wp ? f->pool_bytes : 0);
	f->pool_resident_bytes = pool_resident_bytes(&e->pool);
	f->duration_ms = (mono_ns() - e->t_start_ns) / 1000000ULL;
	if (e->tracker) {
		f->dirty_harvests = e->tracker->harvests;
		f->harvest_ms = e->tracker->harvest_ns / 1000000ULL;
	}
}

/* Fork: the child wrote the image, so its figures are read back from it. */
void snap_figures_stored(struct snap_engine *e)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];

	if (img_open(e->cur.file, &r, err) == 0) {
		img_reader_bytes(&r, &e->cur.bytes_raw, &e->cur.bytes_stored);
		img_reader_mix(&r, e->cur.codec_chunks);
		img_close(&r);
	}
}

json_t *snap_compaction_json(struct snap_engine *e)
{
	struct compactor_figures f;

	compactor_figures(&e->compactor, &f);
	return json_pack("{s:I, s:I, s:I, s:I, s:b, s:b, s:b, s:I, s:I, s:f}", "images",
			 (json_int_t)f.images, "failed", (json_int_t)f.failed, "bytes_in",
			 (json_int_t)f.bytes_in, "bytes_out", (json_int_t)f.bytes_out, "running",
			 f.running, "held", f.held, "guest_busy", f.guest_busy, "waiting",
			 (json_int_t)f.waiting, "dropped", (json_int_t)f.dropped, "cpu_ms",
			 (double)f.cpu_ns / 1e6);
}

json_t *snap_engine_stats_json(struct snap_engine *e)
{
	bool running, tracking;
	char base[sizeof(e->track.file)];
	json_t *o;

	pthread_mutex_lock(&e->lock);
	running = e->busy;
	tracking = e->track.tracking;
	snprintf(base, sizeof(base), "%s", tracking ? e->track.file : "");
	pthread_mutex_unlock(&e->lock);
	/* held_*: the copies held now, as guest pages and as the pool bytes they take
	 * (less when compressed under pressure); pool_in_use_bytes is the latter. */
	o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:b}", "pool_bytes",
		      (json_int_t)pool_ready_bytes(&e->pool), "pool_resident_bytes",
		      (json_int_t)pool_resident_bytes(&e->pool), "pool_in_use_bytes",
		      (json_int_t)pool_in_use(&e->pool), "held_raw_bytes",
		      (json_int_t)pool_raw(&e->pool), "held_stored_bytes",
		      (json_int_t)pool_in_use(&e->pool), "faults_parallel_max",
		      (json_int_t)__atomic_load_n(&e->cow.faults_most, __ATOMIC_RELAXED),
		      "fault_threads", e->cow.n_faulters, "running", running);
	/* Write tracking: the image the next incremental snapshot may name as --parent,
	 * and the faults tracking has cost since the last snapshot's instant. */
	json_object_update_new(o, json_pack("{s:b, s:s?, s:I}", "tracking", tracking,
					    "parent", tracking ? base : NULL, "track_faults",
					    (json_int_t)__atomic_load_n(&e->track.faults,
									__ATOMIC_RELAXED)));
	return o;
}

void snap_fail(struct snap_engine *e, int rc, const char *what)
{
	pthread_mutex_lock(&e->lock);
	if (!e->cur.error[0])
		snprintf(e->cur.error, sizeof(e->cur.error), "%s: %s", what, strerror(-rc));
	pthread_mutex_unlock(&e->lock);
}

bool snap_figures_of(struct snap_engine *e, uint64_t id, struct snap_figures *out)
{
	bool found;

	pthread_mutex_lock(&e->lock);
	found = e->cur.id && (id == e->cur.id || id == 0);
	if (found) {
		*out = e->cur;
		if (!out->done) {
			snap_figures_collect(e, out);
			out->duration_ms = (mono_ns() - e->t_start_ns) / 1000000ULL;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return found;
}

/*
 * control_cmd.c - the control socket's commands: status, stats, snapshot (with its
 * storage and lineage options, --wait and the snapshot log), kill, pause, resume and
 * stop, each turned into calls on the VM core and the snapshot engine. Every
 * argument is checked here; a bad one gets an error reply, never a crash.
 */
#include "control_impl.h"
#include "cli.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "vm.h"
#include "linux/lx.h"
#include "../snapshot/compactor.h"
#include "../snapshot/engine.h"
#include "../snapshot/image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static json_t *ctl_status(struct ctl_server *srv)
{
	static const char *const names[] = { "running", "paused", "stopped" };
	struct vm *vm = srv->vm;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return json_pack("{s:s, s:i, s:s, s:I, s:i, s:I}", "state", names[vm_get_state(vm)],
			 "pid", (int)getpid(), "program", vm->proc ? vm->proc->exe : "",
			 "mem_bytes", (json_int_t)vm->ram.size, "vcpus", vm->n_vcpus, "uptime_ms",
			 (json_int_t)((now.tv_sec - srv->started.tv_sec) * 1000 +
				      (now.tv_nsec - srv->started.tv_nsec) / 1000000));
}

/* The exitless socket path: how many guest calls it answered without an exit. */
static json_t *ctl_fastio_stats(struct vm *vm)
{
	struct lx_fastio_stats st = { 0 };

	if (vm->proc)
		lx_fastio_get_stats(vm->proc, &st);
	return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "enabled",
			 (int)st.enabled, "sockets", (json_int_t)st.sockets, "accepted",
			 (json_int_t)st.accepted, "fast_reads", (json_int_t)st.fast_reads,
			 "fast_writes", (json_int_t)st.fast_writes, "records", (json_int_t)st.records,
			 "bytes_out", (json_int_t)st.bytes_out, "read_aheads", (json_int_t)st.prefetches,
			 "bytes_in", (json_int_t)st.bytes_in, "dropped", (json_int_t)st.dropped,
			 "backlogs", (json_int_t)st.backlogs, "lingered", (json_int_t)st.lingered);
}

static json_t *ctl_stats(struct ctl_server *srv)
{
	struct vm *vm = srv->vm;
	json_t *exits = json_object(), *sys = json_object();
	uint64_t total = 0;

	for (int k = 0; k < EXIT_NR; k++) {
		uint64_t n = stats_read(&vm->stats.exits[k]);

		total += n;
		json_object_set_new(exits, stats_exit_name((enum exit_kind)k), json_integer((json_int_t)n));
	}
	json_object_set_new(exits, "total", json_integer((json_int_t)total));
	for (unsigned nr = 0; vm->proc && nr < LX_NR_SYSCALLS; nr++) {
		uint64_t n = stats_read(&vm->proc->sys_count[nr]);

		if (n)
			json_object_set_new(sys, lx_syscall_name(nr), json_integer((json_int_t)n));
	}
	json_t *procs = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "count",
				  lx_tree_count(&vm->tree),
				  "cow_faults", (json_int_t)stats_read(&vm->stats.cow_faults),
				  "touch_faults", (json_int_t)stats_read(&vm->stats.touch_faults),
				  "mem_charged_bytes",
				  (json_int_t)((uint64_t)aspace_set_charged(&vm->spaces) * HUGE_SIZE),
				  "flushes", (json_int_t)stats_read(&vm->stats.flushes),
				  "recycles", (json_int_t)stats_read(&vm->stats.recycles));
	json_t *o = json_pack("{s:o, s:o, s:I, s:I, s:I, s:o, s:o}", "exits", exits, "syscalls",
			      sys, "mem_bytes", (json_int_t)vm->ram.size, "mem_total_bytes",
			      (json_int_t)vm->mem_total, "host_rss_bytes",
			      (json_int_t)vm_host_rss(), "fastio", ctl_fastio_stats(vm),
			      "processes", procs);

	if (o && srv->engine) {
		json_object_set_new(o, "snapshots", snap_engine_stats_json(srv->engine));
		json_object_set_new(o, "compaction", snap_compaction_json(srv->engine));
	}
	return o;
}

static char *ctl_figures_reply(const struct snap_figures *f)
{
	return ctl_line(snap_figures_json(f));
}

/* A snapshot ended: answer the clients that wait for it, tell event listeners. */
void ctl_deliver_snapshot(struct ctl_server *srv)
{
	struct snap_figures f;

	if (!srv->engine || !snap_figures_of(srv->engine, 0, &f) || !f.done)
		return;
	if (srv->snap_log && srv->log_fd >= 0) {
		char *line = ctl_line(snap_figures_json(&f));

		if (line && write(srv->log_fd, line, strlen(line)) < 0)
			log_warn("--snapshot-log %s: %s", srv->snap_log, strerror(errno));
		free(line);
	}
	for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
		struct ctl_client *c = srv->clients[i];

		if (!c)
			continue;
		if (c->wait_id == f.id) {
			c->wait_id = 0;
			ctl_send(c, ctl_figures_reply(&f));
		}
		if (c->events) {
			json_t *ev = json_pack("{s:s}", "event",
					       f.ok ? "snapshot-done" : "snapshot-failed");

			json_object_update_new(ev, snap_figures_json(&f));
			ctl_send(c, ctl_line(ev));
		}
	}
}

/* An image compacted in idle time (or given up): event listeners are told. */
void ctl_deliver_compaction(struct ctl_server *srv)
{
	struct compactor_result r;
	json_t *ev;

	if (!srv->engine || !snap_compaction_last(srv->engine, &r))
		return;
	for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
		struct ctl_client *c = srv->clients[i];

		if (!c || !c->events)
			continue;
		ev = r.ok ? json_pack("{s:s, s:s, s:I, s:I, s:I}", "event", "compacted", "file",
				      r.file, "bytes_in", (json_int_t)r.bytes_in, "bytes_out",
				      (json_int_t)r.bytes_out, "ms", (json_int_t)r.ms) :
			    json_pack("{s:s, s:s, s:s}", "event", "compaction-failed", "file", r.file,
				      "error", r.error);
		ctl_send(c, ctl_line(ev));
	}
}

static char *ctl_snapshot(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req)
{
	json_t *args = json_object_get(req->msg, "args");
	struct snap_request sr;
	struct snap_figures f;
	char err[512];

	if (!srv->engine)
		return ctl_reply_error("snapshots are not available for this VM");
	if (srv->mig)
		return ctl_reply_error("a migration is running; no snapshot until it ended");
	sr = *snap_engine_defaults(srv->engine);
	if (json_is_string(json_object_get(req->msg, "file")))
		sr.file = json_string_value(json_object_get(req->msg, "file"));
	else if (json_is_array(args) && json_is_string(json_array_get(args, 0)))
		sr.file = json_string_value(json_array_get(args, 0));
	if (!sr.file || !sr.file[0]) {
		snprintf(err, sizeof(err), "snapshot needs a file: snapshot FILE [--wait] %s",
			 snap_fields_synopsis());
		return ctl_reply_error(err);
	}
	if (ctl_snapshot_fields(req->msg, &sr, err, sizeof(err)))
		return ctl_reply_error(err);
	if (snap_start(srv->engine, &sr, &f, err, sizeof(err)))
		return ctl_reply_error(err);
	if (json_is_true(json_object_get(req->msg, "wait")) && !f.done) {
		c->wait_id = f.id; /* the reply comes when the snapshot ends */
		return NULL;
	}
	return ctl_figures_reply(&f);
}

static void ctl_set_int(json_t *o, const char *key, uint64_t v)
{
	json_object_set_new(o, key, json_integer((json_int_t)v));
}

static void ctl_set_real(json_t *o, const char *key, double v)
{
	json_object_set_new(o, key, json_real(v));
}

/* `stats regions`: the coverage tracker's view. */
static json_t *ctl_stats_regions(struct ctl_server *srv)
{
	struct tracker *t = srv->engine ? snap_engine_tracker(srv->engine) : NULL;
	double thr = srv->engine ? snap_engine_defaults(srv->engine)->threshold : 0;
	uint64_t hist[COV_HIST_BUCKETS], hot = 0;
	json_t *o, *h;

	if (!t)
		return NULL;
	o = json_object();
	h = json_array();
	pthread_mutex_lock(&t->w.lock);
	coverage_histogram(&t->cov, t->window_s, hist);
	for (uint64_t r = 0; r < t->cov.n_regions; r++)
		hot += coverage_known(&t->cov) && coverage_is_hot(&t->cov, r, thr, t->window_s);
	for (int i = 0; i < COV_HIST_BUCKETS; i++)
		json_array_append_new(h, json_integer((json_int_t)hist[i]));
	ctl_set_int(o, "region_size", t->cov.region_size);
	ctl_set_int(o, "regions", t->cov.n_regions);
	ctl_set_real(o, "threshold", thr);
	ctl_set_int(o, "regions_hot", hot);
	json_object_set_new(o, "histogram", h);
	ctl_set_int(o, "windows", t->cov.windows);
	ctl_set_int(o, "snapshots_observed", t->cov.snapshots);
	ctl_set_real(o, "progress_per_s", t->progress_rate);
	ctl_set_real(o, "window_ms", t->window_s * 1000.0);
	ctl_set_real(o, "last_window_ran_ms", t->last_ran_s * 1000.0);
	ctl_set_real(o, "last_window_wall_ms", t->last_wall_s * 1000.0);
	ctl_set_real(o, "fault_us", t->last_fault_us);
	ctl_set_real(o, "guest_lost_ms", t->lost_s * 1000.0);
	ctl_set_real(o, "longest_stall_ms", t->longest_stall_s * 1000.0);
	ctl_set_real(o, "budget_pct", t->budget.pct);
	ctl_set_real(o, "stall_ms", t->budget.stall_ms);
	ctl_set_int(o, "sampled_windows", t->windows);
	ctl_set_int(o, "sampled_faults", t->faults);
	if (t->budget.audit)
		json_object_set_new(o, "audit", t->audit.audits ?
				    json_pack("{s:f, s:f}", "precision", t->audit.precision,
					      "recall", t->audit.recall) : json_null());
	if (t->budget.audit)
		ctl_set_real(o, "audit_lost_ms", t->audit.lost_s * 1000.0);
	ctl_set_int(o, "dirty_harvests", t->harvests);
	ctl_set_int(o, "harvest_ms", t->harvest_ns / 1000000ULL);
	pthread_mutex_unlock(&t->w.lock);
	return o;
}

/* `kill SIGNAL --pid N`: the signal for a process exec started (ccvm-oci forwards
 * what its exec process is sent). */
static char *ctl_kill_spawned(struct ctl_server *srv, const json_t *jpid, int sig)
{
	json_int_t pid = json_integer_value(jpid);
	int rc;

	if (!json_is_integer(jpid) || pid < 1 || pid > INT32_MAX)
		return ctl_reply_error("kill: \"pid\" must be a guest pid");
	rc = vm_spawn_signal(srv->vm, (int)pid, sig);
	if (rc == -EPERM)
		return ctl_reply_error("kill: that pid is the VM's first process (kill without "
				       "--pid signals it)");
	if (rc)
		return ctl_reply_error("kill: no such guest process");
	return ctl_reply_ok(json_pack("{s:i, s:I, s:s}", "signal", sig, "pid", pid, "action",
				      "sent"));
}

/* `kill SIGNAL`: the signal for the guest process, as if sent to it from outside.
 * Sets *@stop to the VM's exit status when it ends the guest. */
static char *ctl_kill(struct ctl_server *srv, const struct ctl_request *req, int *stop)
{
	const char *arg = json_string_value(json_array_get(json_object_get(req->msg, "args"), 0));
	const json_t *jpid = json_object_get(req->msg, "pid");
	const char *abbrev;
	char name[16];
	int sig, rc;

	if (!arg || ctl_signal_parse(arg, &sig))
		return ctl_reply_error("kill needs a SIGNAL: a name with or without SIG (TERM, "
				       "SIGINT, RTMIN+1) or a number from 1 to 64");
	if (jpid)
		return ctl_kill_spawned(srv, jpid, sig);
	if (!srv->vm->proc)
		return ctl_reply_error("the VM has no guest process to signal");
	rc = lx_sig_from_outside(srv->vm->proc, sig);
	if (rc < 0)
		return ctl_reply_error("the guest's signal queue is full");
	if (rc == 1)
		*stop = 128 + sig;
	abbrev = sig < SIGRTMIN ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(name, sizeof(name), "SIG%s", abbrev);
	else
		snprintf(name, sizeof(name), "SIGRTMIN+%d", sig - SIGRTMIN);
	return ctl_reply_ok(json_pack("{s:i, s:s, s:s}", "signal", sig, "name", name, "action",
				      rc == 1 ? "stopped" : "sent"));
}

char *ctl_dispatch(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req,
			  int *stop)
{
	int rc;

	switch (req->cmd) {
	case CTL_STATUS:
		return ctl_reply_ok(ctl_status(srv));
	case CTL_STATS: {
		const char *what = json_string_value(json_array_get(json_object_get(req->msg, "args"), 0));
		json_t *regions;

		if (!what)
			return ctl_reply_ok(ctl_stats(srv));
		if (strcmp(what, "regions") != 0)
			return ctl_reply_error("unknown stats subject (known: regions)");
		regions = ctl_stats_regions(srv);
		return regions ? ctl_reply_ok(regions) :
				 ctl_reply_error("coverage is not tracked for this VM (start it with "
						 "--coverage-window MS or --snapshot-policy ccow)");
	}
	case CTL_PAUSE:
	case CTL_RESUME:
		/* The user's pause is one level; a snapshot's own pause nests inside it. */
		rc = 0;
		if (req->cmd == CTL_PAUSE && !srv->user_paused)
			rc = vm_pause(srv->vm);
		else if (req->cmd == CTL_RESUME && srv->user_paused)
			rc = vm_resume(srv->vm);
		if (rc)
			return ctl_reply_error("the VM has stopped");
		srv->user_paused = req->cmd == CTL_PAUSE;
		return ctl_reply_ok(json_pack("{s:s}", "state",
					      req->cmd == CTL_PAUSE ? "paused" : "running"));
	case CTL_SNAPSHOT:
		return ctl_snapshot(srv, c, req);
	case CTL_EVENTS:
		c->events = true;
		return ctl_reply_ok(json_pack("{s:s}", "events", "on"));
	case CTL_QUIT:
		*stop = 0;
		return ctl_reply_ok(json_pack("{s:s}", "state", "stopped"));
	case CTL_KILL:
		return ctl_kill(srv, req, stop);
	case CTL_MIGRATE:
		return ctl_migrate(srv, c, req);
	case CTL_EXEC:
		return ctl_exec(srv, c, req);
	default:
		return ctl_reply_error("unknown command");
	}
}

/*
 * control.c - the control socket and the monitor thread that serves it.
 *
 * One thread, never on a vCPU's path, polls the listening socket, its clients and a
 * wake-up pipe, with a one-second timeout that doubles as the tick for housekeeping
 * (refreshing the guest's realtime clock offset). Requests are turned into calls on
 * the VM core (vm_pause, vm_stop, counters); this file issues no KVM ioctls. A client
 * that sends garbage gets an error reply; one that sends an over-long line gets an
 * error and is disconnected; one that stops reading cannot block the thread for more
 * than the send timeout.
 */
#include "control.h"
#include "base/role.h"
#include "cli.h"
#include "ctl_proto.h"
#include "base/log.h"
#include "base/mono.h"
#include "vm.h"
#include "linux/lx.h"
#include "../snapshot/engine.h"
#include "../snapshot/image.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#define CTL_MAX_CLIENTS 16
#define CTL_TICK_MS     1000
#define CTL_MAX_PENDING (1 << 20) /* reply bytes a client may leave unread before it is dropped */
#define CTL_RATE        50.0      /* requests per second a connection may make ... */
#define CTL_BURST       100.0     /* ... after a burst of this many */
#define CTL_FILE_MODE   0600 /* files ccvm creates for its user (the snapshot log) */

struct ctl_client {
	int fd;
	uint64_t wait_id;  /* a snapshot whose end this client waits for (--wait) */
	bool events;       /* asked for event lines */
	size_t len;
	char buf[CTL_MAX_LINE];
	/* Replies not yet taken by the client: sent as its socket accepts them, so a
	 * client that does not read never stalls the control thread nor other clients. */
	char *out;
	size_t out_len;
	double tokens;     /* requests it may still make now (CTL_RATE, CTL_BURST) */
	double refilled_s; /* when the tokens were last counted */
};

struct ctl_server {
	struct vm *vm;
	struct snap_engine *engine;
	const struct snap_schedule *sched;
	const char *snap_log;    /* --snapshot-log: every finished snapshot, one JSON line */
	int log_dir;             /* its directory, opened once (-1: none) */
	const char *log_name;    /* its name in there */
	double sched_due;        /* CLOCK_MONOTONIC seconds of the next periodic snapshot */
	bool user_paused;
	char *path;
	int listen_fd;
	int wake[2];
	pthread_t thread;
	struct timespec started;
	struct ctl_client *clients[CTL_MAX_CLIENTS];
};

static int ctl_sockaddr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		log_err("control socket path too long (%zu bytes; at most %zu): %s", strlen(path),
			sizeof(sa->sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

/* Remove @path only if it is a socket nobody listens on any more. */
static int ctl_clear_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		log_err("--control %s: a file that is not a socket is in the way; not replacing it",
			path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (rc == 0) {
		log_err("--control %s: another process is serving this socket", path);
		return -EADDRINUSE;
	}
	return unlink(path) < 0 ? -errno : 0;
}

static int ctl_listen(const char *path)
{
	struct sockaddr_un sa;
	mode_t old;
	int fd, rc;

	rc = ctl_sockaddr(path, &sa);
	if (!rc)
		rc = ctl_clear_stale(path, &sa);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	old = umask(0177); /* the socket file is created 0600 */
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 8) < 0) {
		rc = -errno;
		log_err("--control %s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

/* Send what @c has pending, as much as its socket takes now. false: drop the client. */
static bool ctl_flush(struct ctl_client *c)
{
	while (c->out_len) {
		ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w <= 0)
			return false;
		memmove(c->out, c->out + w, c->out_len - (size_t)w);
		c->out_len -= (size_t)w;
	}
	return true;
}

/* Queue @line (freed here) for @c and send what its socket takes now. A client with
 * more than CTL_MAX_PENDING bytes unread is marked for dropping (fd -1 then). */
static void ctl_send(struct ctl_client *c, char *line)
{
	size_t n;
	char *grown;

	if (!line || c->fd < 0) {
		free(line);
		return;
	}
	n = strlen(line);
	if (c->out_len + n > CTL_MAX_PENDING || !(grown = realloc(c->out, c->out_len + n))) {
		log_warn("control: a client left %zu reply bytes unread; closing its connection",
			 c->out_len);
		free(line);
		close(c->fd);
		c->fd = -1;
		return;
	}
	memcpy(grown + c->out_len, line, n);
	c->out = grown;
	c->out_len += n;
	free(line);
	if (!ctl_flush(c)) {
		close(c->fd);
		c->fd = -1;
	}
}

static json_t *ctl_status(struct ctl_server *srv)
{
	static const char *const names[] = { "running", "paused", "stopped" };
	struct vm *vm = srv->vm;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return json_pack("{s:s, s:i, s:s, s:I, s:i, s:I}", "state", names[vm_get_state(vm)],
			 "pid", (int)getpid(), "program", vm->proc ? vm->proc->exe : "",
			 "mem_bytes", (json_int_t)vm->mem.size, "vcpus", vm->n_vcpus, "uptime_ms",
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
	json_t *o = json_pack("{s:o, s:o, s:I, s:I, s:o}", "exits", exits, "syscalls", sys,
			      "mem_bytes", (json_int_t)vm->mem.size, "host_rss_bytes",
			      (json_int_t)vm_host_rss(), "fastio", ctl_fastio_stats(vm));

	if (o && srv->engine)
		json_object_set_new(o, "snapshots", snap_engine_stats_json(srv->engine));
	return o;
}

/* The engine calls this from its writer thread when a snapshot ends. */
static void ctl_snapshot_done(void *arg)
{
	struct ctl_server *srv = arg;

	if (write(srv->wake[1], "s", 1) < 0)
		log_warn("control: cannot signal the end of a snapshot");
}

static char *ctl_figures_reply(const struct snap_figures *f)
{
	return ctl_line(snap_figures_json(f));
}

static void ctl_send(struct ctl_client *c, char *line);

/* A snapshot ended: answer the clients that wait for it, tell event listeners. */
static void ctl_deliver_snapshot(struct ctl_server *srv)
{
	struct snap_figures f;

	if (!srv->engine || !snap_figures_of(srv->engine, 0, &f) || !f.done)
		return;
	if (srv->snap_log) {
		/* 0600 whatever the process umask (0 while a guest runs: path.c). */
		int fd = srv->log_dir < 0 ? -EBADF :
			 img_append_open(srv->log_dir, srv->log_name, CTL_FILE_MODE);
		char *line = ctl_line(snap_figures_json(&f));

		if (fd < 0)
			log_warn("--snapshot-log %s: %s", srv->snap_log,
				 fd == -EINVAL ? "not a regular file; not written" : strerror(-fd));
		else if (line && write(fd, line, strlen(line)) < 0)
			log_warn("--snapshot-log %s: %s", srv->snap_log, strerror(errno));
		if (fd >= 0)
			close(fd);
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

/* --compress, --compress-level and --threads (or --snapshot-threads) of `snapshot`
 * into @sr; a message for the user, or NULL. A codec named without a level gets its
 * own default level, not the level the VM's default codec was given. */
static const char *ctl_snapshot_storage(const json_t *msg, struct snap_request *sr)
{
	json_t *codec = json_object_get(msg, "compress"), *level = json_object_get(msg, "compress-level");
	json_t *threads = json_object_get(msg, "threads");

	if (!threads)
		threads = json_object_get(msg, "snapshot-threads");
	if (codec && (!json_is_string(codec) || codec_parse(json_string_value(codec), &sr->codec)))
		return "unknown --compress (known: zstd, lz4, none)";
	if (codec)
		sr->level = 0;
	if (level && !json_is_integer(level))
		return "--compress-level must be an integer (zstd -7 to 19, lz4 1 to 12)";
	if (level)
		sr->level = (int)json_integer_value(level);
	if (level && !sr->level)
		return "--compress-level must not be 0 (zstd -7 to 19, lz4 1 to 12)";
	if (threads && (!json_is_integer(threads) || json_integer_value(threads) < 1 ||
			json_integer_value(threads) > SNAP_THREADS_MAX))
		return "--threads must be an integer from 1 to 16";
	if (threads)
		sr->threads = (int)json_integer_value(threads);
	return NULL;
}

/* --parent PARENT and --track of `snapshot`; a message for the user, or NULL. */
static const char *ctl_snapshot_lineage(const json_t *msg, struct snap_request *sr)
{
	json_t *parent = json_object_get(msg, "parent"), *track = json_object_get(msg, "track");

	if (parent && (!json_is_string(parent) || !json_string_value(parent)[0]))
		return "--parent needs the path of the VM's latest snapshot taken with tracking";
	if (parent)
		sr->parent = json_string_value(parent);
	if (track && !json_is_boolean(track))
		return "--track takes no value";
	if (track)
		sr->track = json_is_true(track);
	return NULL;
}

static char *ctl_snapshot(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req)
{
	const char *bad;
	json_t *args = json_object_get(req->msg, "args"), *pol = json_object_get(req->msg, "policy");
	json_t *rate = json_object_get(req->msg, "rate"), *thr = json_object_get(req->msg, "threshold");
	json_t *ord = json_object_get(req->msg, "save-order"), *pre = json_object_get(req->msg, "precopy");
	json_t *budget = json_object_get(req->msg, "pause-budget-ms");
	struct snap_request sr;
	struct snap_figures f;
	char err[512];

	if (!srv->engine)
		return ctl_reply_error("snapshots are not available for this VM");
	sr = *snap_engine_defaults(srv->engine);
	if (json_is_string(json_object_get(req->msg, "file")))
		sr.file = json_string_value(json_object_get(req->msg, "file"));
	else if (json_is_array(args) && json_is_string(json_array_get(args, 0)))
		sr.file = json_string_value(json_array_get(args, 0));
	if (!sr.file || !sr.file[0])
		return ctl_reply_error("snapshot needs a file: snapshot FILE [--policy ccow|cow|stop|fork] "
				       "[--threshold T] [--save-order hot-first|linear] [--precopy lazy|eager] "
				       "[--pause-budget-ms MS] [--wait] [--rate MB/s] "
				       "[--compress zstd|lz4|none] [--compress-level N] [--threads N] "
				       "[--parent PARENT] [--track]");
	if (pol && (!json_is_string(pol) || snap_policy_parse(json_string_value(pol), &sr.policy)))
		return ctl_reply_error("unknown --policy (known: ccow, cow, stop, fork)");
	if (thr && (!json_is_number(thr) || !cli_real_ok(json_number_value(thr), 0, 1)))
		return ctl_reply_error("--threshold must be a number from 0 to 1");
	if (thr)
		sr.threshold = json_number_value(thr);
	if (ord && (!json_is_string(ord) || snap_order_parse(json_string_value(ord), &sr.order)))
		return ctl_reply_error("unknown --save-order (known: hot-first, linear)");
	if (pre && (!json_is_string(pre) || snap_precopy_parse(json_string_value(pre), &sr.precopy)))
		return ctl_reply_error("unknown --precopy (known: lazy, eager)");
	if (budget && (!json_is_number(budget) || !cli_real_ok(json_number_value(budget), 0, 10000)))
		return ctl_reply_error("--pause-budget-ms must be a number of milliseconds, 0 to 10000");
	if (budget)
		sr.pause_budget_ms = json_number_value(budget);
	if (rate && (!json_is_number(rate) || !cli_real_ok(json_number_value(rate), 0, CLI_MAX_RATE_MBS)))
		return ctl_reply_error("--rate must be a number of MB/s from 0 (unlimited) to 1000000");
	if (rate)
		sr.rate = (uint64_t)(json_number_value(rate) * 1e6);
	bad = ctl_snapshot_storage(req->msg, &sr);
	if (!bad)
		bad = ctl_snapshot_lineage(req->msg, &sr);
	if (bad)
		return ctl_reply_error(bad);
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
	ctl_set_int(o, "dirty_harvests", t->harvests);
	ctl_set_int(o, "harvest_ms", t->harvest_ns / 1000000ULL);
	pthread_mutex_unlock(&t->w.lock);
	return o;
}

/* `kill SIGNAL`: the signal for the guest process, as if sent to it from outside.
 * Sets *@stop to the VM's exit status when it ends the guest. */
static char *ctl_kill(struct ctl_server *srv, const struct ctl_request *req, int *stop)
{
	const char *arg = json_string_value(json_array_get(json_object_get(req->msg, "args"), 0));
	const char *abbrev;
	char name[16];
	int sig, rc;

	if (!arg || ctl_signal_parse(arg, &sig))
		return ctl_reply_error("kill needs a SIGNAL: a name with or without SIG (TERM, "
				       "SIGINT, RTMIN+1) or a number from 1 to 64");
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

static char *ctl_dispatch(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req,
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
	default:
		return ctl_reply_error("unknown command");
	}
}

static void ctl_handle_line(struct ctl_server *srv, struct ctl_client *c, const char *line,
			    size_t len)
{
	struct ctl_request req;
	char err[256];
	int stop = -1;

	if (ctl_parse(line, len, &req, err, sizeof(err))) {
		ctl_send(c, ctl_reply_error(err));
		return;
	}
	ctl_send(c, ctl_dispatch(srv, c, &req, &stop));
	if (stop == 0)
		log_info("stopping the VM: quit requested on the control socket");
	else if (stop > 0)
		log_info("stopping the VM: the signal sent with 'kill' ends the guest (status %d)",
			 stop);
	if (stop >= 0)
		vm_stop(srv->vm, stop);
	ctl_request_free(&req);
}

static void ctl_drop(struct ctl_server *srv, int i)
{
	if (srv->clients[i]->fd >= 0)
		close(srv->clients[i]->fd);
	free(srv->clients[i]->out);
	free(srv->clients[i]);
	srv->clients[i] = NULL;
}

/* One request's worth of @c's allowance: a token bucket, CTL_RATE a second. */
static bool ctl_rate_ok(struct ctl_client *c)
{
	double now = mono_s();

	c->tokens += (now - c->refilled_s) * CTL_RATE;
	if (c->tokens > CTL_BURST)
		c->tokens = CTL_BURST;
	c->refilled_s = now;
	if (c->tokens < 1)
		return false;
	c->tokens -= 1;
	return true;
}

/* Read what the client sent and answer every complete line. Returns false when the
 * client is to be dropped. */
static bool ctl_serve_client(struct ctl_server *srv, struct ctl_client *c)
{
	ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	char *nl;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n < 0)
		return true;
	c->len += (size_t)n;
	while (c->fd >= 0 && (nl = memchr(c->buf, '\n', c->len))) {
		size_t line = (size_t)(nl - c->buf);

		if (ctl_rate_ok(c))
			ctl_handle_line(srv, c, c->buf, line);
		else
			ctl_send(c, ctl_reply_error("too many requests on this connection (at most 50 "
						    "a second); slow down"));
		memmove(c->buf, nl + 1, c->len - line - 1);
		c->len -= line + 1;
	}
	if (c->fd < 0)
		return false;
	if (c->len == sizeof(c->buf)) {
		ctl_send(c, ctl_reply_error("request too long (no newline within 65536 bytes); "
					    "closing the connection"));
		return false;
	}
	return true;
}

/* Only the monitor's own user (or root) may drive it: the socket file is 0600, and
 * the peer's credentials are checked too (a descriptor passed on, a directory with
 * looser rights on the way). */
static bool ctl_peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warn("control: SO_PEERCRED: %s; connection refused", strerror(errno));
		return false;
	}
	if (cred.uid == geteuid() || cred.uid == 0)
		return true;
	log_warn("control: connection from uid %u (pid %d) refused: only uid %u or root may "
		 "use this socket", (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
	return false;
}

static void ctl_accept(struct ctl_server *srv)
{
	int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int i;

	if (fd < 0)
		return;
	if (!ctl_peer_allowed(fd)) {
		close(fd);
		return;
	}
	for (i = 0; i < CTL_MAX_CLIENTS && srv->clients[i]; i++)
		;
	if (i == CTL_MAX_CLIENTS || !(srv->clients[i] = calloc(1, sizeof(struct ctl_client)))) {
		static const char busy[] = "{\"ok\":false,\"error\":\"too many control connections "
					   "(at most 16)\"}\n";

		if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("control: a refused client did not take its reply");
		close(fd);
		return;
	}
	srv->clients[i]->fd = fd;
	srv->clients[i]->tokens = CTL_BURST;
	srv->clients[i]->refilled_s = mono_s();
}

/* Milliseconds until the next periodic snapshot or housekeeping tick. */
static int ctl_timeout_ms(struct ctl_server *srv)
{
	double left;

	if (!srv->sched)
		return CTL_TICK_MS;
	srv->sched_due = snap_schedule_tick(srv->engine, srv->sched, mono_s(), srv->sched_due);
	left = (srv->sched_due - mono_s()) * 1000.0;
	return left < 1 ? 1 : left > CTL_TICK_MS ? CTL_TICK_MS : (int)left;
}

static void *ctl_thread(void *arg)
{
	struct ctl_server *srv = arg;
	struct pollfd pfd[CTL_MAX_CLIENTS + 2];
	int who[CTL_MAX_CLIENTS + 2];

	role_enter(ROLE_CONTROL);
	for (;;) {
		int n = 0, timeout = ctl_timeout_ms(srv);

		/* Clients a reply could not be queued for (ctl_send closed them) go now. */
		for (int i = 0; i < CTL_MAX_CLIENTS; i++)
			if (srv->clients[i] && srv->clients[i]->fd < 0)
				ctl_drop(srv, i);
		pfd[n++] = (struct pollfd){ .fd = srv->wake[0], .events = POLLIN };
		if (srv->listen_fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = srv->listen_fd, .events = POLLIN };
		for (int i = 0; i < CTL_MAX_CLIENTS; i++)
			if (srv->clients[i]) {
				who[n] = i;
				pfd[n++] = (struct pollfd){
					.fd = srv->clients[i]->fd,
					.events = POLLIN | (srv->clients[i]->out_len ? POLLOUT : 0),
				};
			}
		if (poll(pfd, (nfds_t)n, timeout) <= 0) {
			if (srv->vm->proc)
				lx_clock_refresh(srv->vm->proc);
			continue;
		}
		if (pfd[0].revents) {
			char why = 'q';

			if (read(srv->wake[0], &why, 1) == 1 && why == 's') {
				ctl_deliver_snapshot(srv);
				if (srv->sched)
					snap_schedule_prune(srv->sched);
				continue;
			}
			break;
		}
		for (int k = 1; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (srv->listen_fd >= 0 && pfd[k].fd == srv->listen_fd)
				ctl_accept(srv);
			else if (((pfd[k].revents & POLLOUT) && !ctl_flush(srv->clients[who[k]])) ||
				 ((pfd[k].revents & ~POLLOUT) &&
				  !ctl_serve_client(srv, srv->clients[who[k]])))
				ctl_drop(srv, who[k]);
		}
	}
	return NULL;
}

int ctl_start(struct vm *vm, const char *path, struct snap_engine *engine,
	      const struct snap_schedule *sched, struct ctl_server **out)
{
	struct ctl_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv)
		return -ENOMEM;
	srv->vm = vm;
	srv->engine = engine;
	srv->sched = snap_schedule_on(sched) && engine ? sched : NULL;
	srv->snap_log = sched && engine ? sched->log : NULL;
	srv->log_dir = -1;
	if (srv->snap_log) {
		srv->log_dir = img_dir_open(srv->snap_log, &srv->log_name);
		if (srv->log_dir < 0)
			log_warn("--snapshot-log %s: %s", srv->snap_log, strerror(-srv->log_dir));
	}
	if (engine) {
		snap_engine_on_done(engine, ctl_snapshot_done, srv);
	}
	srv->listen_fd = -1;
	clock_gettime(CLOCK_MONOTONIC, &srv->started);
	if (srv->sched)
		srv->sched_due = snap_schedule_first(srv->sched, mono_s());
	if (pipe2(srv->wake, O_CLOEXEC) < 0) {
		rc = -errno;
		if (srv->log_dir >= 0)
			close(srv->log_dir);
		free(srv);
		return rc;
	}
	if (path) {
		srv->listen_fd = ctl_listen(path);
		if (srv->listen_fd < 0) {
			rc = srv->listen_fd;
			goto err;
		}
		srv->path = strdup(path);
	}
	if (pthread_create(&srv->thread, NULL, ctl_thread, srv)) {
		rc = -EAGAIN;
		goto err;
	}
	*out = srv;
	return 0;
err:
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		unlink(path);
	}
	close(srv->wake[0]);
	close(srv->wake[1]);
	if (srv->log_dir >= 0)
		close(srv->log_dir);
	free(srv->path);
	free(srv);
	return rc;
}

void ctl_stop(struct ctl_server *srv)
{
	if (!srv)
		return;
	if (srv->engine)
		snap_engine_on_done(srv->engine, NULL, NULL);
	if (write(srv->wake[1], "q", 1) == 1)
		pthread_join(srv->thread, NULL);
	for (int i = 0; i < CTL_MAX_CLIENTS; i++)
		if (srv->clients[i])
			ctl_drop(srv, i);
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		unlink(srv->path);
	}
	close(srv->wake[0]);
	close(srv->wake[1]);
	if (srv->log_dir >= 0)
		close(srv->log_dir);
	free(srv->path);
	free(srv);
}

/* The monitor runs in another directory: a relative snapshot FILE means the
 * caller's directory. */
static void ctl_absolute_file(json_t *req)
{
	json_t *args = json_object_get(req, "args");
	const char *f = json_string_value(json_array_get(args, 0));
	char cwd[PATH_MAX], *abs;

	if (!f || f[0] == '/' || strcmp(json_string_value(json_object_get(req, "cmd")), "snapshot"))
		return;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, f) < 0)
		return;
	json_array_set_new(args, 0, json_string(abs));
	free(abs);
}

int ctl_client(const char *path, const char *cmd, int argc, char *const *argv)
{
	char err[256], reply[CTL_MAX_LINE];
	struct sockaddr_un sa;
	json_t *req, *msg;
	size_t len = 0;
	char *line;
	int fd, ok = 0;

	req = ctl_request_from_argv(cmd, argc, argv, err, sizeof(err));
	if (!req) {
		log_err("ctl: %s", err);
		return 2;
	}
	ctl_absolute_file(req);
	line = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!line || ctl_sockaddr(path, &sa)) {
		free(line);
		return 1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_err("ctl: cannot connect to %s: %s (is a VM running with --control %s?)", path,
			strerror(errno), path);
		free(line);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (dprintf(fd, "%s\n", line) < 0) {
		log_err("ctl: sending to %s: %s", path, strerror(errno));
		goto out;
	}
	while (len < sizeof(reply) - 1) {
		ssize_t n = read(fd, reply + len, sizeof(reply) - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(reply, '\n', len))
			break;
	}
	reply[len] = '\0';
	if (!len) {
		log_err("ctl: %s closed the connection without a reply", path);
		goto out;
	}
	fputs(reply, stdout);
	if (reply[len - 1] != '\n')
		fputc('\n', stdout);
	msg = json_loads(reply, JSON_DISABLE_EOF_CHECK, NULL);
	ok = json_is_true(json_object_get(msg, "ok"));
	json_decref(msg);
out:
	free(line);
	close(fd);
	return ok ? 0 : 1;
}

/*
 * control_migrate.c - `migrate` on the control socket: its options, the thread that
 * runs the migration (vmm/migrate.c) while the control thread goes on serving, its
 * progress events, and its end: the waiting client's reply, and, once the VM runs on
 * the destination, the end of this one with status 0.
 *
 * The migration thread never touches a client: it queues event lines and its result
 * under the migration's lock and wakes the control thread ('m' on its pipe), which
 * delivers them (ctl_deliver_migration). While a migration runs, snapshots and a
 * second migration are refused, and periodic snapshots wait: both would use the one
 * dirty log.
 */
#include "control_impl.h"
#include "cli.h"
#include "../base/log.h"
#include "../base/role.h"
#include "migrate.h"
#include "tls.h"
#include "vm.h"
#include "../snapshot/engine.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CTL_MIG_EVENTS 64 /* progress lines kept for the control thread at most */

struct ctl_migration {
	struct migration m;
	struct ctl_server *srv;
	char where[CTL_MAX_LINE];
	struct tls_creds tls;        /* --tls-creds, as the client read them */
	char authz[TLS_AUTHZ_MAX];   /* --tls-authz */
	pthread_t thread;
	pthread_mutex_t lock;        /* guards what follows */
	char *events[CTL_MIG_EVENTS];
	int n_events;
	bool done;
	int rc;
	struct migrate_figures fig;
	char err[MIG_ERR_LEN];
};

static const char *const ctl_mig_usage =
	"usage: migrate unix:PATH|tcp:ADDR:PORT [--downtime-ms N] [--max-rounds N] "
	"[--postcopy never|auto|now] [--compress auto|zstd|lz4|none] [--bandwidth MB/s] "
	"[--order coverage|address] [--peer-timeout SECONDS] [--tls-creds DIR "
	"[--tls-authz NAME[,NAME...]] | --insecure] [--wait]";

/* A number option of @msg in [lo, hi] into *@v (left alone when absent): NULL, or what
 * is wrong. */
static const char *ctl_mig_number(const json_t *msg, const char *key, double lo, double hi,
				  double *v, const char *bad)
{
	const json_t *j = json_object_get(msg, key);

	if (!j)
		return NULL;
	if (!json_is_number(j) || !cli_real_ok(json_number_value(j), lo, hi))
		return bad;
	*v = json_number_value(j);
	return NULL;
}

/* migrate's --compress through the snapshot request's table (snapshot/request.c), so
 * that it takes what `ctl snapshot --compress` takes and says the same of a bad value:
 * NULL, or the message in @err. */
static const char *ctl_mig_codec(const json_t *v, struct migration *m, char *err, size_t len)
{
	struct snap_request r = { .codec = m->codec };

	if (ctl_snapshot_field(v, snap_field_find("compress"), "", &r, err, len))
		return err;
	m->codec = r.codec;
	return NULL;
}

/* The options of `migrate` into @m: NULL, or a message for the user (perhaps in @err). */
static const char *ctl_mig_options(const json_t *msg, struct migration *m, char *err, size_t len)
{
	const char *post = json_string_value(json_object_get(msg, "postcopy"));
	const char *ord = json_string_value(json_object_get(msg, "order"));
	double downtime = (double)m->downtime_ms, rounds = -1, bw = 0,
	       peer = (double)m->peer_timeout_s;
	const char *bad;

	bad = ctl_mig_number(msg, "downtime-ms", 0, MIGRATE_DOWNTIME_MS_MAX, &downtime,
			     "--downtime-ms must be a number of milliseconds, 0 to 60000");
	if (!bad)
		bad = ctl_mig_number(msg, "max-rounds", 0, MIGRATE_ROUNDS_MAX, &rounds,
				     "--max-rounds must be an integer from 0 (stop and copy) to 1000");
	if (!bad)
		bad = ctl_mig_number(msg, "bandwidth", 0, CLI_MAX_RATE_MBS, &bw,
				     "--bandwidth must be a number of MB/s from 0 (unlimited) to "
				     "1000000");
	if (!bad)
		bad = ctl_mig_number(msg, "peer-timeout", 1, MIGRATE_PEER_TIMEOUT_S_MAX, &peer,
				     "--peer-timeout must be a whole number of seconds, 1 to 86400");
	if (bad)
		return bad;
	if (peer != (double)(unsigned)peer)
		return "--peer-timeout must be a whole number of seconds, 1 to 86400";
	if (rounds >= 0 && rounds != (double)(unsigned)rounds)
		return "--max-rounds must be an integer from 0 (stop and copy) to 1000";
	if (json_object_get(msg, "compress") &&
	    (bad = ctl_mig_codec(json_object_get(msg, "compress"), m, err, len)))
		return bad;
	if (json_object_get(msg, "postcopy") && (!post || (strcmp(post, "never") &&
							   strcmp(post, "auto") && strcmp(post, "now"))))
		return "--postcopy: never, auto or now";
	if (post && !strcmp(post, "auto"))
		m->postcopy = MIGRATE_POSTCOPY_AUTO;
	if (post && !strcmp(post, "now"))
		m->postcopy = MIGRATE_POSTCOPY_NOW;
	if (json_object_get(msg, "order") && (!ord || (strcmp(ord, "coverage") &&
						       strcmp(ord, "address"))))
		return "--order: coverage or address";
	if (ord && !strcmp(ord, "address"))
		m->order = MIGRATE_ORDER_ADDRESS;
	m->downtime_ms = (uint64_t)downtime;
	m->stop_copy = rounds == 0;
	m->max_rounds = rounds > 0 ? (unsigned)rounds : 0;
	m->bandwidth = (uint64_t)(bw * 1e6);
	m->peer_timeout_s = (unsigned)peer;
	return NULL;
}

static json_t *ctl_mig_figures(const struct ctl_migration *cm)
{
	const struct migrate_figures *f = &cm->fig;

	return json_pack("{s:s, s:b, s:b, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
			 "migrated", cm->where, "precopy", f->precopy, "postcopy", f->postcopy,
			 "requests", (json_int_t)f->requests, "ram_size",
			 (json_int_t)f->ram_size, "bytes", (json_int_t)f->bytes_sent,
			 "bytes_over_ram", f->ram_size ? (double)f->bytes_sent / (double)f->ram_size : 0.0,
			 "downtime_ms", (json_int_t)f->downtime_ms, "total_ms",
			 (json_int_t)f->total_ms, "rounds", (json_int_t)f->rounds,
			 "pages_precopied", (json_int_t)f->pages_precopied, "pages_paused",
			 (json_int_t)f->pages_paused, "pages", (json_int_t)f->pages, "holes",
			 (json_int_t)f->holes, "order",
			 cm->m.order == MIGRATE_ORDER_ADDRESS ? "address" : "coverage");
}

static void ctl_mig_wake(struct ctl_migration *cm)
{
	if (write(cm->srv->wake[1], "m", 1) < 0)
		log_warn("control: cannot signal the migration's progress");
}

/* From the migration thread, after each round. */
static void ctl_mig_progress(void *ctx, const struct mig_progress *p)
{
	struct ctl_migration *cm = ctx;
	char *line = ctl_line(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "event",
					"migration-round", "round", (json_int_t)p->round,
					"bytes_sent", (json_int_t)p->bytes_sent, "dirty_pages",
					(json_int_t)p->dirty_pages, "dirty_rate",
					(json_int_t)p->dirty_rate, "expected_downtime_ms",
					(json_int_t)p->expected_downtime_ms));

	log_info("migration round %llu: %llu bytes sent, %llu pages dirty (%llu bytes/s), "
		 "expected downtime %llu ms", (unsigned long long)p->round,
		 (unsigned long long)p->bytes_sent, (unsigned long long)p->dirty_pages,
		 (unsigned long long)p->dirty_rate, (unsigned long long)p->expected_downtime_ms);
	pthread_mutex_lock(&cm->lock);
	if (line && cm->n_events < CTL_MIG_EVENTS) {
		cm->events[cm->n_events++] = line;
		line = NULL;
	}
	pthread_mutex_unlock(&cm->lock);
	free(line);
	ctl_mig_wake(cm);
}

static void *ctl_mig_thread(void *arg)
{
	struct ctl_migration *cm = arg;
	struct migrate_figures fig;
	char err[MIG_ERR_LEN] = "";
	int rc;

	role_enter(ROLE_CONTROL);
	rc = migrate_send(&cm->m, cm->srv->vm, &fig, err, sizeof(err));
	pthread_mutex_lock(&cm->lock);
	cm->rc = rc;
	cm->fig = fig;
	snprintf(cm->err, sizeof(cm->err), "%s", err);
	cm->done = true;
	pthread_mutex_unlock(&cm->lock);
	ctl_mig_wake(cm);
	return NULL;
}

/* Where the VM may go: tcp: with TLS, or with --insecure to a loopback address; NULL,
 * or the reply that refuses. */
static char *ctl_mig_channel(const struct ctl_request *req, const char *where)
{
	const json_t *insecure = json_object_get(req->msg, "insecure");
	bool tls = json_object_get(req->msg, "tls-creds") != NULL;
	char err[MIG_ERR_LEN];

	if (insecure && !json_is_true(insecure))
		return ctl_reply_error("--insecure takes no value (migrate WHERE --insecure)");
	if (json_object_get(req->msg, "tls-authz") && !tls)
		return ctl_reply_error("--tls-authz goes with --tls-creds");
	if (migrate_channel_check(where, insecure != NULL, tls, err, sizeof(err)))
		return ctl_reply_error(err);
	return NULL;
}

/* One PEM or PSK text of --tls-creds into *@out: NULL, or what is wrong. */
static const char *ctl_mig_tls_text(const json_t *creds, const char *key, char **out)
{
	const json_t *j = json_object_get(creds, key);

	if (!j)
		return NULL;
	if (!json_is_string(j) || json_string_length(j) > TLS_FILE_MAX ||
	    strlen(json_string_value(j)) != json_string_length(j))
		return "--tls-creds: each credential a text of at most 64 KiB";
	*out = strdup(json_string_value(j));
	return *out ? NULL : "out of memory";
}

/* --tls-creds as `ccvm ctl` sends them: the files' texts, {"ca-cert", "client-cert",
 * "client-key"} or {"psk"}, never a directory (the confined monitor opens none). Checked
 * by GnuTLS here, for they come from whoever drives the socket. NULL, or what is wrong. */
static const char *ctl_mig_tls(const json_t *msg, struct ctl_migration *cm, char *err,
			       size_t errlen)
{
	const json_t *creds = json_object_get(msg, "tls-creds");
	const char *authz = json_string_value(json_object_get(msg, "tls-authz"));
	const char *bad = NULL;

	if (!creds)
		return NULL;
	if (!json_is_object(creds))
		return "--tls-creds: `ccvm ctl` reads DIR and sends its files' texts "
		       "({\"ca-cert\", \"client-cert\", \"client-key\"} or {\"psk\"})";
	if (json_object_get(msg, "tls-authz") && (!authz || !tls_authz_ok(authz)))
		return "--tls-authz: NAME[,NAME...], each 1 to 255 bytes";
	bad = ctl_mig_tls_text(creds, "ca-cert", &cm->tls.ca);
	if (!bad)
		bad = ctl_mig_tls_text(creds, "client-cert", &cm->tls.cert);
	if (!bad)
		bad = ctl_mig_tls_text(creds, "client-key", &cm->tls.key);
	if (!bad)
		bad = ctl_mig_tls_text(creds, "psk", &cm->tls.psk);
	if (!bad && !!cm->tls.psk == !!(cm->tls.ca || cm->tls.cert || cm->tls.key))
		bad = "--tls-creds: x509 (ca-cert, client-cert, client-key) or a PSK, one kind";
	if (!bad && tls_creds_check(&cm->tls, TLS_CLIENT, err, errlen))
		bad = err;
	if (bad)
		return bad;
	cm->m.tls = &cm->tls;
	if (authz) {
		snprintf(cm->authz, sizeof(cm->authz), "%s", authz);
		cm->m.authz = cm->authz;
	}
	return NULL;
}

char *ctl_migrate(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req)
{
	const char *where = json_string_value(json_array_get(json_object_get(req->msg, "args"), 0));
	struct ctl_migration *cm;
	char *refused, err[MIG_ERR_LEN];
	const char *bad;

	if (!where || strlen(where) >= sizeof(cm->where))
		return ctl_reply_error(ctl_mig_usage);
	refused = ctl_mig_channel(req, where);
	if (refused)
		return refused;
	if (srv->mig)
		return ctl_reply_error("a migration is running already");
	if (srv->engine && snap_busy(srv->engine))
		return ctl_reply_error("a snapshot is running; migrate once it ended");
	if (__atomic_load_n(&srv->vm->lazy, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&srv->vm->postcopy, __ATOMIC_ACQUIRE))
		return ctl_reply_error("this VM is still loading its memory from its image; try "
				       "again in a moment");
	cm = calloc(1, sizeof(*cm));
	if (!cm)
		return ctl_reply_error("out of memory");
	migrate_init(&cm->m);
	bad = ctl_mig_options(req->msg, &cm->m, err, sizeof(err));
	if (!bad)
		bad = ctl_mig_tls(req->msg, cm, err, sizeof(err));
	if (bad) {
		refused = ctl_reply_error(bad);
		tls_creds_free(&cm->tls);
		migrate_fini(&cm->m);
		free(cm);
		return refused;
	}
	snprintf(cm->where, sizeof(cm->where), "%s", where);
	cm->m.where = cm->where;
	cm->m.tracker = srv->engine ? snap_engine_tracker(srv->engine) : NULL;
	cm->m.progress = ctl_mig_progress;
	cm->m.ctx = cm;
	cm->srv = srv;
	pthread_mutex_init(&cm->lock, NULL);
	if (pthread_create(&cm->thread, NULL, ctl_mig_thread, cm)) {
		pthread_mutex_destroy(&cm->lock);
		tls_creds_free(&cm->tls);
		migrate_fini(&cm->m);
		free(cm);
		return ctl_reply_error("cannot start the migration's thread");
	}
	srv->mig = cm;
	if (srv->engine) /* the stream wants the cores and the disk's reads */
		snap_engine_compaction_hold(srv->engine, true);
	log_info("migrating to %s", where);
	if (json_is_true(json_object_get(req->msg, "wait"))) {
		c->wait_mig = true; /* the reply comes when the migration ends */
		return NULL;
	}
	return ctl_reply_ok(json_pack("{s:s, s:s}", "migration", "started", "to", where));
}

/* The end, told: the reply to waiting clients, the event, the log. */
static void ctl_mig_end(struct ctl_server *srv, struct ctl_migration *cm)
{
	for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
		struct ctl_client *c = srv->clients[i];

		if (c && c->wait_mig) {
			c->wait_mig = false;
			ctl_send(c, cm->rc ? ctl_reply_error(cm->err) : ctl_reply_ok(ctl_mig_figures(cm)));
		}
		if (c && c->events) {
			json_t *ev = cm->rc ? json_pack("{s:s, s:s}", "error", cm->err) :
					      ctl_mig_figures(cm);

			json_object_set_new(ev, "event", json_string(cm->rc ? "migration-failed" :
								     "migration-done"));
			ctl_send(c, ctl_line(ev));
		}
	}
	if (cm->rc && cm->fig.lost)
		log_err("migration to %s failed after the switch to post-copy: %s", cm->where,
			cm->err);
	else if (cm->rc)
		log_warn("migration to %s failed, the VM goes on here: %s", cm->where, cm->err);
	else
		log_always("migrated to %s: the VM runs there now (%llu bytes sent, %.2fx its "
			   "RAM, %llu rounds, paused %llu ms)", cm->where,
			   (unsigned long long)cm->fig.bytes_sent,
			   cm->fig.ram_size ? (double)cm->fig.bytes_sent / (double)cm->fig.ram_size : 0,
			   (unsigned long long)cm->fig.rounds,
			   (unsigned long long)cm->fig.downtime_ms);
}

static void ctl_mig_free(struct ctl_migration *cm)
{
	for (int i = 0; i < cm->n_events; i++)
		free(cm->events[i]);
	pthread_mutex_destroy(&cm->lock);
	tls_creds_free(&cm->tls);
	migrate_fini(&cm->m);
	free(cm);
}

void ctl_deliver_migration(struct ctl_server *srv)
{
	struct ctl_migration *cm = srv->mig;
	char *events[CTL_MIG_EVENTS];
	int n;
	bool done;

	if (!cm)
		return;
	pthread_mutex_lock(&cm->lock);
	n = cm->n_events;
	memcpy(events, cm->events, sizeof(events[0]) * (size_t)n);
	cm->n_events = 0;
	done = cm->done;
	pthread_mutex_unlock(&cm->lock);
	for (int k = 0; k < n; k++) {
		for (int i = 0; i < CTL_MAX_CLIENTS; i++)
			if (srv->clients[i] && srv->clients[i]->events)
				ctl_send(srv->clients[i], strdup(events[k]));
		free(events[k]);
	}
	if (!done)
		return;
	pthread_join(cm->thread, NULL);
	srv->mig = NULL;
	if (srv->engine)
		snap_engine_compaction_hold(srv->engine, false);
	ctl_mig_end(srv, cm);
	if (!cm->rc)
		vm_stop(srv->vm, 0); /* it runs on the destination now */
	else if (cm->fig.lost)
		vm_stop(srv->vm, 1); /* paused for good: neither side runs it */
	ctl_mig_free(cm);
}

void ctl_migration_stop(struct ctl_server *srv)
{
	struct ctl_migration *cm = srv->mig;

	if (!cm)
		return;
	migrate_cancel(&cm->m);
	pthread_join(cm->thread, NULL);
	srv->mig = NULL;
	if (srv->engine)
		snap_engine_compaction_hold(srv->engine, false);
	ctl_mig_free(cm);
}

/*
 * ycsb.c - a YCSB-style load generator for Redis (hiredis).
 *
 * It reproduces what the YCSB core workloads do to Redis through YCSB's Redis binding:
 * records are hashes of 10 fields x 100 bytes (1 KiB) under keys "user<hash>", a load
 * phase inserts them (HMSET), and a run phase reads whole records (HGETALL) and
 * updates one field (HSET) in the mix of workload A (50% read, 50% update), B (95/5),
 * C (read only) or F (50% read, 50% read-modify-write), choosing records with YCSB's
 * scrambled Zipfian distribution (Zipfian constant 0.99 over 10^10 items, FNV-hashed
 * onto the record count, so the hot records are spread over the key space). The
 * binding's sorted-set index for scans is not kept: no core workload here scans.
 *
 * Each client is a thread with its own connection that sends --pipeline requests at a
 * time and reads their replies. Closed loop (the default), the next batch goes as soon
 * as the last reply is in, and a request's latency runs from its batch being sent to
 * its own reply. Open loop (--target OPS, over all clients together), every request
 * has an intended start time on a fixed schedule, a batch goes when its last request
 * is due (at once when the client is behind), and latency runs from each request's
 * intended time to its reply (YCSB's intended latency, wrk2's constant throughput): a
 * server that stalls is charged for every request it held up, not only for the ones
 * in flight (no coordinated omission).
 *
 * Output: one line per second (throughput, p50/p99), overall percentiles weighted by
 * operations (p50/p99/p99.9/max) and the longest stall (the longest time in which no
 * operation completed), with --timeline a CSV per second, with --histograms every
 * second's latency histogram (so that a script can weigh percentiles by operations over
 * any set of seconds, e.g. those in which a snapshot ran), and with --json a last line
 * holding one JSON object with the run phase's figures, t0_unix (the wall-clock start of
 * second 1) among them.
 */
#include <errno.h>
#include <getopt.h>
#include <hiredis.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FIELDS          10
#define FIELD_LEN       100
#define ZIPF_CONSTANT   0.99
#define ZIPF_ITEMS      10000000000ULL /* YCSB's ScrambledZipfianGenerator.ITEM_COUNT */
#define ZIPF_ZETAN      26.46902820178302 /* zeta(10^10, 0.99), as YCSB precomputes it */
#define FNV_OFFSET      0xCBF29CE484222325ULL
#define FNV_PRIME       1099511628211ULL
#define HIST_BUCKETS    1700 /* log buckets of 1% from 1 us: up to ~20 s */
#define HIST_STEP       1.01
#define MAX_SECONDS     3600
#define STOP_LOOK_S     0.05 /* --stop-file is looked for this often by each client */
#define MAX_CLIENTS     256
#define MAX_PIPELINE    1024
#define KEY_LEN         32

enum op { OP_READ, OP_UPDATE, OP_RMW };

struct workload {
	char name;
	double read, update, rmw; /* proportions */
};

static const struct workload workloads[] = {
	{ 'a', 0.50, 0.50, 0 },
	{ 'b', 0.95, 0.05, 0 },
	{ 'c', 1.00, 0, 0 },
	{ 'f', 0.50, 0, 0.50 },
};

struct opts {
	const char *host;
	int port;
	const struct workload *wl;
	uint64_t records;
	uint64_t operations; /* 0: run for duration_s */
	double duration_s;
	int clients, pipeline;
	bool load, run, quiet, json;
	const char *timeline, *histograms;
	uint64_t seed;
	double target;       /* open loop: operations per second, all clients; 0: closed */
	bool reconnect;      /* a broken connection is made again (a server that moved) */
	const char *stop_file; /* the run phase also ends once this file exists */
};

/* A latency histogram: bucket i holds latencies in [1.01^i, 1.01^(i+1)) us. */
struct hist {
	_Atomic uint64_t n[HIST_BUCKETS];
	_Atomic uint64_t max_ns; /* the longest latency in it: no quantile lies above */
};

struct stats {
	struct hist all;
	struct hist *sec;              /* per second of the run phase */
	_Atomic uint64_t ops[MAX_SECONDS];
	_Atomic uint64_t max_ns[MAX_SECONDS];
	_Atomic uint64_t errors;
	_Atomic uint64_t reconnects;   /* --reconnect: connections made again */
	_Atomic uint64_t done;         /* operations finished, all clients */
	_Atomic uint64_t max_lat_ns;   /* the longest operation */
	_Atomic uint64_t last_done_ns; /* when the last operation completed */
	_Atomic uint64_t stall_ns;     /* the longest time without a completion */
	double t0;                     /* the run phase's start (now_s) */
	double t0_unix;                /* the same instant on the wall clock */
};

struct client {
	const struct opts *o;
	struct stats *st;
	int id;
	uint64_t first, count;         /* load: records [first, first + count) */
	uint64_t rng;
	double t0;
	double stop_seen;              /* --stop-file: when it was last looked for */
	int rc;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double unix_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t s_to_ns(double s)
{
	return s > 0 ? (uint64_t)(s * 1e9) : 0;
}

static void atomic_max(_Atomic uint64_t *v, uint64_t x)
{
	uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);

	while (x > cur && !atomic_compare_exchange_weak(v, &cur, x))
		;
}

/* Sleep until now_s() reads @t. */
static void sleep_until(double t)
{
	double d = t - now_s();

	if (d > 0) {
		struct timespec ts = { .tv_sec = (time_t)d, .tv_nsec = (long)((d - (double)(time_t)d) * 1e9) };

		nanosleep(&ts, NULL);
	}
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static double rng_double(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / (double)(1ULL << 53);
}

/* YCSB's Utils.fnvhash64 (FNV-1a over the 8 bytes, low first; absolute value). */
static uint64_t fnv64(uint64_t v)
{
	int64_t h = (int64_t)FNV_OFFSET;

	for (int i = 0; i < 8; i++) {
		h ^= (int64_t)(v & 0xff);
		h = (int64_t)((uint64_t)h * FNV_PRIME);
		v >>= 8;
	}
	return (uint64_t)(h < 0 ? -h : h);
}

static double zipf_alpha, zipf_eta;

static void zipf_init(void)
{
	double zeta2 = 1 + pow(0.5, ZIPF_CONSTANT);

	zipf_alpha = 1 / (1 - ZIPF_CONSTANT);
	zipf_eta = (1 - pow(2.0 / (double)ZIPF_ITEMS, 1 - ZIPF_CONSTANT)) / (1 - zeta2 / ZIPF_ZETAN);
}

/* YCSB's ZipfianGenerator.nextLong over [0, ZIPF_ITEMS), then scrambled onto the
 * records as ScrambledZipfianGenerator does. */
static uint64_t zipf_next(uint64_t *rng, uint64_t records)
{
	double u = rng_double(rng), uz = u * ZIPF_ZETAN;
	uint64_t v;

	if (uz < 1)
		v = 0;
	else if (uz < 1 + pow(0.5, ZIPF_CONSTANT))
		v = 1;
	else
		v = (uint64_t)((double)ZIPF_ITEMS * pow(zipf_eta * u - zipf_eta + 1, zipf_alpha));
	return fnv64(v) % records;
}

/* YCSB's key for record @n (hashed inserts, its default). */
static void key_of(uint64_t n, char key[KEY_LEN])
{
	snprintf(key, KEY_LEN, "user%llu", (unsigned long long)fnv64(n));
}

static void field_value(uint64_t *rng, char v[FIELD_LEN + 1])
{
	for (int i = 0; i < FIELD_LEN; i++)
		v[i] = (char)(' ' + rng_next(rng) % 95);
	v[FIELD_LEN] = '\0';
}

static void hist_add(struct hist *h, double us)
{
	int b = us <= 1 ? 0 : (int)(log(us) / log(HIST_STEP));

	atomic_fetch_add_explicit(&h->n[b < HIST_BUCKETS ? b : HIST_BUCKETS - 1], 1,
				  memory_order_relaxed);	atomic_max(&h->max_ns, (uint64_t)(us * 1e3));
}

/* The latency (us) below which a fraction @q of the histogram lies. */
static double hist_quantile(struct hist *h, double q)
{
	uint64_t total = 0, seen = 0;

	for (int b = 0; b < HIST_BUCKETS; b++)
		total += h->n[b];
	if (!total)
		return 0;
	/* A bucket's upper bound, but never past the longest latency seen: the bucket
	 * that holds the maximum would otherwise report up to 1% more than the max. */
	for (int b = 0; b < HIST_BUCKETS; b++) {
		seen += h->n[b];
		if ((double)seen >= q * (double)total)
			return fmin(pow(HIST_STEP, b + 1), (double)h->max_ns / 1e3);
	}
	return (double)h->max_ns / 1e3;
}

static redisContext *connect_redis(const struct opts *o)
{
	struct timeval tv = { .tv_sec = 10 };
	redisContext *c = redisConnectWithTimeout(o->host, o->port, tv);

	if (!c || c->err) {
		fprintf(stderr, "ycsb: cannot connect to %s:%d: %s\n", o->host, o->port,
			c ? c->errstr : "out of memory");
		if (c)
			redisFree(c);
		return NULL;
	}
	/* Replies may take long while the server is paused for a snapshot. */
	tv.tv_sec = 300;
	redisSetTimeout(c, tv);
	return c;
}

/* Append one request to the pipeline; returns the number of replies it will give. */
static int append_op(struct client *cl, redisContext *c, enum op op, uint64_t rec)
{
	char key[KEY_LEN], field[16], value[FIELD_LEN + 1];

	key_of(rec, key);
	if (op == OP_READ) {
		redisAppendCommand(c, "HGETALL %s", key);
		return 1;
	}
	snprintf(field, sizeof(field), "field%d", (int)(rng_next(&cl->rng) % FIELDS));
	field_value(&cl->rng, value);
	if (op == OP_RMW)
		redisAppendCommand(c, "HGETALL %s", key);
	redisAppendCommand(c, "HSET %s %s %s", key, field, value);
	return op == OP_RMW ? 2 : 1;
}

static void append_insert(struct client *cl, redisContext *c, uint64_t rec)
{
	const char *argv[2 + 2 * FIELDS];
	size_t lens[2 + 2 * FIELDS];
	char key[KEY_LEN], names[FIELDS][16], values[FIELDS][FIELD_LEN + 1];

	key_of(rec, key);
	argv[0] = "HMSET";
	argv[1] = key;
	for (int f = 0; f < FIELDS; f++) {
		snprintf(names[f], sizeof(names[f]), "field%d", f);
		field_value(&cl->rng, values[f]);
		argv[2 + 2 * f] = names[f];
		argv[3 + 2 * f] = values[f];
	}
	for (int i = 0; i < 2 + 2 * FIELDS; i++)
		lens[i] = strlen(argv[i]);
	redisAppendCommandArgv(c, 2 + 2 * FIELDS, argv, lens);
}

/* Read @n replies; false when the connection failed. */
static bool read_replies(struct client *cl, redisContext *c, int n)
{
	for (int i = 0; i < n; i++) {
		redisReply *r;

		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			fprintf(stderr, "ycsb: client %d: %s\n", cl->id, c->errstr);
			return false;
		}
		if (r->type == REDIS_REPLY_ERROR)
			atomic_fetch_add(&cl->st->errors, 1);
		freeReplyObject(r);
	}
	return true;
}

static void *load_client(void *arg)
{
	struct client *cl = arg;
	redisContext *c = connect_redis(cl->o);
	uint64_t end = cl->first + cl->count;

	cl->rc = 1;
	if (!c)
		return NULL;
	for (uint64_t rec = cl->first; rec < end;) {
		int n = 0;

		for (; n < cl->o->pipeline && rec < end; n++, rec++)
			append_insert(cl, c, rec);
		if (!read_replies(cl, c, n))
			goto out;
		atomic_fetch_add(&cl->st->done, (uint64_t)n);
	}
	cl->rc = 0;
out:
	redisFree(c);
	return NULL;
}

static enum op pick_op(struct client *cl)
{
	double r = rng_double(&cl->rng);
	const struct workload *w = cl->o->wl;

	if (r < w->read)
		return OP_READ;
	return r < w->read + w->update ? OP_UPDATE : OP_RMW;
}

static bool run_finished(struct client *cl, double t)
{
	const struct opts *o = cl->o;

	if (o->stop_file && t - cl->stop_seen >= STOP_LOOK_S) {
		cl->stop_seen = t;
		if (access(o->stop_file, F_OK) == 0)
			return true;
	}
	if (o->operations)
		return atomic_load(&cl->st->done) >= o->operations;
	return t - cl->t0 >= o->duration_s;
}

/* One operation completed at @t (now_s) after starting (or being due) at @start. */
static void op_done(struct stats *st, double start, double t)
{
	uint64_t lat = s_to_ns(t - start), t_ns = s_to_ns(t - st->t0);
	uint64_t prev = atomic_exchange(&st->last_done_ns, t_ns);
	long sec = (long)(t - st->t0);

	if (sec >= MAX_SECONDS)
		sec = MAX_SECONDS - 1;
	if (sec < 0)
		sec = 0;
	if (t_ns > prev)
		atomic_max(&st->stall_ns, t_ns - prev);
	atomic_max(&st->max_lat_ns, lat);
	atomic_max(&st->max_ns[sec], lat);
	hist_add(&st->all, (double)lat / 1e3);
	hist_add(&st->sec[sec], (double)lat / 1e3);
	atomic_fetch_add(&st->ops[sec], 1);
	atomic_fetch_add(&st->done, 1);
}

/* Read the replies of @n operations (@kinds their kinds), each timed from @start[i]. */
static bool read_batch(struct client *cl, redisContext *c, int n, const enum op *kinds,
		       const double *start)
{
	for (int i = 0; i < n; i++) {
		if (!read_replies(cl, c, kinds[i] == OP_RMW ? 2 : 1))
			return false;
		op_done(cl->st, start[i], now_s());
	}
	return true;
}

#define RECONNECT_NS 10000000L /* --reconnect tries again this often */

/* --reconnect: @c broke; a new connection to the same address, tried every
 * RECONNECT_NS until the run is over (NULL then). Its operations wait meanwhile, and
 * open loop charges them the wait from their intended starts. */
static redisContext *reconnect(struct client *cl, redisContext *c)
{
	struct timeval tv = { .tv_sec = 1 };
	struct timespec gap = { .tv_nsec = RECONNECT_NS };

	redisFree(c);
	atomic_fetch_add(&cl->st->reconnects, 1);
	while (!run_finished(cl, now_s())) {
		c = redisConnectWithTimeout(cl->o->host, cl->o->port, tv);
		if (c && !c->err) {
			tv.tv_sec = 300;
			redisSetTimeout(c, tv);
			return c;
		}
		if (c)
			redisFree(c);
		nanosleep(&gap, NULL);
	}
	return NULL;
}

static void *run_client(void *arg)
{
	struct client *cl = arg;
	const struct opts *o = cl->o;
	redisContext *c = connect_redis(o);
	/* Open loop: this client's share of the target, its requests evenly spaced. */
	double period = o->target > 0 ? (double)o->clients / o->target : 0;
	double start[MAX_PIPELINE];
	enum op kinds[MAX_PIPELINE];
	uint64_t issued = 0, recs[MAX_PIPELINE];

	cl->rc = 1;
	if (!c)
		return NULL;
	while (!run_finished(cl, now_s())) {
		int ops = o->pipeline;
		double send;

		for (int i = 0; i < ops; i++) {
			kinds[i] = pick_op(cl);
			recs[i] = zipf_next(&cl->rng, o->records);
			append_op(cl, c, kinds[i], recs[i]);
			start[i] = cl->t0 + (double)cl->id / o->target +
				   (double)(issued + (uint64_t)i) * period;
		}
		if (period > 0)
			sleep_until(start[ops - 1]); /* the batch goes when its last one is due */
		send = now_s();
		if (period == 0)
			for (int i = 0; i < ops; i++)
				start[i] = send;
		issued += (uint64_t)ops;
		while (!read_batch(cl, c, ops, kinds, start)) {
			/* (a batch half answered is sent again whole: an update twice) */
			if (!o->reconnect)
				goto out;
			c = reconnect(cl, c);
			if (!c)
				break;
			for (int i = 0; i < ops; i++)
				append_op(cl, c, kinds[i], recs[i]);
		}
	}
	cl->rc = 0;
out:
	if (c)
		redisFree(c);
	return NULL;
}

static int run_clients(const struct opts *o, struct stats *st, void *(*body)(void *),
		       const char *phase)
{
	struct client cl[MAX_CLIENTS];
	pthread_t th[MAX_CLIENTS];
	double t0 = now_s(), last = t0;
	uint64_t last_done = 0;
	int rc = 0, started = 0;

	atomic_store(&st->done, 0);
	st->t0 = t0;
	st->t0_unix = unix_now_s();
	for (int i = 0; i < o->clients; i++) {
		cl[i] = (struct client){ .o = o, .st = st, .id = i, .t0 = t0,
					 .rng = o->seed * 1000003 + (uint64_t)i + 1 };
		cl[i].first = o->records * (uint64_t)i / (uint64_t)o->clients;
		cl[i].count = o->records * (uint64_t)(i + 1) / (uint64_t)o->clients - cl[i].first;
		if (pthread_create(&th[i], NULL, body, &cl[i]) == 0)
			started++;
		else
			break;
	}
	/* Progress once a second until every client is done. */
	bool joined[MAX_CLIENTS] = { false };
	int left = started, shown = 0;

	while (left > 0) {
		usleep(100 * 1000);
		for (int i = 0; i < started; i++)
			if (!joined[i] && pthread_tryjoin_np(th[i], NULL) == 0) {
				joined[i] = true;
				left--;
			}
		if (o->quiet)
			continue;
		if (body == load_client && now_s() - last >= 1) {
			uint64_t d = atomic_load(&st->done);

			printf("%s: %.0f s, %llu records, %.0f/s\n", phase, now_s() - t0,
			       (unsigned long long)d, (double)(d - last_done) / (now_s() - last));
			last = now_s();
			last_done = d;
		}
		for (; body == run_client && shown + 1 <= now_s() - t0 && shown < MAX_SECONDS; shown++)
			printf("%s: %d s, %llu ops/s, p50 %.0f us, p99 %.0f us\n", phase, shown + 1,
			       (unsigned long long)st->ops[shown], hist_quantile(&st->sec[shown], 0.5),
			       hist_quantile(&st->sec[shown], 0.99));
	}
	for (int i = 0; i < started; i++)
		rc |= cl[i].rc;
	return started == o->clients ? rc : 1;
}

/* --histograms: "second,bucket,count" for every non-empty bucket of every second;
 * bucket b holds latencies in [1.01^b, 1.01^(b+1)) us. */
static void write_histograms(const struct opts *o, struct stats *st, int seconds)
{
	FILE *f = fopen(o->histograms, "w");

	if (!f) {
		fprintf(stderr, "ycsb: cannot write %s: %s\n", o->histograms, strerror(errno));
		return;
	}
	fprintf(f, "# bucket b: latency in [%.2f^b, %.2f^(b+1)) us; t0_unix %.6f\n", HIST_STEP,
		HIST_STEP, st->t0_unix);
	fprintf(f, "second,bucket,count\n");
	for (int s = 0; s < seconds && s < MAX_SECONDS; s++)
		for (int b = 0; b < HIST_BUCKETS; b++)
			if (st->sec[s].n[b])
				fprintf(f, "%d,%d,%llu\n", s + 1, b, (unsigned long long)st->sec[s].n[b]);
	if (fclose(f))
		fprintf(stderr, "ycsb: cannot write %s: %s\n", o->histograms, strerror(errno));
}

static void print_run(const struct opts *o, struct stats *st, double secs)
{
	FILE *csv = o->timeline ? fopen(o->timeline, "w") : NULL;
	uint64_t total = 0, stall;
	int n = (int)ceil(secs), full = (int)secs; /* the CSV has whole seconds only */

	if (o->timeline && !csv)
		fprintf(stderr, "ycsb: cannot write %s: %s\n", o->timeline, strerror(errno));
	if (csv)
		fprintf(csv, "second,ops_per_s,p50_us,p99_us,p999_us,max_us\n");
	for (int s = 0; s < n && s < MAX_SECONDS; s++) {
		uint64_t ops = st->ops[s];

		total += ops;
		if (csv && s < full)
			fprintf(csv, "%d,%llu,%.1f,%.1f,%.1f,%.1f\n", s + 1, (unsigned long long)ops,
				hist_quantile(&st->sec[s], 0.5), hist_quantile(&st->sec[s], 0.99),
				hist_quantile(&st->sec[s], 0.999), (double)st->max_ns[s] / 1e3);
	}
	if (csv)
		fclose(csv);
	if (o->histograms)
		write_histograms(o, st, n);
	/* The run's end counts too: a server that never answered again stalled till then. */
	stall = st->stall_ns;
	if (s_to_ns(secs) > st->last_done_ns && s_to_ns(secs) - st->last_done_ns > stall)
		stall = s_to_ns(secs) - st->last_done_ns;
	printf("[OVERALL] workload %c, %d clients, pipeline %d, %s: %llu operations in %.2f s, "
	       "%.0f ops/s; latency p50 %.0f us, p99 %.0f us, p99.9 %.0f us, max %.0f us; "
	       "longest stall %.1f ms; %llu reconnects; %llu errors\n",
	       o->wl->name, o->clients, o->pipeline, o->target > 0 ? "open loop" : "closed loop",
	       (unsigned long long)total, secs, (double)total / secs, hist_quantile(&st->all, 0.5),
	       hist_quantile(&st->all, 0.99), hist_quantile(&st->all, 0.999),
	       (double)st->max_lat_ns / 1e3, (double)stall / 1e6,
	       (unsigned long long)st->reconnects, (unsigned long long)st->errors);
	if (o->json)
		printf("{\"workload\":\"%c\",\"clients\":%d,\"pipeline\":%d,\"target\":%.0f,"
		       "\"open_loop\":%s,\"seconds\":%.3f,\"ops\":%llu,\"ops_per_s\":%.1f,"
		       "\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
		       "\"stall_ms\":%.3f,\"errors\":%llu,\"reconnects\":%llu,\"t0_unix\":%.6f}\n",
		       o->wl->name, o->clients, o->pipeline, o->target, o->target > 0 ? "true" : "false",
		       secs, (unsigned long long)total, (double)total / secs,
		       hist_quantile(&st->all, 0.5), hist_quantile(&st->all, 0.99),
		       hist_quantile(&st->all, 0.999), (double)st->max_lat_ns / 1e3,
		       (double)stall / 1e6, (unsigned long long)st->errors,
		       (unsigned long long)st->reconnects, st->t0_unix);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ycsb [--host H] [--port P] [--workload a|b|c|f] [--records N]\n"
		"            [--operations N | --duration S] [--clients C] [--pipeline P]\n"
		"            [--phase load|run|both] [--timeline FILE.csv] [--seed S] [--quiet]\n"
		"            [--target OPS] [--json] [--histograms FILE.csv] [--reconnect]\n"
		"            [--stop-file FILE]\n"
		"  YCSB core workloads against Redis: A 50%% read / 50%% update, B 95/5, C read\n"
		"  only, F 50%% read / 50%% read-modify-write; scrambled Zipfian (0.99); records\n"
		"  of 10 fields x 100 B in a hash. Defaults: 127.0.0.1:6379, workload a, 100000\n"
		"  records, 30 s, 8 clients, pipeline 1, both phases.\n"
		"  --target OPS: open loop, OPS operations per second over all clients, latency\n"
		"  from each operation's intended start. --json: a last line of JSON figures.\n"
		"  --histograms: each second's latency histogram (second,bucket,count).\n"
		"  --reconnect: the run phase connects again when a connection breaks (a server\n"
		"  that moved), every 10 ms, and sends the batch again.\n"
		"  --stop-file FILE: the run phase also ends once FILE exists (a test's cue).\n");
}

static int parse_count(const char *arg, const char *what, uint64_t min, uint64_t max, uint64_t *v)
{
	char *end;
	unsigned long long x = strtoull(arg, &end, 10);

	if (*end || end == arg || arg[0] == '-' || x < min || x > max) {
		fprintf(stderr, "ycsb: --%s %s: a number from %llu to %llu\n", what, arg,
			(unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*v = x;
	return 0;
}

static int parse_workload(const char *arg, struct opts *o)
{
	for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
		if (strlen(arg) == 1 && (arg[0] | 0x20) == workloads[i].name) {
			o->wl = &workloads[i];
			return 0;
		}
	fprintf(stderr, "ycsb: --workload %s: one of a, b, c, f\n", arg);
	return -1;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'h' },   { "port", required_argument, NULL, 'p' },
		{ "workload", required_argument, NULL, 'w' }, { "records", required_argument, NULL, 'r' },
		{ "operations", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' }, { "clients", required_argument, NULL, 'c' },
		{ "pipeline", required_argument, NULL, 'P' }, { "phase", required_argument, NULL, 'f' },
		{ "timeline", required_argument, NULL, 't' }, { "seed", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },          { "help", no_argument, NULL, 'H' },
		{ "target", required_argument, NULL, 'T' },   { "json", no_argument, NULL, 'j' },
		{ "histograms", required_argument, NULL, 'G' },
		{ "reconnect", no_argument, NULL, 'R' },
		{ "stop-file", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	char *end;
	int ch;

	*o = (struct opts){ .host = "127.0.0.1", .port = 6379, .wl = &workloads[0],
			    .records = 100000, .duration_s = 30, .clients = 8, .pipeline = 1,
			    .load = true, .run = true, .seed = 1 };
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h': o->host = optarg; break;
		case 'R': o->reconnect = true; break;
		case 'S': o->stop_file = optarg; break;
		case 'p':
			if (parse_count(optarg, "port", 1, 65535, &v))
				return -1;
			o->port = (int)v;
			break;
		case 'w':
			if (parse_workload(optarg, o))
				return -1;
			break;
		case 'r':
			if (parse_count(optarg, "records", 1, 1ULL << 40, &o->records))
				return -1;
			break;
		case 'o':
			if (parse_count(optarg, "operations", 1, 1ULL << 50, &o->operations))
				return -1;
			break;
		case 'd':
			o->duration_s = strtod(optarg, &end);
			if (*end || !(o->duration_s > 0) || o->duration_s > MAX_SECONDS - 1) {
				fprintf(stderr, "ycsb: --duration %s: seconds, up to %d\n", optarg,
					MAX_SECONDS - 1);
				return -1;
			}
			break;
		case 'c':
			if (parse_count(optarg, "clients", 1, MAX_CLIENTS, &v))
				return -1;
			o->clients = (int)v;
			break;
		case 'P':
			if (parse_count(optarg, "pipeline", 1, MAX_PIPELINE, &v))
				return -1;
			o->pipeline = (int)v;
			break;
		case 'f':
			o->load = strcmp(optarg, "load") == 0 || strcmp(optarg, "both") == 0;
			o->run = strcmp(optarg, "run") == 0 || strcmp(optarg, "both") == 0;
			if (!o->load && !o->run) {
				fprintf(stderr, "ycsb: --phase %s: load, run or both\n", optarg);
				return -1;
			}
			break;
		case 't': o->timeline = optarg; break;
		case 'G': o->histograms = optarg; break;
		case 's':
			if (parse_count(optarg, "seed", 0, UINT64_MAX, &o->seed))
				return -1;
			break;
		case 'q': o->quiet = true; break;
		case 'j': o->json = true; break;
		case 'T':
			o->target = strtod(optarg, &end);
			if (*end || end == optarg || !(o->target >= 1) || o->target > 1e9) {
				fprintf(stderr, "ycsb: --target %s: operations per second, 1 to 1e9\n",
					optarg);
				return -1;
			}
			break;
		case 'H': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct stats *st;
	double t0;
	int rc = 0;

	if (parse_args(argc, argv, &o))
		return 2;
	st = calloc(1, sizeof(*st));
	if (st)
		st->sec = calloc(MAX_SECONDS, sizeof(*st->sec));
	if (!st || !st->sec) {
		fprintf(stderr, "ycsb: out of memory\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	zipf_init();
	if (o.load) {
		t0 = now_s();
		rc = run_clients(&o, st, load_client, "load");
		printf("[LOAD] %llu records (%d fields x %d B) in %.2f s%s\n",
		       (unsigned long long)o.records, FIELDS, FIELD_LEN, now_s() - t0,
		       rc ? ", FAILED" : "");
	}
	if (o.run && !rc) {
		t0 = now_s();
		rc = run_clients(&o, st, run_client, "run");
		print_run(&o, st, now_s() - t0);
	}
	free(st->sec);
	free(st);
	return rc ? 1 : 0;
}

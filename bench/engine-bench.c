/*
 * engine-bench.c - the snapshot engine's data path measured without a VM.
 *
 * Host threads write plain memory as zipfbench does in a guest (bench/load.c) while
 * the real engine (snapshot/engine.c, real userfaultfd write protection, real image
 * files) snapshots it every --snapshot-every seconds under one policy. So the cost of
 * a policy to the writers can be measured on any machine, /dev/kvm or not:
 *
 *   updates_per_s   all updates over the whole run
 *   during          the writers' rate while a snapshot runs, over their rate in the
 *                   same run's seconds without one (null for --policy none)
 *   max_stall_ms    the longest batch of LOAD_BATCH updates any writer took
 *   p999_batch_ms   the 99.9th percentile of batch durations (weighted by batch: each
 *                   batch is the same number of updates)
 *   snapshots, traps (write faults), snapshots_hot and traps_hot (the snapshots
 *                   with hot regions, once the tracker learnt them from the first
 *                   ones, and their faults), pause_us_max, pause_us_mean, pauses_us (each
 *                   snapshot's), duration_ms_mean, durations_ms (each snapshot's),
 *   and summed over the snapshots pages_copied, regions_hot, regions_precopied
 *   region_coverage with --region-coverage: each region's expected coverage over the
 *                   mean snapshot's duration, as the tracker learnt it
 *   writer_mb_per_s data saved (pages neither zero nor absent) over the snapshots'
 *                   durations: with --threads 0 (nobody writes) the writer's own rate
 *   faults_parallel_max, the most write faults served at once in any snapshot
 *   pool_bytes, pool_resident_bytes  the copy pool after the last snapshot
 *   regions_background  hot regions the background copier copied (summed)
 *   bytes_disk, bytes_raw, bytes_stored  summed over the images: blocks on disk, bytes
 *                   of data pages, and the bytes those took (compressed frames, raw
 *                   pages); --data text makes memory compressible, --compress picks the
 *                   codec (default zstd; auto: one per chunk), --snapshot-threads how
 *                   many compress and write
 *   codec_mix       of the images' chunks holding data, the shares stored raw, lz4, zstd
 *   held_raw_bytes_max, held_stored_bytes_max, held_compressed_bytes  copies held
 *                   for the writer: the most guest bytes and the most pool bytes at
 *                   once in any snapshot, and the bytes compressed under pressure
 *                   (summed); --pool sets the pool (default: --mem), --held-compress
 *                   on compresses them once they fill half of it (default off)
 *   restore_ms      with --restore: an eager restore of the last image into fresh
 *                   memory (the writers stopped), from opening it to the last chunk
 *   pages_precopied, pages_eager (of those, copied in the pause), pause_copy_us_max,
 *                   extra_bytes_peak_max (the most memory a snapshot took besides the
 *                   writers'), with --precopy eager|lazy and --pause-budget-ms
 *   latency         with --latency RATE: the writers run open loop at RATE updates/s
 *                   and each update is timed from its intended start; p99_us, p999_us
 *                   and max_us of the updates that started while a snapshot ran
 *                   ("during") and of the others ("outside"), and late_max_ms
 *   --trap-cost-us N adds N us to every write fault (spun in the fault thread), and
 *                   to a writer's first write to a page the dirty log watches (spun by
 *                   the writer, as a vCPU waits for KVM), a model of a VM host's dearer
 *                   traps; --background-idle 1 runs the copier,
 *                   writer and compressors SCHED_IDLE
 *   compaction      with --compact idle: each image is compacted in idle time once
 *                   its snapshot ended (snapshot/compactor.c), kept until the end;
 *                   the compactor waits while the writers work (as it does while a
 *                   VM's vCPUs do), so after D the writers stop and the run waits
 *                   until the compactor is done (or EB_COMPACT_WAIT_S): its figures
 *                   (images, bytes_in, bytes_out on disk...), compact_s (seconds it
 *                   compacted, held neither by a snapshot nor by the writers' work) and
 *                   during_compaction (the writers' rate in those of them the writers
 *                   ran, over their rate with neither a snapshot nor a compaction
 *                   running; null when none)
 *   presave_ms_mean pre-copy rounds: the mean time from a request to its pause
 *   exact           with --verify: every image equals the memory at its instant
 *                   (the reference is copied inside the pause, which makes pauses
 *                   and stalls longer: measure without --verify)
 *
 *   tracker_lost_ms, tracker_longest_stall_ms, tracker_windows, tracker_faults
 *                   the coverage tracker's cost by its own accounting (mmu/tracker.c):
 *                   its sampled windows read the writers' own dirty log, as a VM's
 *                   tracker reads KVM's, within --coverage-budget and
 *                   --coverage-stall-ms; log_faults, the first writes to watched pages
 *                   the model charged --trap-cost-us for (the tracker's, the pre-copy
 *                   rounds' and the audit's); coverage_audit with --coverage-audit: the
 *                   last audit's precision and recall (null before the first, 15 s in)
 *
 * Without --latency the writers run flat out (closed loop): those figures say how
 * much work a policy takes away from them, not a request latency. Coverage for ccow
 * comes from the tracker's windows and the snapshots' own write sets. Prints one JSON
 * line.
 */
#include "load.h"
#include "../mmu/tracker.h"
#include "../vmm/cli.h"
#include "../base/mono.h"
#include "../snapshot/engine.h"
#include "../snapshot/image.h"
#include "../snapshot/memrestore.h"
#include "../base/log.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EB_SAMPLE_MS 5       /* how often the updates count is read */
#define EB_REGION (2ULL << 20)
#define EB_MIN_POOL (16ULL << 20)
#define EB_EXIT_USAGE 2
#define EB_MAX_PAUSES 1024
#define EB_COMPACT_WAIT_S 300 /* --compact idle: the most the run waits on past D */

struct eb_opts {
	uint64_t mem;
	int threads;
	double alpha;
	bool scatter;
	bool none;               /* --policy none: no snapshots, the baseline */
	enum snap_policy policy;
	double threshold;
	double every_s, duration_s;
	int min_snapshots;       /* --snapshots N: run on past D until N snapshots ended */
	bool gap;                /* every_s counts from a snapshot's end, not its start */
	const char *dir;
	bool verify, json;
	bool region_coverage;    /* print the tracker's per-region coverage */
	uint64_t rate;
	uint64_t seed;
	struct snap_tuning tune;
	enum load_data data;     /* --data zipf|text, or --data-file */
	const char *data_file;
	enum img_codec codec;    /* --compress */
	int level, snap_threads; /* --compress-level, --snapshot-threads */
	bool restore;            /* --restore: time an eager restore of the last image */
	double inc_pct;          /* --incremental-pct: the incremental experiment, below */
	uint64_t pool;           /* --pool; 0: as much as --mem */
	enum snap_precopy precopy;  /* --precopy */
	double pause_budget_ms;  /* --pause-budget-ms */
	double latency_rate;     /* --latency RATE: open loop, updates/s; 0: closed loop */
	enum snap_compact compact; /* --compact */
	struct tracker_budget budget; /* --coverage-budget, --coverage-stall-ms, --coverage-audit */
};

/* The run: load, engine, what the snapshots added up to. */
struct eb {
	struct eb_opts o;
	struct gmem mem;
	struct load load;
	struct snap_engine *e;   /* NULL until set up */
	struct tracker tracker;
	double *cov;             /* --region-coverage, taken before the tracker ends */
	uint64_t n_cov;
	bool tracking;
	uint64_t snapshots, traps, pause_us_max, failed;
	uint64_t pause_us_sum, duration_ms_sum, pages_copied, regions_hot, regions_precopied;
	uint64_t pauses_us[EB_MAX_PAUSES]; /* each snapshot's, the first EB_MAX_PAUSES */
	uint64_t durations_ms[EB_MAX_PAUSES]; /* the same */
	uint64_t data_bytes, faults_parallel_max, pool_bytes, pool_resident_bytes, regions_background;
	uint64_t bytes_disk, bytes_raw, bytes_stored; /* summed over the images */
	uint64_t codec_chunks[IMG_CODEC_AUTO];        /* the same: chunks by codec */
	uint64_t held_raw_max, held_stored_max, held_compressed, snapshots_hot, traps_hot;
	uint64_t extra_bytes_peak_max, pages_precopied, pages_eager, pause_copy_us_max;
	char last_file[4200];    /* --restore: the last image, kept until then */
	double restore_ms;
	uint8_t *dump;           /* --data-file */
	uint64_t dump_len;
	bool exact;
	uint64_t busy_updates, idle_updates, compact_updates;
	double busy_s, idle_s, compact_s, compact_live_s; /* live: the writers ran */
	uint64_t presave_ms_sum;
	json_t *compaction;      /* --compact idle: the compactor's figures at the end */
};

/* What the writers' time is counted as: a snapshot runs, a compaction (not held), or
 * neither. */
enum eb_account { EB_IDLE, EB_SNAPSHOT, EB_COMPACTING };

static void eb_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void eb_usage(FILE *f)
{
	fprintf(f,
		"usage: engine-bench --mem SIZE --threads N --alpha A [--scatter]\n"
		"                    --policy none|stop|cow|ccow|fork [--threshold T]\n"
		"                    --snapshot-every S | --snapshot-gap S --duration D --dir DIR\n"
		"                    [--snapshots N]\n"
		"                    [--verify] [--json] [--region-coverage]\n"
		"                    [--rate BYTES_PER_S] [--seed N] [--fault-threads N]\n"
		"                    [--copier-nice N] [--writer-nice N] [--fault-rt 0|1]\n"
		"                    [--data zipf|text | --data-file DUMP] [--compress auto|zstd|lz4|none]\n"
		"                    [--compress-level N] [--snapshot-threads N] [--restore]\n"
		"                    [--pool SIZE] [--held-compress on|off]\n"
		"                    [--precopy lazy|eager|rounds|auto] [--pause-budget-ms MS]\n"
		"                    [--trap-cost-us N] [--latency UPDATES_PER_S]\n"
		"                    [--background-idle 0|1] [--coverage-budget PCT]\n"
		"                    [--coverage-stall-ms MS] [--coverage-audit] [--compact idle|off]\n"
		"       engine-bench --incremental-pct P --mem SIZE --dir DIR [--policy ...] ...\n"
		"Snapshots plain memory written by N host threads with the real engine; prints\n"
		"one JSON line of figures (see the top of bench/engine-bench.c).\n");
}

static int eb_policy(const char *s, struct eb_opts *o)
{
	o->none = strcmp(s, "none") == 0;
	if (o->none)
		return 0;
	return snap_policy_parse(s, &o->policy);
}

static int eb_bad(const char *opt, const char *val)
{
	fprintf(stderr, "engine-bench: bad value for --%s: '%s'\n", opt, val);
	return -EINVAL;
}

static int eb_int(const char *arg, int lo, int hi, int *out, const char *name)
{
	double d;

	if (cli_parse_real(arg, lo, hi, &d) || d != (int)d)
		return eb_bad(name, arg);
	*out = (int)d;
	return 0;
}

static int eb_parse_one(int c, const char *arg, struct eb_opts *o)
{
	double d;
	int rt;

	switch (c) {
	case 'm': return cli_parse_size(arg, &o->mem) ? eb_bad("mem", arg) : 0;
	case 't':
		if (cli_parse_real(arg, 0, LOAD_MAX_THREADS, &d) || d != (int)d)
			return eb_bad("threads", arg);
		o->threads = (int)d;
		return 0;
	case 'a': return cli_parse_real(arg, 1e-6, 100, &o->alpha) ? eb_bad("alpha", arg) : 0;
	case 'S': o->scatter = true; return 0;
	case 'p': return eb_policy(arg, o) ? eb_bad("policy", arg) : 0;
	case 'T': return cli_parse_real(arg, 0, 1, &o->threshold) ? eb_bad("threshold", arg) : 0;
	case 'e': return cli_parse_real(arg, 0.01, 1e6, &o->every_s) ? eb_bad("snapshot-every", arg) : 0;
	case 'g':
		o->gap = true;
		return cli_parse_real(arg, 0.01, 1e6, &o->every_s) ? eb_bad("snapshot-gap", arg) : 0;
	case 'd': return cli_parse_real(arg, 0.1, 1e6, &o->duration_s) ? eb_bad("duration", arg) : 0;
	case 'n': return eb_int(arg, 0, EB_MAX_PAUSES, &o->min_snapshots, "snapshots");
	case 'D': o->dir = arg; return 0;
	case 'v': o->verify = true; return 0;
	case 'j': o->json = true; return 0;
	case 'R': o->region_coverage = true; return 0;
	case 'r': return cli_parse_size(arg, &o->rate) ? eb_bad("rate", arg) : 0;
	case 's':
		if (cli_parse_real(arg, 0, 1e15, &d) || d != (double)(uint64_t)d)
			return eb_bad("seed", arg);
		o->seed = (uint64_t)d;
		return 0;
	case 'F': return eb_int(arg, 1, SNAP_FAULT_THREADS_MAX, &o->tune.fault_threads, "fault-threads");
	case 'C': return eb_int(arg, 0, 19, &o->tune.copier_nice, "copier-nice");
	case 'W': return eb_int(arg, 0, 19, &o->tune.writer_nice, "writer-nice");
	case 'X':
		if (strcmp(arg, "zipf") && strcmp(arg, "text"))
			return eb_bad("data", arg);
		o->data = strcmp(arg, "text") == 0 ? LOAD_DATA_TEXT : LOAD_DATA_ZIPF;
		return 0;
	case 'E': o->restore = true; return 0;
	case 'I': return cli_parse_real(arg, 0.001, 100, &o->inc_pct) ? eb_bad("incremental-pct", arg) : 0;
	case 'Y': o->data = LOAD_DATA_DUMP; o->data_file = arg; return 0;
	case 'Z': return codec_parse(arg, &o->codec) ? eb_bad("compress", arg) : 0;
	case 'L': return eb_int(arg, CODEC_LZ4_MIN_LEVEL, 19, &o->level, "compress-level");
	case 'N': return eb_int(arg, 1, SNAP_THREADS_MAX, &o->snap_threads, "snapshot-threads");
	case 'O': return cli_parse_size(arg, &o->pool) || o->pool < EB_MIN_POOL ? eb_bad("pool", arg) : 0;
	case 'H':
		if (strcmp(arg, "on") && strcmp(arg, "off"))
			return eb_bad("held-compress", arg);
		o->tune.held_compress = strcmp(arg, "on") == 0;
		return 0;
	case 'c': return snap_precopy_parse(arg, &o->precopy) ? eb_bad("precopy", arg) : 0;
	case 'B':
		return cli_parse_real(arg, 0, 10000, &o->pause_budget_ms) ? eb_bad("pause-budget-ms", arg) : 0;
	case 'k':
		if (eb_int(arg, 0, 100000, &rt, "trap-cost-us"))
			return -EINVAL;
		o->tune.trap_cost_us = (unsigned)rt;
		return 0;
	case 'l': return cli_parse_real(arg, 1, 1e9, &o->latency_rate) ? eb_bad("latency", arg) : 0;
	case 'b':
		if (eb_int(arg, 0, 1, &rt, "background-idle"))
			return -EINVAL;
		o->tune.background_idle = rt;
		return 0;
	case 'U':
		return cli_parse_real(arg, 0, 100, &o->budget.pct) ? eb_bad("coverage-budget", arg) : 0;
	case 'V':
		return cli_parse_real(arg, 0, 1000, &o->budget.stall_ms) ?
			       eb_bad("coverage-stall-ms", arg) : 0;
	case 'A': o->budget.audit = true; return 0;
	case 'K':
		if (strcmp(arg, "idle") && strcmp(arg, "off"))
			return eb_bad("compact", arg);
		o->compact = strcmp(arg, "idle") ? SNAP_COMPACT_OFF : SNAP_COMPACT_IDLE;
		return 0;
	case 'P':
		if (eb_int(arg, 0, 1, &rt, "fault-rt"))
			return -EINVAL;
		o->tune.fault_rt = rt;
		return 0;
	default: return -EINVAL;
	}
}

static int eb_parse(int argc, char **argv, struct eb_opts *o)
{
	static const struct option longs[] = {
		{ "mem", 1, 0, 'm' },       { "threads", 1, 0, 't' },   { "alpha", 1, 0, 'a' },
		{ "scatter", 0, 0, 'S' },   { "policy", 1, 0, 'p' },    { "threshold", 1, 0, 'T' },
		{ "snapshot-every", 1, 0, 'e' }, { "duration", 1, 0, 'd' }, { "dir", 1, 0, 'D' },
		{ "snapshot-gap", 1, 0, 'g' }, { "snapshots", 1, 0, 'n' },
		{ "verify", 0, 0, 'v' },    { "json", 0, 0, 'j' },      { "rate", 1, 0, 'r' },
		{ "seed", 1, 0, 's' },      { "help", 0, 0, 'h' },      { "region-coverage", 0, 0, 'R' },
		{ "fault-threads", 1, 0, 'F' }, { "copier-nice", 1, 0, 'C' }, { "writer-nice", 1, 0, 'W' },
		{ "fault-rt", 1, 0, 'P' },  { "data", 1, 0, 'X' },      { "compress", 1, 0, 'Z' },
		{ "compress-level", 1, 0, 'L' }, { "snapshot-threads", 1, 0, 'N' },
		{ "data-file", 1, 0, 'Y' }, { "restore", 0, 0, 'E' }, { "incremental-pct", 1, 0, 'I' },
		{ "pool", 1, 0, 'O' },      { "held-compress", 1, 0, 'H' },
		{ "precopy", 1, 0, 'c' },   { "pause-budget-ms", 1, 0, 'B' },
		{ "trap-cost-us", 1, 0, 'k' }, { "latency", 1, 0, 'l' },
		{ "background-idle", 1, 0, 'b' }, { "coverage-budget", 1, 0, 'U' },
		{ "coverage-stall-ms", 1, 0, 'V' }, { "coverage-audit", 0, 0, 'A' },
		{ "compact", 1, 0, 'K' },
		{ 0, 0, 0, 0 },
	};
	int c;

	*o = (struct eb_opts){ .mem = 256ULL << 20, .threads = 2, .alpha = 1.0, .policy = SNAP_CCOW,
			       .threshold = SNAP_DEFAULT_THRESHOLD, .every_s = 2, .duration_s = 10,
			       .seed = 1, .codec = SNAP_DEFAULT_CODEC,
			       .precopy = SNAP_DEFAULT_PRECOPY,
			       .pause_budget_ms = SNAP_DEFAULT_PAUSE_BUDGET_MS,
			       .tune = { .fault_threads = SNAP_DEFAULT_FAULT_THREADS,
					 .fault_rt = SNAP_DEFAULT_FAULT_RT,
					 .copier_nice = SNAP_DEFAULT_COPIER_NICE,
					 .writer_nice = SNAP_DEFAULT_WRITER_NICE,
					 .pool_keep_s = SNAP_DEFAULT_POOL_KEEP_S,
					 .held_compress = SNAP_DEFAULT_HELD_COMPRESS,
					 .background_idle = SNAP_DEFAULT_BACKGROUND_IDLE },
			       .budget = tracker_budget_default(SNAP_DEFAULT_THRESHOLD) };
	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		if (c == 'h') {
			eb_usage(stdout);
			return 1;
		}
		if (c == '?' || eb_parse_one(c, optarg, o))
			return -EINVAL;
	}
	o->budget.threshold = o->threshold;
	if (optind < argc) {
		fprintf(stderr, "engine-bench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!o->dir && !o->none) {
		fprintf(stderr, "engine-bench: --dir is required: where the images go\n");
		return -EINVAL;
	}
	if (o->mem % (2ULL << 20) || o->mem < (16ULL << 20)) {
		fprintf(stderr, "engine-bench: --mem must be a multiple of 2 MiB, 16 MiB at least\n");
		return -EINVAL;
	}
	return 0;
}

/* The writers' progress, which times what snapshots observe for the tracker. */
static uint64_t eb_progress(const void *ctx)
{
	return load_updates((struct load *)ctx);
}

/* Does the image at @file hold exactly the memory at its instant (b->load.ref)? */
static bool eb_image_exact(struct eb *b, const char *file)
{
	uint8_t *buf = malloc(IMG_CHUNK);
	char err[IMG_ERR_LEN];
	struct img_reader r;
	bool same = buf && img_open(file, &r, err) == 0;

	if (!same) {
		free(buf);
		return false;
	}
	same = r.info.ram_size == b->mem.size;
	for (uint64_t c = 0; same && c < r.n_chunks; c++)
		same = img_read_chunk(&r, c, buf) == 0 &&
		       memcmp(buf, b->load.ref + c * IMG_CHUNK, IMG_CHUNK) == 0;
	img_close(&r);
	free(buf);
	return same;
}

/* A snapshot finished: add up its figures, check and remove its image. */
static void eb_account(struct eb *b, const struct snap_figures *f)
{
	b->snapshots++;
	b->traps += f->cow_faults;
	if (f->regions_hot) {
		b->snapshots_hot++;
		b->traps_hot += f->cow_faults;
	}
	if (f->pause_us > b->pause_us_max)
		b->pause_us_max = f->pause_us;
	b->pause_us_sum += f->pause_us;
	if (b->snapshots <= EB_MAX_PAUSES) {
		b->pauses_us[b->snapshots - 1] = f->pause_us;
		b->durations_ms[b->snapshots - 1] = f->duration_ms;
	}
	b->duration_ms_sum += f->duration_ms;
	b->presave_ms_sum += f->presave_ms;
	b->pages_copied += f->pages_copied;
	b->regions_hot += f->regions_hot;
	b->regions_precopied += f->regions_precopied;
	b->regions_background += f->regions_background;
	b->pages_precopied += f->pages_precopied;
	b->pages_eager += f->pages_eager;
	if (f->extra_bytes_peak > b->extra_bytes_peak_max)
		b->extra_bytes_peak_max = f->extra_bytes_peak;
	if (f->pause_copy_us > b->pause_copy_us_max)
		b->pause_copy_us_max = f->pause_copy_us;
	b->data_bytes += (f->pages_total - f->pages_zero) * 4096;
	if (f->faults_parallel_max > b->faults_parallel_max)
		b->faults_parallel_max = f->faults_parallel_max;
	b->pool_bytes = f->pool_bytes;
	b->pool_resident_bytes = f->pool_resident_bytes;
	b->bytes_disk += f->bytes;
	b->bytes_raw += f->bytes_raw;
	b->bytes_stored += f->bytes_stored;
	for (int i = 0; i < IMG_CODEC_AUTO; i++)
		b->codec_chunks[i] += f->codec_chunks[i];
	if (f->held_raw_bytes > b->held_raw_max)
		b->held_raw_max = f->held_raw_bytes;
	if (f->held_stored_bytes > b->held_stored_max)
		b->held_stored_max = f->held_stored_bytes;
	b->held_compressed += f->held_compressed_bytes;
	if (!f->ok) {
		b->failed++;
		fprintf(stderr, "engine-bench: snapshot %llu failed: %s\n",
			(unsigned long long)f->id, f->error);
	}
	if (b->o.verify && (!f->ok || !eb_image_exact(b, f->file)))
		b->exact = false;
	if (b->o.compact == SNAP_COMPACT_IDLE && f->ok)
		return; /* the compactor's: removed at the end (eb_remove_images) */
	if (!b->o.restore || !f->ok) {
		unlink(f->file);
		return;
	}
	if (b->last_file[0])
		unlink(b->last_file);
	snprintf(b->last_file, sizeof(b->last_file), "%s", f->file);
}

/* The account of the time since the last sample when no snapshot ran in it. */
static enum eb_account eb_between(struct eb *b)
{
	struct compactor_figures cf;

	if (b->o.compact != SNAP_COMPACT_IDLE)
		return EB_IDLE;
	snap_compaction_figures(b->e, &cf);
	return cf.running && !cf.held && !cf.guest_busy ? EB_COMPACTING : EB_IDLE;
}

/* The updates made since the last sample go to the snapshot's account (@busy), or to
 * the compaction's or the idle one. */
static void eb_sample(struct eb *b, bool busy, uint64_t *last_u, double *last_t)
{
	uint64_t u = load_updates(&b->load);
	double t = mono_s();
	enum eb_account a = busy ? EB_SNAPSHOT : eb_between(b);

	if (a == EB_SNAPSHOT) {
		b->busy_updates += u - *last_u;
		b->busy_s += t - *last_t;
	} else if (a == EB_COMPACTING) {
		b->compact_updates += u - *last_u;
		b->compact_s += t - *last_t;
		b->compact_live_s += t - *last_t;
	} else {
		b->idle_updates += u - *last_u;
		b->idle_s += t - *last_t;
	}
	*last_u = u;
	*last_t = t;
}

/* --compact idle, the snapshots over: the writers stop (the compactor waits while they
 * work) and the run waits until the compactor has no image left (or EB_COMPACT_WAIT_S),
 * counting the seconds it compacted. */
static void eb_compaction_wait(struct eb *b)
{
	double t0 = mono_s(), last = t0;
	struct compactor_figures cf;

	if (b->o.compact != SNAP_COMPACT_IDLE)
		return;
	load_stop(&b->load);
	for (;;) {
		snap_compaction_figures(b->e, &cf);
		/* Every image the snapshots handed over accounted for (the last one is handed
		 * over just after its snapshot says it is done). */
		if ((cf.images + cf.failed + cf.dropped >= b->snapshots - b->failed && !cf.running &&
		     !cf.waiting) || mono_s() - t0 > EB_COMPACT_WAIT_S)
			break;
		eb_sleep_ms(EB_SAMPLE_MS);
		if (cf.running && !cf.held && !cf.guest_busy)
			b->compact_s += mono_s() - last;
		last = mono_s();
	}
}

/* --compact idle: the images kept for the compactor, removed. */
static void eb_remove_images(struct eb *b)
{
	char file[4200];

	if (b->o.compact != SNAP_COMPACT_IDLE)
		return;
	for (uint64_t i = 1; i <= b->snapshots + b->failed; i++) {
		snprintf(file, sizeof(file), "%s/engine-bench-%d-%llu.img", b->o.dir, (int)getpid(),
			 (unsigned long long)i);
		if (strcmp(file, b->last_file))
			unlink(file);
	}
}

/* Start a snapshot; its id, or 0 when it could not start. */
static uint64_t eb_start(struct eb *b)
{
	struct snap_request req = *snap_engine_defaults(b->e);
	struct snap_figures now;
	char file[4200], err[512] = "";

	snprintf(file, sizeof(file), "%s/engine-bench-%d-%llu.img", b->o.dir, (int)getpid(),
		 (unsigned long long)b->snapshots + b->failed + 1);
	req.file = file;
	req.compact = b->o.compact;
	if (snap_start(b->e, &req, &now, err, sizeof(err))) {
		fprintf(stderr, "engine-bench: %s\n", err);
		return 0;
	}
	return now.id;
}

/* Take one snapshot into @file (incremental on @parent when not NULL) and wait for it. */
static int eb_one(struct eb *b, const char *file, const char *parent, struct snap_figures *f)
{
	struct snap_request req = *snap_engine_defaults(b->e);
	struct snap_figures now;
	char err[512] = "";

	req.file = file;
	req.parent = parent;
	req.track = true;
	if (snap_start(b->e, &req, &now, err, sizeof(err))) {
		fprintf(stderr, "engine-bench: %s\n", err);
		return -EIO;
	}
	while (snap_figures_of(b->e, now.id, f) && !f->done)
		eb_sleep_ms(EB_SAMPLE_MS);
	if (!f->ok)
		fprintf(stderr, "engine-bench: snapshot failed: %s\n", f->error);
	return f->ok ? 0 : -EIO;
}

/*
 * --incremental-pct P: a full snapshot with tracking, then P% of the pages (chosen at
 * random, the same each run) rewritten by this thread as a guest would (each first
 * write traps once: the cost of tracking), then an incremental snapshot. Prints the
 * full and incremental images' bytes on disk and durations, the pages it held, the
 * tracking faults and the time the rewrite took. Writer threads (--threads) run
 * throughout if asked for; the experiment is meant with --threads 0.
 */
static int eb_incremental(struct eb *b)
{
	char full[4200], inc[4200];
	struct snap_figures f0, f1;
	uint64_t rng = b->o.seed, pages = b->mem.size / PAGE_SIZE, written = 0;
	double t0;
	int rc;

	snprintf(full, sizeof(full), "%s/engine-bench-%d-full.img", b->o.dir, (int)getpid());
	snprintf(inc, sizeof(inc), "%s/engine-bench-%d-inc.img", b->o.dir, (int)getpid());
	rc = eb_one(b, full, NULL, &f0);
	t0 = mono_s();
	for (uint64_t p = 0; !rc && p < pages; p++)
		if ((double)(splitmix64(&rng) >> 11) * 0x1.0p-53 * 100.0 < b->o.inc_pct) {
			((volatile uint8_t *)b->mem.host)[p * PAGE_SIZE + p % PAGE_SIZE] ^= 0x5a;
			written++;
		}
	t0 = mono_s() - t0;
	if (!rc)
		rc = eb_one(b, inc, full, &f1);
	if (!rc)
		printf("{\"incremental_pct\":%g,\"pages\":%llu,\"pages_rewritten\":%llu,"
		       "\"rewrite_ms\":%.1f,\"full_bytes\":%llu,\"full_ms\":%llu,\"inc_bytes\":%llu,"
		       "\"inc_ms\":%llu,\"pages_held\":%llu,\"track_faults\":%llu,\"compress\":\"%s\"}\n",
		       b->o.inc_pct, (unsigned long long)pages, (unsigned long long)written, t0 * 1e3,
		       (unsigned long long)f0.bytes, (unsigned long long)f0.duration_ms,
		       (unsigned long long)f1.bytes, (unsigned long long)f1.duration_ms,
		       (unsigned long long)f1.pages_held, (unsigned long long)f1.track_faults,
		       codec_name(b->o.codec));
	unlink(full);
	unlink(inc);
	return rc;
}

/*
 * Snapshots every S seconds (the first after S, so the run has idle seconds to compare
 * with), start to start, or with --snapshot-gap S seconds after the previous one ended,
 * until D (and on until --snapshots N have ended, so that a slow machine takes as many
 * as a fast one); a snapshot still running at D runs to its end. The count of updates is
 * sampled every EB_SAMPLE_MS and each interval goes to the busy account when a
 * snapshot ran in it.
 */
static int eb_loop(struct eb *b)
{
	double t0 = mono_s(), last_t = t0, due = t0 + b->o.every_s;
	uint64_t last_u = load_updates(&b->load), id = 0;
	struct snap_figures f;

	for (;;) {
		double now = mono_s();
		bool running = id && snap_figures_of(b->e, id, &f) && !f.done;
		bool more;

		if (id && !running) {
			load_set_busy(&b->load, false);
			eb_sample(b, true, &last_u, &last_t);
			eb_account(b, &f);
			id = 0;
			if (b->o.gap) /* the same idle time after every policy's snapshot */
				due = mono_s() + b->o.every_s;
		}
		more = now - t0 < b->o.duration_s ||
		       (!b->o.none && b->snapshots < (uint64_t)b->o.min_snapshots);
		if (!more && !id)
			break;
		if (!b->o.none && !id && now >= due && more) {
			eb_sample(b, false, &last_u, &last_t);
			load_set_busy(&b->load, true);
			id = eb_start(b);
			if (!id)
				return -EIO;
			due = b->o.gap ? INFINITY : due + b->o.every_s;
			if (due < now)
				due = now + b->o.every_s;
			continue;
		}
		eb_sleep_ms(EB_SAMPLE_MS);
		eb_sample(b, id != 0, &last_u, &last_t);
	}
	return 0;
}

/* --data-file: the dump, whole blocks of it, into memory. */
static int eb_read_dump(struct eb *b)
{
	FILE *f = fopen(b->o.data_file, "rb");
	long n;
	int rc = 0;

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < LOAD_BLOCK) {
		fclose(f);
		return -EINVAL;
	}
	b->dump_len = (uint64_t)n / LOAD_BLOCK * LOAD_BLOCK;
	b->dump = malloc(b->dump_len);
	rewind(f);
	if (!b->dump)
		rc = -ENOMEM;
	else if (fread(b->dump, 1, b->dump_len, f) != b->dump_len)
		rc = -EIO;
	fclose(f);
	return rc;
}

static int eb_setup(struct eb *b)
{
	struct snap_target t = { .mem = &b->mem, .ops = &load_snap_ops, .ctx = &b->load };
	struct snap_config cfg;
	struct tracker_log log;
	uint64_t pool = b->o.pool ? b->o.pool : b->o.mem < EB_MIN_POOL ? EB_MIN_POOL : b->o.mem;
	int rc = gmem_map(&b->mem, b->o.mem);

	if (rc)
		return rc;
	if (b->o.data_file) {
		rc = eb_read_dump(b);
		if (rc)
			return rc;
	}
	rc = load_start(&b->load, &b->mem, &(struct load_opts){ .threads = b->o.threads,
							       .alpha = b->o.alpha,
							       .scatter = b->o.scatter,
							       .seed = b->o.seed,
							       .reference = b->o.verify,
							       .data = b->o.data, .dump = b->dump,
							       .dump_len = b->dump_len,
							       .rate = b->o.latency_rate,
							       .log_fault_us = b->o.tune.trap_cost_us });
	if (rc || b->o.none)
		return rc;
	/* The tracker reads the writers' own dirty log, as a VM's reads KVM's, and its
	 * windows' faults cost what --trap-cost-us says (load.h). */
	load_dirty_log(&b->load, &log);
	rc = tracker_init(&b->tracker, &log, b->mem.host, b->mem.size, EB_REGION, 0,
			  (struct tracker_progress){ .read = eb_progress, .ctx = &b->load },
			  &b->o.budget);
	if (rc)
		return rc;
	b->tracking = true;
	snap_config_defaults(&cfg);
	cfg.pool_bytes = pool;
	cfg.tracker = &b->tracker;
	cfg.region_size = EB_REGION;
	cfg.tune = b->o.tune;
	cfg.def = (struct snap_request){ .policy = b->o.policy, .rate = b->o.rate,
					 .threshold = b->o.threshold,
					 .precopy = b->o.precopy,
					 .pause_budget_ms = b->o.pause_budget_ms,
					 .codec = b->o.codec, .level = b->o.level,
					 .threads = b->o.snap_threads };
	return snap_engine_new(&t, &cfg, &b->e);
}

/* --restore, once the writers stopped: the last image loaded eagerly into fresh
 * memory (as `ccvm restore` loads a VM's RAM), timed from the open to the last chunk,
 * then removed. */
static int eb_time_restore(struct eb *b)
{
	char err[IMG_ERR_LEN];
	struct img_reader r;
	struct gmem fresh;
	double t0 = mono_s();
	int rc;

	if (!b->o.restore || !b->last_file[0])
		return 0;
	rc = gmem_map(&fresh, b->mem.size);
	if (rc)
		return rc;
	rc = img_open(b->last_file, &r, err);
	if (rc) {
		fprintf(stderr, "engine-bench: %s: %s\n", b->last_file, err);
	} else {
		rc = memrestore_eager(b->last_file, &r, &fresh);
		img_close(&r);
	}
	b->restore_ms = (mono_s() - t0) * 1e3;
	gmem_unmap(&fresh);
	unlink(b->last_file);
	return rc;
}

/* Writers and engine stopped; the figures stay readable until eb_free. */
static void eb_stop(struct eb *b)
{
	load_stop(&b->load);
	snap_engine_free(b->e);
	b->e = NULL;
	if (b->tracking)
		tracker_fini(&b->tracker);
	b->tracking = false;
}

static void eb_free(struct eb *b)
{
	json_decref(b->compaction); /* (when not printed) */
	free(b->cov);
	free(b->dump);
	load_fini(&b->load);
	gmem_unmap(&b->mem);
}

static const char *eb_policy_name(const struct eb_opts *o)
{
	return o->none ? "none" : snap_policy_name(o->policy);
}

/* --region-coverage: each region's coverage over the mean snapshot's duration (with
 * none, the tracker's window), as the tracker learnt it from the snapshots and its
 * windows (bench/threshold-sweep.py predicts from it). Read before eb_stop, which ends
 * the tracker. */
static void eb_take_coverage(struct eb *b)
{
	uint64_t n = b->tracker.cov.n_regions;

	if (!b->o.region_coverage || !b->tracking || !n)
		return;
	b->cov = calloc(n, sizeof(*b->cov));
	if (b->cov)
		b->n_cov = tracker_region_coverage(&b->tracker, b->snapshots ?
						   (double)b->duration_ms_sum /
						   (double)b->snapshots / 1000.0 :
						   b->tracker.window_s, b->cov, n);
}

static json_t *eb_region_coverage(const struct eb *b)
{
	json_t *a = json_array();

	for (uint64_t r = 0; r < b->n_cov; r++)
		json_array_append_new(a, json_real(b->cov[r])); /* full precision: near 1 matters */
	return a;
}

/* The first EB_MAX_PAUSES snapshots' @each (pauses_us or durations_ms), in order. */
static json_t *eb_each(const struct eb *b, const uint64_t *each)
{
	json_t *a = json_array();

	for (uint64_t i = 0; i < b->snapshots && i < EB_MAX_PAUSES; i++)
		json_array_append_new(a, json_integer((json_int_t)each[i]));
	return a;
}

/* --latency: updates started while a snapshot ran (@which LOAD_BUSY) or not. */
static json_t *eb_latency_of(const struct eb *b, int which)
{
	const struct load *l = &b->load;

	return json_pack("{s:I, s:f, s:f, s:f}", "updates", (json_int_t)load_latency_count(l, which),
			 "p99_us", (double)load_latency_quantile_ns(l, which, 0.99) / 1e3,
			 "p999_us", (double)load_latency_quantile_ns(l, which, 0.999) / 1e3,
			 "max_us", (double)load_latency_max_ns(l, which) / 1e3);
}

static json_t *eb_latency(const struct eb *b)
{
	uint64_t late = 0;

	for (int i = 0; i < b->load.o.threads; i++)
		late = b->load.t[i].late_ns > late ? b->load.t[i].late_ns : late;
	return json_pack("{s:f, s:o, s:o, s:f}", "rate", b->o.latency_rate, "during",
			 eb_latency_of(b, LOAD_BUSY), "outside", eb_latency_of(b, LOAD_IDLE),
			 "late_max_ms", (double)late / 1e6);
}

/* The tracker's cost by its own accounting (mmu/tracker.c), what the model charged
 * (load.h), and with --coverage-audit the last audit. */
static void eb_print_tracker(const struct eb *b, json_t *o)
{
	const struct tracker *t = &b->tracker;

	json_object_set_new(o, "tracker_lost_ms", json_real(t->lost_s * 1e3));
	json_object_set_new(o, "tracker_longest_stall_ms", json_real(t->longest_stall_s * 1e3));
	json_object_set_new(o, "tracker_windows", json_integer((json_int_t)t->windows));
	json_object_set_new(o, "tracker_faults", json_integer((json_int_t)t->faults));
	json_object_set_new(o, "log_faults", json_integer((json_int_t)b->load.log_faults));
	json_object_set_new(o, "coverage_budget_pct", json_real(t->budget.pct));
	json_object_set_new(o, "coverage_stall_ms", json_real(t->budget.stall_ms));
	if (t->budget.audit)
		json_object_set_new(o, "coverage_audit", t->audit.audits ?
				    json_pack("{s:f, s:f}", "precision", t->audit.precision,
					      "recall", t->audit.recall) : json_null());
}

static void eb_print(struct eb *b, double seconds)
{
	double idle_rate = b->idle_s > 0 ? (double)b->idle_updates / b->idle_s : 0;
	double busy_rate = b->busy_s > 0 ? (double)b->busy_updates / b->busy_s : 0;
	json_t *o = json_object();
	char *text;

	json_object_set_new(o, "policy", json_string(eb_policy_name(&b->o)));
	json_object_set_new(o, "mem", json_integer((json_int_t)b->o.mem));
	json_object_set_new(o, "threads", json_integer(b->o.threads));
	json_object_set_new(o, "alpha", json_real(b->o.alpha));
	json_object_set_new(o, "scatter", json_boolean(b->o.scatter));
	json_object_set_new(o, "threshold", b->o.policy == SNAP_CCOW && !b->o.none ?
				json_real(b->o.threshold) : json_null());
	json_object_set_new(o, "seconds", json_real(seconds));
	json_object_set_new(o, "updates_per_s", json_real((double)load_updates(&b->load) / seconds));
	json_object_set_new(o, "during", b->o.none || !b->snapshots || idle_rate <= 0 ?
				json_null() : json_real(busy_rate / idle_rate));
	json_object_set_new(o, "snapshot_seconds", json_real(b->busy_s));
	json_object_set_new(o, "presave_ms_mean", b->snapshots ?
				json_real((double)b->presave_ms_sum / (double)b->snapshots) :
				json_null());
	if (b->compaction) {
		json_object_set_new(o, "compaction", b->compaction);
		b->compaction = NULL;
		json_object_set_new(o, "compact_s", json_real(b->compact_s));
		json_object_set_new(o, "during_compaction", b->compact_live_s > 0 && idle_rate > 0 ?
					json_real((double)b->compact_updates / b->compact_live_s /
						  idle_rate) :
					json_null());
	}
	json_object_set_new(o, "max_stall_ms", json_real((double)load_max_batch_ns(&b->load) / 1e6));
	json_object_set_new(o, "p999_batch_ms",
			    json_real((double)load_batch_quantile_ns(&b->load, 0.999) / 1e6));
	json_object_set_new(o, "snapshots", json_integer((json_int_t)b->snapshots));
	json_object_set_new(o, "failed", json_integer((json_int_t)b->failed));
	json_object_set_new(o, "traps", json_integer((json_int_t)b->traps));
	json_object_set_new(o, "snapshots_hot", json_integer((json_int_t)b->snapshots_hot));
	json_object_set_new(o, "traps_hot", json_integer((json_int_t)b->traps_hot));
	json_object_set_new(o, "pause_us_max", json_integer((json_int_t)b->pause_us_max));
	json_object_set_new(o, "pause_us_mean", b->snapshots ?
				json_real((double)b->pause_us_sum / (double)b->snapshots) : json_null());
	json_object_set_new(o, "duration_ms_mean", b->snapshots ?
				json_real((double)b->duration_ms_sum / (double)b->snapshots) :
				json_null());
	/* Summed over the snapshots. */
	json_object_set_new(o, "pages_copied", json_integer((json_int_t)b->pages_copied));
	json_object_set_new(o, "regions_hot", json_integer((json_int_t)b->regions_hot));
	json_object_set_new(o, "regions_precopied", json_integer((json_int_t)b->regions_precopied));
	json_object_set_new(o, "pauses_us", eb_each(b, b->pauses_us));
	json_object_set_new(o, "durations_ms", eb_each(b, b->durations_ms));
	json_object_set_new(o, "regions_background", json_integer((json_int_t)b->regions_background));
	json_object_set_new(o, "writer_mb_per_s", b->duration_ms_sum ?
				json_real((double)b->data_bytes / 1e3 / (double)b->duration_ms_sum) :
				json_null());
	json_object_set_new(o, "faults_parallel_max",
			    json_integer((json_int_t)b->faults_parallel_max));
	json_object_set_new(o, "pool_bytes", json_integer((json_int_t)b->pool_bytes));
	json_object_set_new(o, "pool_resident_bytes", json_integer((json_int_t)b->pool_resident_bytes));
	json_object_set_new(o, "data", json_string(b->o.data == LOAD_DATA_TEXT ? "text" :
						   b->o.data == LOAD_DATA_DUMP ? b->o.data_file : "zipf"));
	json_object_set_new(o, "compress", json_string(codec_name(b->o.codec)));
	json_object_set_new(o, "compress_level", json_integer(b->o.level ? b->o.level :
						  codec_default_level(b->o.codec)));
	json_object_set_new(o, "snapshot_threads", json_integer(b->o.snap_threads ?
						    b->o.snap_threads : SNAP_DEFAULT_THREADS));
	/* Summed over the images: blocks on disk, bytes of data pages, bytes they took. */
	json_object_set_new(o, "bytes_disk", json_integer((json_int_t)b->bytes_disk));
	json_object_set_new(o, "bytes_raw", json_integer((json_int_t)b->bytes_raw));
	json_object_set_new(o, "bytes_stored", json_integer((json_int_t)b->bytes_stored));
	json_object_set_new(o, "codec_mix", snap_codec_mix_json(b->codec_chunks));
	json_object_set_new(o, "held_raw_bytes_max", json_integer((json_int_t)b->held_raw_max));
	json_object_set_new(o, "held_stored_bytes_max", json_integer((json_int_t)b->held_stored_max));
	json_object_set_new(o, "held_compressed_bytes", json_integer((json_int_t)b->held_compressed));
	json_object_set_new(o, "restore_ms", b->restore_ms > 0 ? json_real(b->restore_ms) : json_null());
	json_object_set_new(o, "precopy", json_string(snap_precopy_name(b->o.precopy)));
	json_object_set_new(o, "pause_budget_ms", json_real(b->o.pause_budget_ms));
	json_object_set_new(o, "trap_cost_us", json_integer(b->o.tune.trap_cost_us));
	json_object_set_new(o, "background_idle", json_boolean(b->o.tune.background_idle));
	json_object_set_new(o, "pages_precopied", json_integer((json_int_t)b->pages_precopied));
	json_object_set_new(o, "pages_eager", json_integer((json_int_t)b->pages_eager));
	json_object_set_new(o, "pause_copy_us_max", json_integer((json_int_t)b->pause_copy_us_max));
	json_object_set_new(o, "extra_bytes_peak_max",
			    json_integer((json_int_t)b->extra_bytes_peak_max));
	if (b->o.latency_rate > 0)
		json_object_set_new(o, "latency", eb_latency(b));
	if (b->o.verify)
		json_object_set_new(o, "exact", json_boolean(b->exact && !b->failed));
	json_object_set_new(o, "coverage", json_string(b->o.none ? "none" :
				"sampled windows on the writers' dirty log, and snapshots"));
	if (!b->o.none)
		eb_print_tracker(b, o);
	if (b->o.region_coverage && b->n_cov)
		json_object_set_new(o, "region_coverage", eb_region_coverage(b));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text)
		printf("%s\n", text);
	free(text);
}

int main(int argc, char **argv)
{
	struct eb b = { .exact = true };
	double t0, seconds;
	int rc = eb_parse(argc, argv, &b.o);

	if (rc) {
		if (rc < 0)
			eb_usage(stderr);
		return rc < 0 ? EB_EXIT_USAGE : 0;
	}
	if (!b.o.json)
		fprintf(stderr, "engine-bench: prints JSON only; --json says so explicitly\n");
	log_set_level(getenv("EB_DEBUG") ? LOG_DEBUG : LOG_WARN);
	rc = eb_setup(&b);
	if (rc) {
		fprintf(stderr, "engine-bench: cannot set up: %s%s\n", strerror(-rc),
			rc == -EPERM ? " (userfaultfd: run as root, or set "
				       "vm.unprivileged_userfaultfd=1)" : "");
		eb_stop(&b);
		eb_free(&b);
		return 1;
	}
	if (b.o.inc_pct > 0) {
		rc = eb_incremental(&b);
		eb_stop(&b);
		eb_free(&b);
		return rc ? 1 : 0;
	}
	t0 = mono_s();
	rc = eb_loop(&b);
	seconds = mono_s() - t0;
	if (!rc)
		eb_compaction_wait(&b);
	if (b.o.compact == SNAP_COMPACT_IDLE)
		b.compaction = snap_compaction_json(b.e);
	eb_take_coverage(&b);
	eb_stop(&b);
	if (!rc && eb_time_restore(&b))
		rc = -EIO;
	if (!rc)
		eb_print(&b, seconds);
	eb_remove_images(&b);
	eb_free(&b);
	if (rc)
		return 1;
	return b.failed || (b.o.verify && !b.exact) ? 1 : 0;
}

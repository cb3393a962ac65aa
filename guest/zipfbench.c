/*
 * zipfbench.c - the Redis-modelled write benchmark of the CCoW paper.
 *
 * Allocates --size bytes as 1 KiB blocks (think: Redis values), writes every block
 * once, then overwrites whole blocks chosen by a Zipf distribution over ranks
 * (--alpha; rank 1 is the hottest) until --write-total bytes or --duration seconds.
 * Without --scatter rank r is block r-1, so hot data is packed together; --scatter
 * spreads ranks over memory with a fixed permutation. Everything derives from
 * --seed, so two runs with the same arguments write the same bytes in the same
 * order and end with the same checksum: natively, in ccvm, or restored from a
 * snapshot. A static binary; it runs unchanged natively and as a ccvm guest.
 *
 * --hugepages asks for transparent huge pages (guest RAM in ccvm always has them).
 * --text fills blocks with records of words and numbers (zipf.h), which compress about
 * as typical application data does, instead of bytes no codec shrinks.
 * --threads N: N threads update the one shared area, each with its own random
 * sequence (derived from --seed) and a share of --write-total; with N > 1 the order
 * of their writes, hence the checksum, differs from run to run. N = 1 (the default) is
 * the single loop it always was, same bytes, same checksum.
 *
 * --stop-file PATH: run until PATH exists (looked for every STOP_EVERY updates of a
 * thread), so that a test can keep the guest writing for as long as its snapshots
 * take on any machine. With one thread the run then stops after a multiple of
 * STOP_EVERY updates, and the summary's updates=N and checksum are those of a run
 * with --write-total N KiB: the reference for the memory a restored guest ends with.
 *
 * --rest-file PATH: after the summary, rest (sleep, looking every REST_LOOK_MS) until PATH
 * exists before exiting: a guest alive and idle, for compaction in idle time to run.
 *
 * Output: "report t=SECONDS updates_per_s=N updates=TOTAL" every --report-ms (TOTAL: all
 * threads' updates so far, counted in steps of CLOCK_EVERY, 1024, per thread), then one line
 * "summary updates=N seconds=S updates_per_s=N bytes_written=N checksum=HEX".
 *
 * Zipf sampling (rejection-inversion) is in zipf.h, shared with bench/load.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "zipf.h"

#define MAX_THREADS 64

#define BLOCK_SIZE   ZIPF_BLOCK_SIZE
#define BLOCK_WORDS  ZIPF_BLOCK_WORDS
#define CLOCK_EVERY  1024 /* updates between clock reads: often enough (100 a second even
			   * 50x slower than native) for ccvm's coverage tracker, which
			   * times its windows by the guest's clock reads */
#define REST_LOOK_MS 200   /* --rest-file: between two looks (an idle guest's only work) */
#define STOP_EVERY   65536 /* updates between looks for --stop-file: a stat each ~10 ms */

struct opts {
	uint64_t size, write_total;
	double alpha, duration;
	int scatter;
	int text;
	int hugepages;
	int threads;
	uint64_t seed;
	long report_ms;
	const char *stop_file;
	const char *rest_file;
};

static uint64_t rng_state;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: zipfbench [--size BYTES] [--alpha A] [--scatter] [--write-total BYTES]\n"
			"                 [--duration SECONDS] [--seed N] [--report-ms MS] [--hugepages]\n"
			"                 [--threads N] [--stop-file PATH] [--rest-file PATH] [--text]\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "size", 1, 0, 's' },  { "alpha", 1, 0, 'a' },     { "scatter", 0, 0, 'S' },
		{ "write-total", 1, 0, 'w' }, { "duration", 1, 0, 'd' }, { "seed", 1, 0, 'r' },
		{ "report-ms", 1, 0, 'p' }, { "hugepages", 0, 0, 'H' }, { "help", 0, 0, 'h' },
		{ "threads", 1, 0, 't' }, { "stop-file", 1, 0, 'f' }, { "text", 0, 0, 'T' },
		{ "rest-file", 1, 0, 'R' },
		{ 0, 0, 0, 0 },
	};
	int c;

	*o = (struct opts){ .size = 64 << 20, .alpha = 1.0, .seed = 1, .report_ms = 1000, .threads = 1 };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': if (parse_size(optarg, &o->size)) return -1; break;
		case 'w': if (parse_size(optarg, &o->write_total)) return -1; break;
		case 'a': o->alpha = atof(optarg); break;
		case 'S': o->scatter = 1; break;
		case 'T': o->text = 1; break;
		case 'H': o->hugepages = 1; break;
		case 'd': o->duration = atof(optarg); break;
		case 'r': o->seed = strtoull(optarg, NULL, 0); break;
		case 'p': o->report_ms = atol(optarg); break;
		case 't': o->threads = atoi(optarg); break;
		case 'f': o->stop_file = optarg; break;
		case 'R': o->rest_file = optarg; break;
		default: return -1;
		}
	}
	if (o->threads < 1 || o->threads > MAX_THREADS) {
		fprintf(stderr, "zipfbench: --threads from 1 to %d\n", MAX_THREADS);
		return -1;
	}
	if (o->size < BLOCK_SIZE || !(o->alpha > 0)) {
		fprintf(stderr, "zipfbench: --size must be at least %d and --alpha positive\n", BLOCK_SIZE);
		return -1;
	}
	if (!o->write_total && !o->duration && !o->stop_file)
		o->write_total = 10 * o->size;
	return 0;
}

/* A block's bytes from @value: spread over it, or with --text records of words. */
static void block_fill(const struct opts *o, uint64_t *blk, uint64_t value)
{
	if (o->text)
		zipf_text_fill((char *)blk, value);
	else
		zipf_block_fill(blk, value);
}

/* One updating thread; thread 0 (the main thread) also prints the reports. */
struct worker {
	const struct opts *o;
	const struct zipf *z;
	const struct zipf_scatter *perm;
	uint64_t *mem;
	uint64_t rng, target, updates;
	double t0;
	int id;
	pthread_t th;
};

static _Atomic uint64_t total_updates; /* all threads, in steps of CLOCK_EVERY */
static _Atomic int stop_all;           /* one thread reached --duration or saw --stop-file */

/* Whether it is time to stop: --duration is up, --stop-file exists, or another thread
 * said so. Called every CLOCK_EVERY updates. */
static int worker_should_stop(const struct worker *w, double t)
{
	const struct opts *o = w->o;

	if (o->duration > 0 && t - w->t0 >= o->duration)
		return 1;
	if (o->stop_file && w->updates % STOP_EVERY == 0 && access(o->stop_file, F_OK) == 0)
		return 1;
	return atomic_load(&stop_all);
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	double last = w->t0, next_report = w->t0 + o->report_ms / 1000.0;
	uint64_t last_updates = 0;
	int reporter = w->id == 0;

	while (w->updates < w->target) {
		uint64_t rank = zipf_sample(w->z, &w->rng) - 1;
		uint64_t block = o->scatter ? zipf_scatter(w->perm, rank) : rank;

		block_fill(o, w->mem + block * BLOCK_WORDS, splitmix64(&w->rng));
		w->updates++;
		if (w->updates % CLOCK_EVERY == 0) {
			uint64_t all = atomic_fetch_add(&total_updates, CLOCK_EVERY) + CLOCK_EVERY;
			double t = now_s();

			if (reporter && o->report_ms > 0 && t >= next_report) {
				printf("report t=%.3f updates_per_s=%.0f updates=%llu\n", t - w->t0,
				       (all - last_updates) / (t - last), (unsigned long long)all);
				fflush(stdout);
				last = t;
				last_updates = all;
				next_report = t + o->report_ms / 1000.0;
			}
			if (worker_should_stop(w, t)) {
				atomic_store(&stop_all, 1);
				break;
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct zipf z;
	struct zipf_scatter perm = { .n = 1, .a = 1, .b = 0 };
	uint64_t nblocks, updates = 0, target;
	static struct worker w[MAX_THREADS];
	double t0, elapsed;
	uint64_t *mem;

	if (parse_opts(argc, argv, &o)) {
		usage();
		return 2;
	}
	nblocks = o.size / BLOCK_SIZE;
	mem = mmap(NULL, nblocks * BLOCK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "zipfbench: cannot allocate %llu bytes: %s\n", (unsigned long long)o.size, strerror(errno));
		return 1;
	}
	/* Ask for transparent huge pages, as guest RAM in ccvm always has them: the fair
	 * native baseline when THP is in "madvise" mode. */
	if (o.hugepages)
		madvise(mem, nblocks * BLOCK_SIZE, MADV_HUGEPAGE);
	rng_state = o.seed;
	if (o.scatter)
		zipf_scatter_init(&perm, nblocks, &rng_state);
	for (uint64_t b = 0; b < nblocks; b++)
		block_fill(&o, mem + b * BLOCK_WORDS, b);
	zipf_init(&z, nblocks, o.alpha);
	target = o.write_total ? o.write_total / BLOCK_SIZE : UINT64_MAX;
	t0 = now_s();
	for (int i = 0; i < o.threads; i++) {
		/* Thread 0 continues the seed's sequence, as the single loop always did. */
		w[i] = (struct worker){ .o = &o, .z = &z, .perm = &perm, .mem = mem, .t0 = t0, .id = i,
					.rng = i ? o.seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)i) : rng_state,
					.target = target == UINT64_MAX ? target :
						  target / (uint64_t)o.threads +
						  (i ? 0 : target % (uint64_t)o.threads) };
		if (i && pthread_create(&w[i].th, NULL, worker_run, &w[i])) {
			fprintf(stderr, "zipfbench: cannot start thread %d\n", i);
			return 1;
		}
	}
	worker_run(&w[0]);
	for (int i = 0; i < o.threads; i++) {
		if (i)
			pthread_join(w[i].th, NULL);
		updates += w[i].updates;
	}
	elapsed = now_s() - t0;
	printf("summary updates=%llu seconds=%.3f updates_per_s=%.0f bytes_written=%llu checksum=%016llx\n",
	       (unsigned long long)updates, elapsed, updates / (elapsed > 0 ? elapsed : 1e-9),
	       (unsigned long long)updates * BLOCK_SIZE,
	       (unsigned long long)zipf_checksum(mem, nblocks * BLOCK_WORDS));
	fflush(stdout);
	while (o.rest_file && access(o.rest_file, F_OK) != 0)
		nanosleep(&(struct timespec){ .tv_nsec = REST_LOOK_MS * 1000000L }, NULL);
	return 0;
}

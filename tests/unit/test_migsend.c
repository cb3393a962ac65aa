/*
 * test_migsend.c - a migration's pre-copy (snapshot/migsend.c) on plain memory, the
 * way a machine without /dev/kvm tests it: host threads keep writing Zipf-chosen
 * blocks of the source memory (bench/load.c, with the dirty log a VM's KVM keeps)
 * while the rounds send it over a socket to a receiver thread; then the writers pause,
 * the rest goes, and the destination's memory must equal the source's page by page.
 * Coverage order (heat deferred, regions coldest first) and plain order, writers
 * paced as a guest might write, and flat out (the rounds cannot converge). Post-copy
 * too: the writers paused, the destination's memory registered with a userfaultfd and
 * touched before it has arrived (each touch asks the source for its block), equal to
 * the source's once every page came; a source that hangs up after the switch makes
 * the destination say the VM is lost.
 */
#include "suites.h"
#include "../../bench/load.h"
#include "../../mmu/gmem.h"
#include "../../mmu/tracker.h"
#include "../../snapshot/migrecv.h"
#include "../../snapshot/migsend.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MSD_MEM      (32ULL << 20)
#define MSD_REGION   (2ULL << 20)
#define MSD_PAGE     4096ULL
#define MSD_DOWNTIME 20000000ULL /* ns the rounds aim the pause at */
#define MSD_RATE     20000.0     /* updates/s: a guest's pace, the rounds converge */
#define MSD_WINDOWS  2           /* tracker windows before a migration starts */
#define MSD_WAIT_TRIES 400
#define MSD_WAIT_US  50000

struct msd_dest {
	int fd;
	uint8_t *mem;
	int rc;
	uint64_t rounds;             /* round markers seen */
	char err[256];
};

static struct gmem mem;
static struct load load;
static struct tracker tracker;
static uint8_t *dst;
static int sv[2];

/* The destination: frames into dst until the end. */
static void *msd_receive(void *arg)
{
	struct msd_dest *d = arg;
	struct mig_in in;
	struct mig_event ev;

	d->rc = mig_in_open(&in, d->fd, d->mem, MSD_MEM, NULL, d->err, sizeof(d->err));
	while (!d->rc) {
		d->rc = mig_next(&in, &ev, d->err, sizeof(d->err));
		if (d->rc || ev.type == MIG_END)
			break;
		d->rounds += ev.type == MIG_ROUND;
		free(ev.data);
	}
	mig_in_close(&in);
	return NULL;
}

static uint64_t msd_windows(void)
{
	uint64_t n;

	pthread_mutex_lock(&tracker.w.lock);
	n = tracker.cov.windows;
	pthread_mutex_unlock(&tracker.w.lock);
	return n;
}

static void msd_start(double rate)
{
	struct tracker_log log;

	ck_assert_int_eq(gmem_map(&mem, MSD_MEM), 0);
	dst = calloc(1, MSD_MEM);
	ck_assert_ptr_nonnull(dst);
	memset(&load, 0, sizeof(load));
	load_dirty_log(&load, &log);
	ck_assert_int_eq(tracker_init(&tracker, &log, mem.host, MSD_MEM, MSD_REGION, 100,
				      (struct tracker_progress){ 0 }, NULL), 0);
	ck_assert_int_eq(load_start(&load, &mem, &(struct load_opts){ .threads = 2, .alpha = 0.9,
								      .seed = 5, .scatter = true,
								      .rate = rate }), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	/* The tracker's windows give the heat and coverage that coverage order uses. */
	for (int i = 0; i < MSD_WAIT_TRIES && msd_windows() < MSD_WINDOWS; i++)
		usleep(MSD_WAIT_US);
	ck_assert_uint_ge(msd_windows(), MSD_WINDOWS);
}

static void msd_setup_paced(void)
{
	msd_start(MSD_RATE);
}

static void msd_setup_flat_out(void)
{
	msd_start(0);
}

static void msd_teardown(void)
{
	load_stop(&load);
	tracker_fini(&tracker);
	gmem_unmap(&mem);
	load_fini(&load);
	free(dst);
	close(sv[0]);
	close(sv[1]);
}

/* The first page where dst and the source differ, or -1. */
static int64_t msd_first_difference(void)
{
	for (uint64_t p = 0; p < MSD_MEM / MSD_PAGE; p++)
		if (memcmp(dst + p * MSD_PAGE, mem.host + p * MSD_PAGE, MSD_PAGE))
			return (int64_t)p;
	return -1;
}

/* One migration of the running memory: its figures; the destination checked. */
static void msd_migrate(bool coverage, unsigned max_rounds, struct mig_precopy *p)
{
	struct msd_dest d = { .fd = sv[1], .mem = dst };
	struct tracker_log log;
	struct mig_out o;
	pthread_t rx;
	bool stop = false;
	int64_t diff;

	load_dirty_log(&load, &log);
	ck_assert_int_eq(pthread_create(&rx, NULL, msd_receive, &d), 0);
	ck_assert_int_eq(mig_out_open(&o, sv[0], MSD_MEM, IMG_CODEC_AUTO, 0), 0);
	ck_assert_int_eq(mig_precopy_init(p, &mem, &tracker, &log, &o,
					  &(struct mig_precopy_opts){ .coverage = coverage,
								      .max_rounds = max_rounds }), 0);
	tracker_hold(&tracker, true);
	ck_assert_int_eq(mig_precopy_rounds(p, &(struct rounds_writers){ .pause = load_pause,
									  .resume = load_resume,
									  .ctx = &load },
					    MSD_DOWNTIME, &stop), 0);
	ck_assert_int_eq(load_pause(&load), 0);
	ck_assert_int_eq(mig_precopy_rest(p), 0);
	ck_assert_int_eq(mig_send_end(&o), 0);
	pthread_join(rx, NULL);
	ck_assert_msg(d.rc == 0, "the destination refused: %s", d.err);
	ck_assert_uint_eq(d.rounds, p->r.rounds);
	diff = msd_first_difference();
	ck_assert_msg(diff < 0, "page %lld differs on the destination", (long long)diff);
	load_resume(&load);
	mig_precopy_end(p);
	tracker_hold(&tracker, false);
	ck_assert_uint_gt(p->r.pages_sent, 0);
	ck_assert_uint_ge(o.bytes_sent, (p->r.pages_sent + p->pages_paused) * 64);
	mig_out_close(&o);
}

START_TEST(test_coverage_order)
{
	struct mig_precopy p;
	uint32_t hot[1];

	ck_assert_uint_eq(tracker_hot_pages(&tracker, hot, 1), 1); /* the heat has pages */
	msd_migrate(true, 0, &p);
	ck_assert_uint_ge(p.r.rounds, 1);
	mig_precopy_fini(&p);
}
END_TEST

START_TEST(test_plain_order)
{
	struct mig_precopy p;

	msd_migrate(false, 0, &p);
	ck_assert_ptr_null(p.order);
	mig_precopy_fini(&p);
}
END_TEST

START_TEST(test_one_round)
{
	struct mig_precopy p;

	msd_migrate(true, 1, &p);
	ck_assert_uint_eq(p.r.rounds, 1); /* round 0, one harvest, then the pause */
	mig_precopy_fini(&p);
}
END_TEST

/* ---- post-copy ---- */

#define MSD_TOUCHES 300 /* pages the destination's "guest" reads before they came */

struct msd_source {
	int fd;
	uint64_t pages_before_hangup; /* 0: push it all */
	int rc;
	struct mig_push_state st;
	int on_running;               /* the hook's calls */
};

static void msd_on_running(void *ctx)
{
	((struct msd_source *)ctx)->on_running++;
}

/* The source: the switch, then every page that holds data (or hang up early). */
static void *msd_push(void *arg)
{
	struct msd_source *src = arg;
	uint64_t words = (MSD_MEM / MSD_PAGE + 63) / 64;
	uint64_t *need = calloc(words, sizeof(uint64_t));
	char why[MIG_WHY_MAX];
	struct mig_out o;

	src->rc = need ? mig_out_open(&o, src->fd, MSD_MEM, IMG_CODEC_AUTO, 0) : -ENOMEM;
	if (!src->rc)
		src->rc = mig_send_postcopy(&o, NULL, 0);
	if (!src->rc)
		src->rc = mig_resident_bitmap(mem.host, MSD_MEM, need);
	if (!src->rc && src->pages_before_hangup) {
		src->rc = mig_send_memory(&o, mem.host, 0, src->pages_before_hangup * MSD_PAGE);
		if (!src->rc)
			src->rc = mig_flush(&o);
		shutdown(src->fd, SHUT_RDWR);
	} else if (!src->rc) {
		src->st.on_running = msd_on_running;
		src->st.ctx = src;
		src->rc = mig_postcopy_push(&o, mem.host, need, NULL, &src->st, why);
	}
	mig_out_close(&o);
	free(need);
	return NULL;
}

static bool msd_lost_called;

static void msd_lost(void *ctx)
{
	(void)ctx;
	__atomic_store_n(&msd_lost_called, true, __ATOMIC_RELEASE);
}

/* The destination up to the switch: the stream opened, the POSTCOPY frame read, the
 * post-copy threads started over @dmem. */
static struct mig_postcopy *msd_switch(struct mig_in *in, struct gmem *dmem, bool *filling)
{
	uint64_t *have = calloc((MSD_MEM / MSD_PAGE + 63) / 64, sizeof(uint64_t));
	struct mig_postcopy *pc = NULL;
	struct mig_event ev;
	char err[256] = "";

	ck_assert_ptr_nonnull(have);
	ck_assert_int_eq(gmem_map(dmem, MSD_MEM), 0);
	ck_assert_msg(mig_in_open(in, sv[1], dmem->host, MSD_MEM, NULL, err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_msg(mig_next(in, &ev, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(ev.type, MIG_POSTCOPY);
	ck_assert_uint_eq(ev.len, 0);
	free(ev.data);
	*filling = true;
	ck_assert_int_eq(mig_postcopy_start(in, &(struct mig_postcopy_target){
						.mem = dmem, .on_lost = msd_lost,
						.filling = filling }, have, NULL, &pc), 0);
	return pc;
}

START_TEST(test_postcopy)
{
	struct msd_source src = { .fd = sv[0] };
	struct gmem dmem;
	struct mig_in in;
	struct mig_postcopy *pc;
	pthread_t tx;
	uint64_t x = 12345;
	bool filling;
	int64_t diff;

	ck_assert_int_eq(load_pause(&load), 0); /* a post-copy source stays paused */
	ck_assert_int_eq(pthread_create(&tx, NULL, msd_push, &src), 0);
	pc = msd_switch(&in, &dmem, &filling);
	for (int i = 0; i < MSD_TOUCHES; i++) { /* the guest runs: reads before arrival */
		uint64_t p;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p = x % (MSD_MEM / MSD_PAGE);
		ck_assert_msg(memcmp(dmem.host + p * MSD_PAGE, mem.host + p * MSD_PAGE,
				     MSD_PAGE) == 0, "page %llu differs when first read",
			      (unsigned long long)p);
	}
	ck_assert_int_eq(mig_postcopy_ack(pc, MIG_ACK_RUNNING), 0);
	pthread_join(tx, NULL);
	ck_assert_int_eq(src.rc, 0);
	ck_assert(src.st.running);
	ck_assert_int_eq(src.on_running, 1); /* the source let go of what it had, once */
	ck_assert(!__atomic_load_n(&filling, __ATOMIC_ACQUIRE)); /* DONE came after it */
	ck_assert_int_eq(mig_postcopy_finish(pc), 0);
	ck_assert(!msd_lost_called);
	memcpy(dst, dmem.host, MSD_MEM);
	diff = msd_first_difference();
	ck_assert_msg(diff < 0, "page %lld differs on the destination", (long long)diff);
	mig_in_close(&in);
	gmem_unmap(&dmem);
	load_resume(&load);
}
END_TEST

START_TEST(test_postcopy_source_lost)
{
	struct msd_source src = { .fd = sv[0], .pages_before_hangup = 64 };
	struct gmem dmem;
	struct mig_in in;
	struct mig_postcopy *pc;
	pthread_t tx;
	bool filling;

	msd_lost_called = false;
	ck_assert_int_eq(load_pause(&load), 0);
	ck_assert_int_eq(pthread_create(&tx, NULL, msd_push, &src), 0);
	pc = msd_switch(&in, &dmem, &filling);
	pthread_join(tx, NULL);
	ck_assert_int_eq(mig_postcopy_finish(pc), -EIO);
	ck_assert(__atomic_load_n(&msd_lost_called, __ATOMIC_ACQUIRE));
	ck_assert(__atomic_load_n(&filling, __ATOMIC_ACQUIRE)); /* never all in */
	mig_in_close(&in);
	gmem_unmap(&dmem);
	load_resume(&load);
}
END_TEST

Suite *migsend_suite(void)
{
	Suite *s = suite_create("migsend");
	TCase *paced = tcase_create("paced"), *flat = tcase_create("flat-out");

	tcase_add_checked_fixture(paced, msd_setup_paced, msd_teardown);
	tcase_set_timeout(paced, 120);
	tcase_add_test(paced, test_coverage_order);
	tcase_add_test(paced, test_plain_order);
	tcase_add_test(paced, test_one_round);
	tcase_add_test(paced, test_postcopy);
	tcase_add_test(paced, test_postcopy_source_lost);
	suite_add_tcase(s, paced);
	tcase_add_checked_fixture(flat, msd_setup_flat_out, msd_teardown);
	tcase_set_timeout(flat, 120);
	tcase_add_test(flat, test_coverage_order);
	tcase_add_test(flat, test_plain_order);
	suite_add_tcase(s, flat);
	return s;
}

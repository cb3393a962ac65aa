/*
 * migrecv.c - post-copy on the destination: the VM resumes before its memory is all
 * here. Pages the stream brought before the switch stay (but those the source wrote
 * since, named by the POSTCOPY frame); the others are dropped and guest RAM is
 * registered with a userfaultfd in missing mode, as lazy restore does (lazy.c). A
 * touch of a missing page, by a vCPU through KVM or by the monitor, wakes the fault
 * thread, which asks the source for that page's block (MIG_BLOCK bytes) once; the
 * receiving thread reads the stream meanwhile, the blocks asked for and the pages the
 * source pushes, and installs each page still missing (UFFDIO_COPY, or ZEROPAGE for a
 * hole), waking whoever waited. At END every page the source holds has come; the
 * range is unregistered, and a page never touched nor sent reads zero, as it does
 * there. A stream that fails before END loses the VM: neither side can run it on
 * (as in QEMU's post-copy); on_lost says so.
 */
#include "migrecv.h"
#include "../mmu/uffd.h"
#include "../base/bits.h"
#include "../base/log.h"
#include "../base/pages.h"
#include "../base/role.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define PC_POLL_MS 100 /* how often the fault thread looks at the stop flag */
#define PC_ERR     256

struct mig_postcopy {
	struct mig_in *in;
	struct gmem *mem;
	void (*on_lost)(void *ctx);
	void *ctx;
	struct uffd uffd;
	uint64_t *have;          /* a bit per page in place (the receiving thread's) */
	uint8_t *asked;          /* per block: asked for (compare and swap) */
	uint64_t pages, blocks;
	pthread_mutex_t wlock;   /* writes on the connection: requests and answers */
	pthread_t faulter, receiver;
	bool *filling;           /* cleared once every page is in */
	bool stop, failed, joined;
	uint64_t requests;
	char err[PC_ERR];
};

/* The stream's memory, from the receiving thread: each missing page installed. */
static int pc_install(void *ctx, uint64_t gpa, const uint8_t *data, uint64_t len)
{
	struct mig_postcopy *pc = ctx;
	uint64_t first = gpa / PAGE_SIZE, end = first + len / PAGE_SIZE, e;
	int rc = 0;

	for (uint64_t p = first; !rc && (e = bits_run(pc->have, &p, end, false)) > p; p = e) {
		rc = data ? uffd_fill(&pc->uffd, p * PAGE_SIZE, data + (p - first) * PAGE_SIZE,
				      (e - p) * PAGE_SIZE) :
			    uffd_zero(&pc->uffd, p * PAGE_SIZE, (e - p) * PAGE_SIZE);
		if (!rc)
			bits_set(pc->have, p, e - p);
	}
	return rc;
}

static void *pc_fault_thread(void *arg)
{
	struct mig_postcopy *pc = arg;

	role_enter(ROLE_HELPER);
	while (!__atomic_load_n(&pc->stop, __ATOMIC_ACQUIRE)) {
		uint64_t gpa, b;
		uint8_t no = 0;

		if (uffd_next_fault(&pc->uffd, PC_POLL_MS, &gpa) != 1 || gpa >= pc->mem->size)
			continue;
		b = gpa / MIG_BLOCK;
		if (!__atomic_compare_exchange_n(&pc->asked[b], &no, 1, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			continue; /* asked already: its answer wakes this fault too */
		pthread_mutex_lock(&pc->wlock);
		if (mig_send_request(pc->in->fd, b * MIG_BLOCK))
			log_debug("post-copy: a request for %#llx not sent",
				  (unsigned long long)(b * MIG_BLOCK));
		pthread_mutex_unlock(&pc->wlock);
		__atomic_fetch_add(&pc->requests, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int mig_postcopy_ack(struct mig_postcopy *pc, enum mig_ack_code code);

/* Every page in: no more faults to serve; guest RAM unregistered (a snapshot may
 * write-protect it now); the source told so (it may let go now: before the collapse of
 * the huge pages, which may take longer than its bound on this side's silence). */
static void pc_complete(struct mig_postcopy *pc)
{
	__atomic_store_n(&pc->stop, true, __ATOMIC_RELEASE);
	pthread_join(pc->faulter, NULL);
	pc->joined = true;
	uffd_close(&pc->uffd);
	pc->in->install = NULL;
	if (pc->filling)
		__atomic_store_n(pc->filling, false, __ATOMIC_RELEASE);
	mig_postcopy_ack(pc, MIG_ACK_DONE);
	gmem_collapse(pc->mem, 0, pc->mem->size);
	log_info("post-copy: all memory in place, %llu blocks asked for",
		 (unsigned long long)pc->requests);
}

static void *pc_receive_thread(void *arg)
{
	struct mig_postcopy *pc = arg;
	struct mig_event ev;
	int rc;

	role_enter(ROLE_HELPER);
	for (;;) {
		rc = mig_next(pc->in, &ev, pc->err, sizeof(pc->err));
		free(ev.data);
		if (!rc && ev.type != MIG_PAGES && ev.type != MIG_HOLES && ev.type != MIG_END)
			rc = log_set_err(-EPROTO, pc->err, sizeof(pc->err), "a frame of type %u "
					 "after the switch to post-copy", ev.type);
		if (rc || ev.type == MIG_END)
			break;
	}
	if (rc && !__atomic_load_n(&pc->stop, __ATOMIC_ACQUIRE)) {
		log_err("post-copy: %s; the VM is lost (the source no longer runs it)", pc->err);
		pc->failed = true;
		if (pc->on_lost)
			pc->on_lost(pc->ctx);
		return NULL;
	}
	if (!rc)
		pc_complete(pc);
	return NULL;
}

/* Every page not in @have dropped, to be asked for on its first touch. */
static void pc_drop(struct mig_postcopy *pc)
{
	for (uint64_t p = 0, e; (e = bits_run(pc->have, &p, pc->pages, false)) > p; p = e)
		gmem_discard(pc->mem, p * PAGE_SIZE, (e - p) * PAGE_SIZE);
}

int mig_postcopy_start(struct mig_in *in, const struct mig_postcopy_target *t, uint64_t *have,
		       const uint64_t *stale, struct mig_postcopy **out)
{
	struct mig_postcopy *pc = calloc(1, sizeof(*pc));
	int rc;

	if (!pc)
		return -ENOMEM;
	pc->in = in;
	pc->mem = t->mem;
	pc->on_lost = t->on_lost;
	pc->ctx = t->ctx;
	pc->filling = t->filling;
	pc->have = have;
	pc->pages = t->mem->size / PAGE_SIZE;
	pc->blocks = (t->mem->size + MIG_BLOCK - 1) / MIG_BLOCK;
	pc->uffd.fd = -1;
	pthread_mutex_init(&pc->wlock, NULL);
	for (uint64_t i = 0; stale && i < (pc->pages + 63) / 64; i++)
		pc->have[i] &= ~stale[i];
	pc->asked = calloc(pc->blocks, 1);
	rc = pc->asked ? 0 : -ENOMEM;
	if (!rc) {
		pc_drop(pc);
		rc = uffd_open(&pc->uffd, t->mem->host, t->mem->size, UFFD_MODE_MISSING);
	}
	if (!rc) {
		in->install = pc_install;
		in->install_ctx = pc;
		if (pthread_create(&pc->faulter, NULL, pc_fault_thread, pc))
			rc = -EAGAIN;
	}
	if (!rc && pthread_create(&pc->receiver, NULL, pc_receive_thread, pc)) {
		__atomic_store_n(&pc->stop, true, __ATOMIC_RELEASE);
		pthread_join(pc->faulter, NULL);
		rc = -EAGAIN;
	}
	if (rc) {
		uffd_close(&pc->uffd);
		in->install = NULL;
		free(pc->asked);
		free(pc);
		free(have);
		return rc;
	}
	*out = pc;
	return 0;
}

int mig_postcopy_ack(struct mig_postcopy *pc, enum mig_ack_code code)
{
	int rc;

	pthread_mutex_lock(&pc->wlock);
	rc = mig_send_ack(pc->in->fd, code, NULL);
	pthread_mutex_unlock(&pc->wlock);
	return rc;
}

void mig_postcopy_abort(struct mig_postcopy *pc)
{
	__atomic_store_n(&pc->stop, true, __ATOMIC_RELEASE);
	shutdown(pc->in->fd, SHUT_RDWR); /* the receiving thread's read ends */
}

int mig_postcopy_finish(struct mig_postcopy *pc)
{
	bool ok;

	pthread_join(pc->receiver, NULL);
	__atomic_store_n(&pc->stop, true, __ATOMIC_RELEASE);
	if (!pc->joined)
		pthread_join(pc->faulter, NULL);
	uffd_close(&pc->uffd); /* (a failed one: waiters are woken) */
	ok = !pc->failed;
	pthread_mutex_destroy(&pc->wlock);
	free(pc->asked);
	free(pc->have);
	free(pc);
	return ok ? 0 : -EIO;
}

/*
 * lazy.c - lazy restore with userfaultfd MISSING mode.
 *
 * Guest RAM is registered with a userfaultfd in missing mode: the first touch of a page
 * (by a vCPU through KVM, or by the monitor) waits for this module, which reads that
 * page's 2 MiB chunk from the image, checks it against the chunk checksum and installs
 * it with UFFDIO_COPY (or UFFDIO_ZEROPAGE for a chunk that is a hole). A prefetch thread
 * installs every chunk in address order in the background, so the guest starts at once
 * and the whole image is in memory soon after. A chunk's state (absent, loading,
 * loaded) is claimed with compare-and-swap so each is installed once; a fault on a
 * chunk being loaded is woken by that install. When all chunks are in, the descriptor
 * is closed, which unregisters the range: the restored VM can then be snapshotted
 * (userfaultfd write protection wants the range for itself). Installed 4 KiB pages are
 * collapsed back into huge pages at the end.
 */
#include "lazy.h"
#include "../base/role.h"
#include "../mmu/uffd.h"
#include "../base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LAZY_POLL_MS 100 /* how often the fault thread looks at the stop flag */

enum { CH_ABSENT, CH_LOADING, CH_LOADED };

struct lazy {
	struct img_reader r;
	struct gmem *mem;
	void (*on_bad)(void *ctx);
	void *ctx;
	const char *file;
	struct uffd uffd;      /* missing mode over all of the memory */
	uint8_t *chunk;        /* per chunk: CH_* */
	uint64_t n_loaded;
	bool stop, failed;
	pthread_t faulter, prefetcher;
};

static int lazy_install(struct lazy *l, uint64_t c, uint8_t *buf)
{
	bool data;
	int rc = img_load_chunk(&l->r, c, buf, &data);

	if (rc)
		return rc;
	if (!data)
		return uffd_zero(&l->uffd, c * IMG_CHUNK, IMG_CHUNK);
	return uffd_fill(&l->uffd, c * IMG_CHUNK, buf, IMG_CHUNK);
}

/* Load chunk @c unless someone else is or did. */
static void lazy_load(struct lazy *l, uint64_t c, uint8_t *buf)
{
	uint8_t expect = CH_ABSENT;
	int rc;

	if (!__atomic_compare_exchange_n(&l->chunk[c], &expect, CH_LOADING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	rc = lazy_install(l, c, buf);
	if (rc) {
		log_err("restore of '%s': memory chunk %llu (guest %#llx) %s; stopping",
			l->file, (unsigned long long)c, (unsigned long long)(c * IMG_CHUNK),
			rc == -EBADMSG ? "fails its checksum: the image is damaged" : strerror(-rc));
		l->failed = true;
		if (l->on_bad)
			l->on_bad(l->ctx);
	}
	__atomic_store_n(&l->chunk[c], CH_LOADED, __ATOMIC_RELEASE);
	__atomic_fetch_add(&l->n_loaded, 1, __ATOMIC_RELEASE);
}

static void *lazy_fault_thread(void *arg)
{
	struct lazy *l = arg;
	uint8_t *buf = malloc(IMG_CHUNK);

	role_enter(ROLE_HELPER);
	while (buf && !__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
		uint64_t gpa;

		if (uffd_next_fault(&l->uffd, LAZY_POLL_MS, &gpa) == 1)
			lazy_load(l, gpa / IMG_CHUNK, buf);
	}
	free(buf);
	return NULL;
}

static void *lazy_prefetch_thread(void *arg)
{
	struct lazy *l = arg;
	uint8_t *buf = malloc(IMG_CHUNK);

	role_enter(ROLE_HELPER);
	for (uint64_t c = 0; buf && c < l->r.n_chunks && !__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE); c++)
		lazy_load(l, c, buf);
	free(buf);
	return NULL;
}

void lazy_abort(struct lazy *l)
{
	__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
}

/* True once every chunk is in place. */
static bool lazy_done(struct lazy *l)
{
	return __atomic_load_n(&l->n_loaded, __ATOMIC_ACQUIRE) == l->r.n_chunks;
}

int lazy_start(struct img_reader *r, const struct lazy_target *t, const char *file,
	       struct lazy **out)
{
	struct lazy *l = calloc(1, sizeof(*l));
	uint8_t *buf = malloc(IMG_CHUNK);
	int rc;

	if (!l || !buf) {
		free(l);
		free(buf);
		return -ENOMEM;
	}
	l->r = *r;
	l->mem = t->mem;
	l->on_bad = t->on_bad;
	l->ctx = t->ctx;
	l->file = file;
	l->uffd.fd = -1;
	l->chunk = calloc(r->n_chunks, 1);
	rc = l->chunk ? uffd_open(&l->uffd, t->mem->host, t->mem->size, UFFD_MODE_MISSING) :
			-ENOMEM;
	if (rc)
		goto err;
	/* The system area first: the CPU needs its tables before the first instruction. */
	lazy_load(l, 0, buf);
	if (l->failed) {
		rc = -EBADMSG;
		goto err;
	}
	if (pthread_create(&l->faulter, NULL, lazy_fault_thread, l)) {
		rc = -EAGAIN;
		goto err;
	}
	if (pthread_create(&l->prefetcher, NULL, lazy_prefetch_thread, l)) {
		__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
		pthread_join(l->faulter, NULL);
		rc = -EAGAIN;
		goto err;
	}
	free(buf);
	*out = l;
	return 0;
err:
	uffd_close(&l->uffd);
	free(l->chunk);
	free(l);
	free(buf);
	return rc;
}

int lazy_finish(struct lazy *l)
{
	int rc;

	pthread_join(l->prefetcher, NULL);
	__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
	pthread_join(l->faulter, NULL);
	uffd_close(&l->uffd); /* unregisters guest RAM */
	if (!l->failed && lazy_done(l))
		gmem_collapse(l->mem, 0, l->mem->size);
	rc = l->failed ? -EBADMSG : 0;
	img_close(&l->r);
	free(l->chunk);
	free(l);
	return rc;
}

/*
 * memrestore.c - eager restore of an image's memory (see memrestore.h).
 *
 * Knows images and memory, not VMs: vmm/persist_restore.c calls it for a VM's RAM, and the unit
 * tests for plain memory snapshotted under host threads. Chunks are loaded by a few
 * threads, each taking the next chunk in turn: a compressed chunk costs ~1.5 ms of one
 * core to decompress (zstd, docs/evaluation.md), so one thread would make a restore of
 * a compressed image CPU-bound. Each thread holds at most one compressed frame besides
 * the chunk it writes into guest memory, so memory stays bounded by a few chunks per
 * thread whatever the image says.
 */
#include "memrestore.h"
#include "../base/role.h"
#include "../base/log.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define MEMRESTORE_MAX_THREADS 4

struct memrestore {
	struct img_reader *r;
	struct gmem *mem;
	uint64_t next;          /* the next chunk to load, taken atomically */
	uint64_t bad;           /* the lowest chunk that failed, or n_chunks */
	int rc;                 /* its error */
	pthread_mutex_t lock;
};

static void memrestore_work(struct memrestore *m)
{
	for (;;) {
		uint64_t c = __atomic_fetch_add(&m->next, 1, __ATOMIC_RELAXED);
		bool data;
		int rc;

		if (c >= m->r->n_chunks || c > __atomic_load_n(&m->bad, __ATOMIC_RELAXED))
			break;
		rc = img_load_chunk(m->r, c, m->mem->host + c * IMG_CHUNK, &data);
		if (!rc)
			continue;
		pthread_mutex_lock(&m->lock);
		if (c < m->bad) {
			m->bad = c;
			m->rc = rc;
		}
		pthread_mutex_unlock(&m->lock);
		break;
	}
}

static void *memrestore_thread(void *arg)
{
	role_enter(ROLE_HELPER);
	memrestore_work(arg);
	return NULL;
}

/* Threads for @n chunks: one per core up to MEMRESTORE_MAX_THREADS. */
static int memrestore_threads(uint64_t n)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int t = cpus > 0 ? (int)cpus : 1;

	if (t > MEMRESTORE_MAX_THREADS)
		t = MEMRESTORE_MAX_THREADS;
	return (uint64_t)t > n ? (int)n : t;
}

int memrestore_eager(const char *file, struct img_reader *r, struct gmem *mem)
{
	struct memrestore m = { .r = r, .mem = mem, .bad = r->n_chunks };
	pthread_t th[MEMRESTORE_MAX_THREADS];
	int n = memrestore_threads(r->n_chunks), started = 0;

	if (r->n_chunks * IMG_CHUNK > mem->size) {
		log_err("cannot restore '%s': it holds %llu MiB of memory, more than the %llu MiB "
			"given", file, (unsigned long long)(r->n_chunks * IMG_CHUNK >> 20),
			(unsigned long long)(mem->size >> 20));
		return -EINVAL;
	}
	pthread_mutex_init(&m.lock, NULL);
	for (int i = 1; i < n; i++)
		if (pthread_create(&th[started], NULL, memrestore_thread, &m) == 0)
			started++;
	memrestore_work(&m); /* this thread is one of them, in its own role */
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&m.lock);
	if (m.bad < r->n_chunks) {
		uint64_t c = m.bad;

		log_err("cannot restore '%s': memory chunk %llu (guest %#llx-%#llx) %s; use an older "
			"snapshot, or 'ccvm inspect %s' to list every damaged chunk", file,
			(unsigned long long)c, (unsigned long long)(c * IMG_CHUNK),
			(unsigned long long)((c + 1) * IMG_CHUNK), m.rc == -EBADMSG ?
			"fails its checksum: the image is damaged" : strerror(-m.rc), file);
		return m.rc;
	}
	return 0;
}

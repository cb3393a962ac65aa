/*
 * cost-bench.c - what each copy-on-write mechanism costs a writer, per page, measured
 * on this machine without a VM, and the coverage at which copying a whole region
 * pays off (the CCoW paper's argument, with our own numbers).
 *
 * On THP-backed memory like guest RAM (gmem), one thread writes one byte to each page
 * of an area in order while:
 *   write_ns     nothing is protected (the write alone)
 *   trap_us      the area is write-protected with userfaultfd and a handler thread
 *                copies each faulting page to a buffer and unprotects it (what cow's
 *                fault thread does)
 *   fork_cow_us  the area is shared with a forked child that only waits (the kernel's
 *                copy on the parent's first write, as under fork and Redis BGSAVE)
 *   region_us    instead, a 2 MiB region is copied and unprotected whole (what ccow
 *                does for a hot region)
 * Per page figures are the writer's time less the plain write's. A region of P pages
 * of which a share c would be written during the snapshot costs c * P * trap_us in
 * traps, or region_us once copied: copying pays off above c* = region_us / (P *
 * trap_us) (breakeven_uffd), and against the kernel's copy-on-write above region_us /
 * (P * fork_cow_us) (breakeven_fork). Prints one JSON line per round.
 */
#include "../mmu/gmem.h"
#include "../base/mono.h"
#include "../base/pages.h"
#include "../mmu/uffd.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CB_AREA (64ULL << 20)      /* written page by page in each measurement */
#define CB_REGION HUGE_SIZE        /* a CCoW region */
#define CB_REGIONS 16              /* regions copied for the region figure */
#define CB_POLL_MS 100

struct cb_handler {
	struct uffd *u;
	uint8_t *buf;
	volatile int stop;
};

/* cow's fault path: copy the page, unprotect it (which wakes the writer). */
static void *cb_handle(void *arg)
{
	struct cb_handler *h = arg;
	uint64_t gpa;

	while (!h->stop) {
		int rc = uffd_next_fault(h->u, CB_POLL_MS, &gpa);

		if (rc < 0)
			break;
		if (rc == 0)
			continue;
		gpa &= ~(PAGE_SIZE - 1);
		memcpy(h->buf, h->u->base + gpa, PAGE_SIZE);
		__asm__ volatile("" : : "r"(h->buf) : "memory");
		uffd_protect(h->u, gpa, PAGE_SIZE, false);
	}
	return NULL;
}

/* Seconds to write one byte into each page of @m (size CB_AREA). */
static double cb_write_pages(uint8_t *m, uint8_t v)
{
	uint64_t t0 = mono_ns();

	for (uint64_t off = 0; off < CB_AREA; off += PAGE_SIZE)
		((volatile uint8_t *)m)[off] = v;
	return (double)(mono_ns() - t0) / 1e9;
}

static int cb_trap(struct gmem *mem, double *secs)
{
	struct uffd u;
	struct cb_handler h = { .u = &u, .buf = malloc(PAGE_SIZE) };
	pthread_t th;
	int rc = h.buf ? uffd_open(&u, mem->host, CB_AREA, UFFD_MODE_WP) : -ENOMEM;

	if (rc) {
		free(h.buf);
		return rc;
	}
	rc = uffd_protect(&u, 0, CB_AREA, true);
	if (!rc && pthread_create(&th, NULL, cb_handle, &h))
		rc = -EAGAIN;
	if (!rc) {
		*secs = cb_write_pages(mem->host, 3);
		h.stop = 1;
		pthread_join(th, NULL);
	}
	uffd_close(&u);
	free(h.buf);
	return rc;
}

static int cb_fork_cow(struct gmem *mem, double *secs)
{
	int pipefd[2];
	pid_t pid;
	char c;

	if (pipe(pipefd) < 0)
		return -errno;
	madvise(mem->host, CB_AREA, MADV_DOFORK);
	pid = fork();
	if (pid == 0) { /* shares the area until the parent is done */
		close(pipefd[1]);
		(void)!read(pipefd[0], &c, 1);
		_exit(0);
	}
	madvise(mem->host, CB_AREA, MADV_DONTFORK);
	close(pipefd[0]);
	if (pid < 0) {
		close(pipefd[1]);
		return -errno;
	}
	*secs = cb_write_pages(mem->host, 4);
	close(pipefd[1]);
	waitpid(pid, NULL, 0);
	return 0;
}

/* Seconds to copy and unprotect one CCoW region, the mean of CB_REGIONS. */
static int cb_region(struct gmem *mem, double *secs)
{
	uint8_t *buf = malloc(CB_REGION);
	struct uffd u;
	uint64_t t0;
	int rc = buf ? uffd_open(&u, mem->host, CB_AREA, UFFD_MODE_WP) : -ENOMEM;

	if (rc) {
		free(buf);
		return rc;
	}
	memset(buf, 1, CB_REGION); /* the pool's buffers are touched once, kept */
	rc = uffd_protect(&u, 0, CB_AREA, true);
	t0 = mono_ns();
	for (int r = 0; r < CB_REGIONS && !rc; r++) {
		memcpy(buf, mem->host + (uint64_t)r * CB_REGION, CB_REGION);
		__asm__ volatile("" : : "r"(buf) : "memory"); /* the copy is used: keep it */
		rc = uffd_protect(&u, (uint64_t)r * CB_REGION, CB_REGION, false);
	}
	*secs = (double)(mono_ns() - t0) / 1e9 / CB_REGIONS;
	uffd_close(&u);
	free(buf);
	return rc;
}

/* Fresh THP-backed memory, every page written once (resident, as a busy guest's). */
static int cb_memory(struct gmem *mem)
{
	int rc = gmem_map(mem, CB_AREA);

	if (!rc)
		memset(mem->host, 1, CB_AREA);
	return rc;
}

static int cb_round(int round)
{
	const double pages = (double)(CB_AREA / PAGE_SIZE), per_region = (double)(CB_REGION / PAGE_SIZE);
	double plain = 0, trap = 0, forkc = 0, region = 0;
	struct gmem m1, m2, m3;
	int rc = cb_memory(&m1) || cb_memory(&m2) || cb_memory(&m3) ? -ENOMEM : 0;

	if (!rc) {
		plain = cb_write_pages(m1.host, 2);
		rc = cb_trap(&m1, &trap);
	}
	if (!rc)
		rc = cb_fork_cow(&m2, &forkc);
	if (!rc)
		rc = cb_region(&m3, &region);
	if (!rc) {
		double w = plain / pages, t = (trap - plain) / pages, f = (forkc - plain) / pages;

		printf("{\"round\":%d,\"write_ns\":%.1f,\"trap_us\":%.3f,\"fork_cow_us\":%.3f,"
		       "\"region_us\":%.1f,\"breakeven_uffd\":%.4f,\"breakeven_fork\":%.4f}\n",
		       round, w * 1e9, t * 1e6, f * 1e6, region * 1e6, region / (per_region * t),
		       region / (per_region * f));
	}
	gmem_unmap(&m1);
	gmem_unmap(&m2);
	gmem_unmap(&m3);
	return rc;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;

	if (argc > 2 || rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: cost-bench [ROUNDS]  (1..100, default 5)\n");
		return 2;
	}
	for (int r = 1; r <= rounds; r++) {
		int rc = cb_round(r);

		if (rc) {
			fprintf(stderr, "cost-bench: %s%s\n", strerror(-rc),
				rc == -EPERM ? " (userfaultfd: run as root)" : "");
			return 1;
		}
	}
	return 0;
}

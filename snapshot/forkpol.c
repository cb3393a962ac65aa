/*
 * forkpol.c - policy fork: the kernel's copy-on-write.
 *
 * While paused, the monitor forks; the child sees memory as it was at the fork, writes
 * it into the image and exits, while the parent resumes at once and pays a kernel
 * copy-on-write fault for each first write to a page it still shares with the child.
 * A waiter thread reaps the child and takes the figures: the parent's minor faults
 * during the snapshot, and the extra memory (PSS of both, so that shared pages count
 * once, less the parent's before).
 */
#include "forkpol.h"
#include "../base/pages.h"
#include "../base/role.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FORK_POLL_MS 20

/* Proportional set size of process @pid in bytes, 0 if unknown. */
static uint64_t forkpol_pss(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

static long forkpol_minflt(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

/* In the child: only the forking thread lives here. Save every page as the fork left
 * it (holes where nothing was resident), finish the image, exit 0 or with the error
 * number. It dies with the monitor, so a killed monitor leaves no child to rename an
 * image later. */
static void forkpol_child(struct snap_fork *f)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	struct wq_chunk *ch = &f->wr->wq.slot[0]; /* the queue is idle: its buffers are free */
	int rc = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != f->parent)
		_exit(ESRCH); /* the monitor died before the line above */
	for (uint64_t c = 0; c < f->wr->size / IMG_CHUNK && !rc; c++) {
		uint64_t zero;

		for (uint64_t i = 0; i < per; i++) {
			bool present = ps_get(&f->wr->pt->state[c * per + i]) != PS_ZERO;

			ch->what[i] = present ? IMG_PAGE_DATA : IMG_PAGE_HOLE;
			if (present)
				memcpy(ch->buf + i * PAGE_SIZE, f->wr->host + (c * per + i) * PAGE_SIZE, PAGE_SIZE);
			else
				memset(ch->buf + i * PAGE_SIZE, 0, PAGE_SIZE);
		}
		rc = img_chunk_prepare(f->wr->job.img, c, ch->buf, ch->what, &zero);
		if (!rc)
			rc = img_chunk_write(f->wr->job.img, c, ch->buf, ch->what, f->wr->wq.scratch[0]);
		writer_throttle(f->wr, (c + 1) * IMG_CHUNK);
	}
	if (!rc)
		rc = img_finish(f->wr->job.img);
	_exit(rc ? ((-rc & 0xff) ? (-rc & 0xff) : EIO) : 0);
}

/* While paused: fork the writer. Guest RAM is MADV_DONTFORK (nothing the monitor
 * starts may share it), so it is made forkable for this one fork only. */
int forkpol_start(struct snap_fork *f)
{
	pid_t pid;
	int rc;

	f->cow_faults = f->extra_bytes = f->pages_zero = f->pages_saved = 0;
	f->parent = (int)getpid();
	f->minflt0 = forkpol_minflt();
	if (madvise(f->wr->host, f->wr->size, MADV_DOFORK) < 0)
		return -errno;
	pid = fork();
	if (pid == 0)
		forkpol_child(f);
	rc = pid < 0 ? -errno : 0;
	madvise(f->wr->host, f->wr->size, MADV_DONTFORK);
	f->child = pid > 0 ? pid : 0;
	return rc;
}

/* The child's end as a result: 0, or -errno with what failed in *@what. */
static int forkpol_status(int status, const char **what)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status)) {
		*what = "writing the image (child)";
		return -WEXITSTATUS(status);
	}
	*what = "the writing child was killed";
	return -ECHILD;
}

void *forkpol_waiter(void *arg)
{
	struct snap_fork *f = arg;
	struct timespec nap = { .tv_nsec = FORK_POLL_MS * 1000000L };
	uint64_t peak = 0, zero = 0;
	const char *what = NULL;
	int status = 0, rc;

	role_enter(ROLE_SNAPSHOT);
	for (;;) {
		pid_t w = waitpid(f->child, &status, WNOHANG);
		uint64_t pss;

		if (w == f->child || (w < 0 && errno != EINTR))
			break;
		if (__atomic_load_n(f->stopping, __ATOMIC_ACQUIRE))
			kill(f->child, SIGKILL);
		pss = forkpol_pss(getpid()) + forkpol_pss(f->child);
		peak = pss > peak ? pss : peak;
		nanosleep(&nap, NULL);
	}
	for (uint64_t p = 0; p < f->wr->size / PAGE_SIZE; p++)
		zero += ps_get(&f->wr->pt->state[p]) == PS_ZERO;
	f->child = 0;
	f->cow_faults = (uint64_t)(forkpol_minflt() - f->minflt0);
	f->extra_bytes = peak > f->pss0 ? peak - f->pss0 : 0;
	f->pages_zero = zero;
	f->pages_saved = f->wr->size / PAGE_SIZE - zero;
	rc = forkpol_status(status, &what);
	f->done(f->done_ctx, rc, what);
	return NULL;
}

void forkpol_init(struct snap_fork *f, struct snap_writer *wr, const bool *stopping,
		  void (*done)(void *ctx, int rc, const char *what), void *done_ctx)
{
	memset(f, 0, sizeof(*f));
	*f = (struct snap_fork){ .wr = wr, .stopping = stopping, .done = done,
				 .done_ctx = done_ctx };
}

void forkpol_before(struct snap_fork *f)
{
	f->pss0 = forkpol_pss(getpid());
}

void forkpol_abandon(struct snap_fork *f)
{
	kill(f->child, SIGKILL);
	waitpid(f->child, NULL, 0);
	f->child = 0;
}

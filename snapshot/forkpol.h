/*
 * forkpol.h - policy fork: the kernel's copy-on-write in a child process that writes
 * the image, Redis BGSAVE's mechanism and the CCoW paper's baseline (forkpol.c).
 */
#ifndef CCVM_FORKPOL_H
#define CCVM_FORKPOL_H

#include "writer.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * One fork at a time: the engine's thread that starts it, then the waiter thread, own
 * these fields in turn.
 */
struct snap_fork {
	struct snap_writer *wr;   /* memory, page tables, image, rate, buffers */
	const bool *stopping;     /* the engine's: kill the child */
	pid_t child;              /* the process writing the image, or 0 */
	int parent;               /* our pid, which the child checks is still alive */
	uint64_t pss0;            /* our PSS before the fork */
	long minflt0;             /* our minor faults before it */
	/* When the child is done: what the parent paid, and the snapshot's end. */
	uint64_t cow_faults, extra_bytes, pages_zero, pages_saved;
	void (*done)(void *ctx, int rc, const char *what);
	void *done_ctx;
};

void forkpol_init(struct snap_fork *f, struct snap_writer *wr, const bool *stopping,
		  void (*done)(void *ctx, int rc, const char *what), void *done_ctx);

/* Before the pause (reading it walks every mapping): our PSS now. */
void forkpol_before(struct snap_fork *f);

/* While paused: fork the child that writes the image. 0 or -errno. */
int forkpol_start(struct snap_fork *f);

/* The waiter: reaps the child, takes the figures, and calls done with 0, or -errno and
 * what failed. Run as a thread (@arg is the struct snap_fork). */
void *forkpol_waiter(void *arg);

/* The waiter could not start: the child is killed and reaped. */
void forkpol_abandon(struct snap_fork *f);

#endif

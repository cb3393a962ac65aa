/*
 * aspace.h - the address spaces of a VM's processes: a window of guest-physical memory
 * each, the page tables that map it, and 2 MiB blocks shared copy-on-write after a
 * fork (mmu/aspace.c).
 */
#ifndef CCVM_ASPACE_H
#define CCVM_ASPACE_H

#include "gmem.h"

#include <pthread.h>
#include <stdint.h>

#define ASPACE_MAX 64   /* windows, so processes, at most: one bit each in a flush mask */
#define ASPACE_OWN (-1) /* a block the space maps from its own window */
#define ASPACE_NO_BUDGET UINT32_MAX

struct aspace;

struct aspace_set {
	struct gmem *mem;
	uint64_t window;        /* bytes of virtual space, and of guest-physical window, each */
	uint32_t blocks;        /* 2 MiB blocks in a window */
	int n;                  /* windows there is guest-physical room for */
	pthread_mutex_t lock;   /* every change to any space of the set */
	struct aspace *as[ASPACE_MAX]; /* per window: the space in it, NULL when free */
	uint16_t *readers;      /* [w * blocks + b]: spaces that map window w's block b
				 * read-only, as theirs */
	uint32_t *next;         /* per window: its first page-table page never used yet */
	int half;               /* the half of every window's pool in use (aspace.c) */
	bool *canon;            /* per window: its pool starts with the tables of a space
				 * that owns every block, never changed since (reused) */
	/* Called within every change, with the lock held, before the change goes on: the
	 * spaces whose CR3 moved, whose vCPUs must have left their old tables when it
	 * returns (a running one kicked, and loading the new CR3 before it runs again).
	 * It must not take the lock. NULL: nothing runs the spaces. */
	void (*flush)(void *ctx, uint64_t mask);
	void *flush_ctx;
	/* Called when the spaces moved to the other half of their pools and flush
	 * returned: the VM makes KVM forget every translation it built
	 * (docs/processes.md), after which the old half's pages may serve again. NULL on
	 * plain memory, where nothing caches them. */
	void (*recycle)(void *ctx);
	void *recycle_ctx;
	/* Called as a space ends, once no other space maps its window and before the window
	 * may be taken again (the lock held): the VM takes its memory slot away, which
	 * must not race with the next space's in that window. NULL on plain memory. */
	void (*window_off)(void *ctx, int win);
	void *window_off_ctx;
	/* A snapshot's hold (aspace_hold): per [w * blocks + b], set while the block is
	 * the snapshot's and not yet saved; @hold_copy saves one (the lock held). */
	uint8_t *held;
	uint32_t n_held;
	void (*hold_copy)(void *ctx, int win, uint32_t b);
	void *hold_ctx;
	/* The VM-wide memory budget (aspace_set_budget): per [w * blocks + b], set while
	 * window w's block b may hold bytes, for a process or the monitor wrote there. A
	 * block that is not is zero, and its host memory untouched. Each set one is
	 * charged; a change that would charge past @budget fails with -ENOMEM. */
	uint8_t *backed;
	uint32_t n_backed;
	uint32_t budget;        /* blocks; ASPACE_NO_BUDGET: no bound */
};

struct aspace {
	struct aspace_set *set;
	int win;                /* its window: guest-physical [win * window, + window) */
	uint64_t cr3;           /* its PML4 now (moves with every change: aspace.h) */
	int8_t *src;            /* per block: ASPACE_OWN, or the window whose block it reads */
	uint64_t *pde;          /* per block: its entry, as the tables in use hold it */
	uint64_t *pd;           /* per GiB: the page directory in use */
	uint8_t *dirty;         /* per GiB: an entry changed since that directory was written */
	uint32_t n_pd;
	uint8_t *shared;        /* per block: it reads another's, or others read it */
	uint32_t n_shared;      /* of them set (read without the lock: 0 is the fast path) */
	uint8_t *lost;          /* per block: it read another's, and there was no room for
				 * its copy when the owner wrote it (aspace.c): a touch
				 * fails until the block is dropped or the space starts over */
	uint32_t n_absent;      /* user blocks of its own never backed, so mapped not present
				 * (entry 0); read without the lock, as n_shared */
	bool eager;             /* every own block backed from the start (aspace_create) */
	struct gmem_cow cow;    /* the view's side of it (aspace_view) */
	struct gmem view;       /* the process's view of guest memory */
};

/* Windows of @window bytes (a multiple of 2 MiB, LAYOUT_MIN_RAM..LAYOUT_MAX_RAM) for
 * @n spaces, in guest memory @mem of at least @n windows: 0, -EINVAL or -ENOMEM. */
int aspace_set_init(struct aspace_set *s, struct gmem *mem, uint64_t window, int n);
void aspace_set_fini(struct aspace_set *s);

/*
 * Page tables are written once. On our hosts KVM shadows the guest's tables and sees
 * only the guest's own writes to them: a change the monitor makes in place reaches no
 * vCPU, not even after a CR3 reload, and a page once used as a table keeps its old
 * translations when rewritten (docs/processes.md has the probe). So a change writes a
 * fresh page directory, PDPT and PML4 from the window's pool of pages never used, and
 * the space's CR3 moves to them. A flush mask has bit w set when the space in window w
 * got a new CR3: its vCPUs load it before they run on (a running one is kicked first).
 */

/* The most 2 MiB blocks all windows may hold together (ASPACE_NO_BUDGET, the default:
 * no bound), set before any space exists; and how many they hold now. */
void aspace_set_budget(struct aspace_set *s, uint32_t blocks);
uint32_t aspace_set_charged(struct aspace_set *s);

/*
 * Memory is charged 2 MiB at a time, as a window's block comes to hold bytes. A space
 * from aspace_create (the VM's first process) is eager: every user block is charged
 * and mapped from the start, so it runs at native speed with no fault to back its
 * memory. Every other space (a fork, a restored process) is lazy: a block of its own
 * is mapped not present until it is first touched. That fault, or the monitor's own
 * write there (aspace_own), charges the block and maps it; past the budget it fails
 * with -ENOMEM and nothing changes. A copy-on-write copy is charged as it is made, to
 * the space it is made for; when the owner writes a block and a reader's copy does not
 * fit, that reader loses the block (its next touch fails), never the writer.
 * Blocks are given back when their space resets or ends.
 */

/* A space of its own: the lowest free window (window 0 maps RAM to itself, as a VM
 * with one process always did), every user block its own, zero, charged (eager).
 * 0, -EAGAIN, or -ENOMEM past the budget. */
int aspace_create(struct aspace_set *s, struct aspace **out);
/* The same, lazy (nothing charged until touched): a vfork child's memory of its own,
 * as its exec starts it. */
int aspace_create_lazy(struct aspace_set *s, struct aspace **out);

/* A child of @parent, lazy: each block whose bit is set in @used (a bit per block;
 * NULL: all) and that holds bytes is shared with it read-only, in both; the others
 * are the child's own, zero. 0, -EAGAIN (no window) or -ENOMEM (no memory, or its
 * copies past the budget); @flush gets the parent's bit. */
int aspace_fork(struct aspace *parent, const uint64_t *used, struct aspace **out,
		uint64_t *flush);
/* The same, but each used block whose bit is set in @copy is copied into the child's
 * window at once, the child's own, and stays the parent's alone: blocks holding
 * shared mappings (vmm/linux/shm.c), which the child maps over its copy. */
int aspace_fork_copy(struct aspace *parent, const uint64_t *used, const uint64_t *copy,
		     struct aspace **out, uint64_t *flush);

/* A write to @gva faulted, or a touch of a block not present: the block becomes
 * writable, the space's own (a copy of what it read) and read by nobody else (readers
 * get their own copy first, or lose the block past the budget). 0, -EFAULT when @gva
 * is not user memory of the space, or -ENOMEM when its own block would go past the
 * budget or was lost. */
int aspace_write_fault(struct aspace *as, uint64_t gva, uint64_t *flush);

/* Every block of [@gva, @gva + @len) as aspace_write_fault leaves it: the monitor may
 * then read and write the range in place, contiguously, at the window's host address.
 * 0, -EFAULT or -ENOMEM (then no block changed). */
int aspace_own(struct aspace *as, uint64_t gva, uint64_t len, uint64_t *flush);

/* [@gva, @gva + @len) is about to be discarded (read as zero): each block it covers
 * whole stops reading another window and keeps no reader (readers get their copy),
 * with nothing copied into it or charged; a block it covers in part is made its own as
 * aspace_own does, unless never backed (zero already). 0, -EFAULT or -ENOMEM. */
int aspace_drop(struct aspace *as, uint64_t gva, uint64_t len, uint64_t *flush);

/* Where @gva's bytes are now (read them only): a guest-physical address, or -1. */
int64_t aspace_gpa(struct aspace *as, uint64_t gva);

/* The space's view of guest memory (mmu/gmem.h, gmem_view): what its process's
 * system calls go through. Blocks the monitor writes in place are made the space's
 * own first; what that changes goes to the set's flush callback. */
struct gmem *aspace_view(struct aspace *as);

/* For a restore (before any vCPU ran): a space in window @win, every block its own,
 * zero (0, -EINVAL for window 0 or beyond the set, -EEXIST when taken); then block @b
 * of @as reading window @from's, as a fork left it (0, or -EINVAL unless @b is a user
 * block, @from another window whose space owns its block @b); aspace_tables after. */
int aspace_create_at(struct aspace_set *s, int win, struct aspace **out);
int aspace_restore_read(struct aspace *as, uint32_t b, int from);
/* Block @b of window @w (not the first's, no space there yet) is about to be filled
 * ahead of its space (a migration stream's records): charged now, keeping the first
 * window's whole charge free while it has no space. 0, -EINVAL (not such a block),
 * -EEXIST (charged already: sent twice) or -ENOMEM past the budget. */
int aspace_restore_back(struct aspace_set *s, int w, uint32_t b);
/* Block @b of window @w was filled by a restore: charged, and mapped by its space.
 * 0, -EINVAL (no space there, or not a user block) or -ENOMEM past the budget. */
int aspace_restore_fill(struct aspace_set *s, int w, uint32_t b);
/* What a snapshot saves of a space: ASPACE_OWN or the window block @b reads. */
int aspace_source(struct aspace *as, uint32_t b);

/* The space's page tables written again from its state at the start of its window's
 * pool, as after a restore overwrote guest memory with an image's: only before any
 * vCPU of the VM ran, when nothing holds a translation. */
void aspace_tables(struct aspace *as);

/* The space forgets every block (readers of its own keep the data) and starts empty,
 * as exec leaves a process: 0. Like aspace_destroy, it discards memory: a snapshot in
 * progress must have saved the window first (the caller's business, as for munmap). */
int aspace_reset(struct aspace *as, uint64_t *flush);

/* The space ends: readers of its blocks keep the data, its window is given back and
 * reads as zero. */
void aspace_destroy(struct aspace *as, uint64_t *flush);

/*
 * A snapshot's hold on the spaces' own memory (docs/processes.md, "Snapshots of a
 * tree"), taken while nothing runs: each block whose bit is set in @bits[w] (a bitmap
 * per window; NULL: none of it) and that window w's space owns becomes read-only for
 * everyone, as if a reader shared it. The first change of such a block (a write fault,
 * the monitor making it its own, an exec or exit letting go of it) first calls @copy
 * with the lock held, which saves the block's bytes as they were; aspace_hold_end
 * saves the rest, one block at a time, and ends the hold, the blocks writable again
 * at one table change per space. 0, or -EBUSY while another hold lasts.
 */
int aspace_hold(struct aspace_set *s, uint64_t *const *bits,
		void (*copy)(void *ctx, int win, uint32_t b), void *ctx, uint64_t *flush);
void aspace_hold_end(struct aspace_set *s, uint64_t *flush);

#endif

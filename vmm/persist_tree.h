/*
 * persist_tree.h - the processes besides the first in a snapshot, and back
 * (persist_tree.c).
 */
#ifndef CCVM_PERSIST_TREE_H
#define CCVM_PERSIST_TREE_H

#include "linux/lx.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct vm;
struct img_writer;
struct kvm_saved;

/* The VM's live processes in the order their threads' vCPU states are saved: the
 * first process, then the others; @threads[k] of @procs[k], their lx threads in @lx. */
struct tree_procs {
	struct lx_proc *procs[LX_MAX_PROCS];
	int threads[LX_MAX_PROCS];
	int n;
	struct lx_thread **lx;
};

/* The tree and windows sections of a paused VM's processes after the first: 0,
 * -E2BIG (their own memory is more than an image holds, logged), -ENOMEM. With
 * @later, the windows section waits for tree_finish: the blocks the processes own are
 * held (aspace_hold) and saved as they are first written, or by tree_finish, so that
 * the pause does not grow with them; only the blocks a call blocked in the host may
 * write are copied in the pause. */
int tree_capture(struct vm *vm, struct img_writer *img, const struct tree_procs *tp,
		 bool later);
/* After tree_capture(later): every held block saved and the hold ended; with @img, the
 * windows section added to it. 0, or the error that made a block unsavable. */
int tree_finish(struct vm *vm, struct img_writer *img);

/* A windows section to restore from: whole in memory (@data: a migration stream's,
 * which the receiver bounded), or read a record at a time through @read (an image's,
 * which is never read whole: @read gives @n bytes at @off, 0 or -errno). */
struct tree_windows {
	const uint8_t *data;
	size_t len;
	int (*read)(void *ctx, uint64_t off, void *buf, size_t n);
	void *ctx;
};

/* Window records that came ahead of their tree (a migration stream's): each checked,
 * charged to --mem-total and copied into its place in guest memory as it comes, only
 * its place kept; tree_placed_read then serves them as a windows section does, the
 * blocks already where tree_restore would put them. */
struct tree_placed {
	struct vm *vm;
	uint32_t (*heads)[2];
	size_t n, cap;
};
/* @len bytes of whole records: 0, or -EPROTO/-ENOMEM with why in @err. */
int tree_place_records(struct tree_placed *tp, const uint8_t *data, size_t len, char *err,
		       size_t errlen);
size_t tree_placed_len(const struct tree_placed *tp);
int tree_placed_read(const struct tree_placed *tp, uint64_t off, void *buf, size_t n);
void tree_placed_free(struct tree_placed *tp);

/* A tree section as ccvm writes it, for RAM of @ram_size, @n_vcpus saved vCPUs of
 * which the first process has @first_threads, with its windows section (each record's
 * place read and checked, its block left where it is): 0, or -EINVAL with why in
 * @err. No VM needed. */
int tree_check(json_t *tree, const struct tree_windows *windows, size_t n_vcpus,
	       int first_threads, uint64_t ram_size, char *err, size_t errlen);

/* A vCPU for each of process @q's saved threads (state @st), from saved vCPU state
 * @first on, each loaded and its personality thread restored: 0, or -errno (logged).
 * The first process's restore uses it too. */
int restore_proc_threads(struct vm *vm, struct lx_proc *q, json_t *st,
			 const struct kvm_saved *saved, int first);

/* The checked tree back into @vm, whose first process is restored: windows, memory,
 * processes (under @pol, whose pipes the first process's restore filled), the tree
 * and threads from saved vCPU @first on. 0 or -errno (logged). */
int tree_restore(struct vm *vm, json_t *tree, const struct tree_windows *windows,
		 const struct lx_restore_policy *pol, const struct kvm_saved *saved, int first);

#endif

/*
 * persist_tree.c - the processes besides the first in a snapshot, and back (image
 * version 3; docs/processes.md, "Snapshots of a tree").
 *
 * The first process is saved as it always was (its state section, window 0 through
 * the snapshot engine, so its copy-on-write and coverage work as before). The others
 * go into two more sections: the tree (each process's pid, parent, group, session,
 * window, threads and personality state, the blocks it reads from another window, and
 * the processes that ended and were not waited for), written while the VM is paused,
 * and their windows: each block a process owns and maps, once, with its place. A block
 * a child reads from its parent is in the image once, where its parent has it. The
 * windows are copied in the pause for the fork policy (whose child finishes the image);
 * otherwise their blocks are held read-only (aspace_hold) and each is saved before its
 * first change or after the pause (tree_finish): 2 MiB copy-on-write through the
 * guest's page tables, as a fork shares them, so the pause does not grow with the
 * children's memory. Either way each block is streamed into the section as it is
 * saved (img_stream_record: into the image file, or as a section of its own over a
 * migration stream), never gathered in the monitor's memory.
 *
 * On restore every saved process gets its window back (the same one: blocks read from
 * another window name it), its blocks, its personality state (pipes shared between
 * processes made once: lx_restore_policy's pipes), its place in the tree and its
 * threads. The sharing map is checked by aspace_restore_read: a block may only read a
 * window whose process owns it; the page tables are ccvm's own, written afresh. A
 * migration's destination puts each block in place as it arrives (tree_place_records),
 * charged to its --mem-total, and restores from there.
 */
#include "persist_tree.h"
#include "../base/log.h"
#include "vcpu.h"
#include "vm.h"
#include "../mmu/layout.h"
#include "../mmu/vma.h"
#include "../snapshot/image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TREE_REC_HEAD 8 /* a window record: u32 window, u32 block, then the block */

/* ---- capture ---- */

/* Block @b of window @w into the windows section as it is now: a record streamed to
 * the image (or the migration stream), never gathered in memory. */
static int tree_put_block(struct vm *vm, struct img_writer *img, int w, uint32_t b)
{
	uint32_t head[2] = { (uint32_t)w, b };

	return img_stream_record(img, head, sizeof(head),
				 vm->mem.host + (uint64_t)w * vm->spaces.window +
					 (uint64_t)b * HUGE_SIZE, HUGE_SIZE);
}

/* Block @b of window @w reads as zero (never written, or written with zeros): a
 * restored window is zero to begin with. */
static bool tree_zero(struct vm *vm, int w, uint32_t b)
{
	const uint64_t *q = (const uint64_t *)(vm->mem.host + (uint64_t)w * vm->spaces.window +
					       (uint64_t)b * HUGE_SIZE);

	for (size_t i = 0; i < HUGE_SIZE / sizeof(*q); i++)
		if (q[i])
			return false;
	return true;
}

/* The children's memory saved after the pause, into the windows section streamed. */
struct tree_hold {
	struct vm *vm;
	struct img_writer *img;
	int rc;                  /* the first block that could not be saved */
	uint64_t *bits[ASPACE_MAX]; /* per window: the blocks held */
};

/* Which blocks of @q's space read another window ([[block, window], ...]); with @img,
 * the blocks it owns and maps are streamed there, or, with @hold, those a call blocked
 * in the host might write are and the others are marked to be held. */
static int tree_space(struct vm *vm, struct lx_proc *q, struct img_writer *img,
		      struct tree_hold *hold, json_t **reads)
{
	struct aspace *as = vm_space_of(vm, q);
	uint32_t n = vm->spaces.blocks, words = (n + 63) / 64;
	uint64_t *used = calloc(2 * (size_t)words, sizeof(*used)), *blocked = used + words;
	int rc = used ? 0 : -ENOMEM;

	*reads = json_array();
	if (!rc)
		vma_map_blocks(&q->mm.map, HUGE_SIZE, used, n);
	if (!rc && hold) {
		gmem_waiting_blocks(&vm->mem, (uint64_t)as->win * vm->spaces.window,
				    vm->spaces.window, HUGE_SIZE, blocked);
		hold->bits[as->win] = calloc(words, sizeof(uint64_t));
		rc = hold->bits[as->win] ? 0 : -ENOMEM;
	}
	for (uint32_t b = LAYOUT_USER_BASE / HUGE_SIZE; b < n && !rc; b++) {
		int src = aspace_source(as, b);
		bool in_use = used[b / 64] >> (b % 64) & 1;

		if (src != ASPACE_OWN)
			json_array_append_new(*reads, json_pack("[I, i]", (json_int_t)b, src));
		else if (hold && in_use && !(blocked[b / 64] >> (b % 64) & 1))
			hold->bits[as->win][b / 64] |= 1ULL << (b % 64);
		else if (img && in_use && !tree_zero(vm, as->win, b))
			rc = tree_put_block(vm, img, as->win, b);
	}
	free(used);
	return rc;
}

/* aspace_hold's copy: block @b of window @w, as it was at the pause, into the windows
 * section (none for a zero block). The address spaces' lock is held. */
static void tree_hold_copy(void *ctx, int w, uint32_t b)
{
	struct tree_hold *h = ctx;
	struct img_writer *img = __atomic_load_n(&h->img, __ATOMIC_ACQUIRE);
	int rc;

	if (h->rc || !img || tree_zero(h->vm, w, b))
		return;
	rc = tree_put_block(h->vm, img, w, b);
	if (rc && !h->rc)
		h->rc = rc;
}

static void tree_hold_free(struct tree_hold *h)
{
	for (int w = 0; w < ASPACE_MAX; w++)
		free(h->bits[w]);
	free(h);
}

static void tree_too_big(int rc)
{
	if (rc == -E2BIG)
		log_warn("snapshot failed: the processes besides the first own more than %d times "
			 "--mem of memory, which an image does not hold", IMG_WINDOWS_RAM_TIMES);
}

int tree_finish(struct vm *vm, struct img_writer *img)
{
	struct tree_hold *h = vm->hold;
	uint64_t flush = 0;
	int rc;

	if (!h)
		return 0;
	if (!img) /* given up: the blocks still held need no copy */
		__atomic_store_n(&h->img, NULL, __ATOMIC_RELEASE);
	aspace_hold_end(&vm->spaces, &flush);
	vm->hold = NULL;
	rc = img ? h->rc : 0;
	tree_too_big(rc);
	if (!rc && img)
		rc = img_stream_end(img);
	tree_hold_free(h);
	return rc;
}

static json_t *tree_place(const struct lx_proc *q)
{
	return json_pack("{s:i, s:i, s:i, s:i}", "pid", q->pid, "ppid", q->ppid, "pgid", q->pgid,
			 "sid", q->sid);
}

int tree_capture(struct vm *vm, struct img_writer *img, const struct tree_procs *tp,
		 bool later)
{
	struct tree_hold *hold = later ? calloc(1, sizeof(*hold)) : NULL;
	json_t *tree = json_object(), *procs = json_array(), *zombies = json_array(), *reads;
	struct lx_tree *t = &vm->tree;
	char *text = NULL;
	int rc = tree_space(vm, vm->proc, NULL, NULL, &reads), at = tp->threads[0];
	uint64_t flush = 0;

	if (later && !hold)
		rc = -ENOMEM;
	if (hold) {
		hold->vm = vm;
		hold->img = img;
	}
	/* The windows section streams from here: blocks now, and held ones until
	 * tree_finish. */
	if (!rc)
		rc = img_stream_begin(img, IMG_SEC_WINDOWS);
	json_object_set_new(tree, "root", json_pack("{s:i, s:i, s:o}", "pgid", vm->proc->pgid,
						    "sid", vm->proc->sid, "reads", reads));
	for (int k = 1; k < tp->n && !rc; k++) {
		struct lx_proc *q = tp->procs[k];
		json_t *e = tree_place(q);

		rc = tree_space(vm, q, img, hold, &reads);
		json_object_set_new(e, "win", json_integer(vm_space_of(vm, q)->win));
		json_object_set_new(e, "reads", reads);
		json_object_set_new(e, "state", lx_state_save(q, tp->lx + at, tp->threads[k]));
		json_array_append_new(procs, e);
		at += tp->threads[k];
	}
	pthread_mutex_lock(&t->lock);
	for (int i = 1; i < LX_MAX_PROCS; i++)
		if (t->procs[i] && t->procs[i]->ended) {
			json_t *z = tree_place(t->procs[i]);

			json_object_set_new(z, "wstatus", json_integer(t->procs[i]->wstatus));
			json_array_append_new(zombies, z);
		}
	json_object_set_new(tree, "next_id", json_integer(t->next_id));
	pthread_mutex_unlock(&t->lock);
	json_object_set_new(tree, "procs", procs);
	json_object_set_new(tree, "zombies", zombies);
	tree_too_big(rc);
	if (!rc && !(text = json_dumps(tree, JSON_COMPACT)))
		rc = -ENOMEM;
	if (!rc)
		rc = img_add_section(img, IMG_SEC_TREE, text, strlen(text));
	if (!rc && !hold)
		rc = img_stream_end(img);
	if (!rc && hold)
		rc = aspace_hold(&vm->spaces, hold->bits, tree_hold_copy, hold, &flush);
	if (!rc && hold) {
		vm->hold = hold;
		hold = NULL;
	}
	if (hold)
		tree_hold_free(hold);
	free(text);
	json_decref(tree);
	return rc;
}

/* ---- records that came ahead ---- */

int tree_place_records(struct tree_placed *tp, const uint8_t *data, size_t len, char *err,
		       size_t errlen)
{
	struct vm *vm = tp->vm;

	if (len % (TREE_REC_HEAD + HUGE_SIZE))
		return log_set_err(-EPROTO, err, errlen, "windows section: %zu bytes, not whole "
				   "2 MiB blocks with their place", len);
	for (size_t off = 0; off < len; off += TREE_REC_HEAD + HUGE_SIZE) {
		uint32_t head[2];
		int rc;

		memcpy(head, data + off, sizeof(head));
		if (tp->n == tp->cap) {
			size_t cap = tp->cap ? 2 * tp->cap : 64;
			void *h = realloc(tp->heads, cap * sizeof(*tp->heads));

			if (!h)
				return log_set_err(-ENOMEM, err, errlen, "no memory");
			tp->heads = h;
			tp->cap = cap;
		}
		rc = aspace_restore_back(&vm->spaces, (int)head[0], head[1]);
		if (rc == -ENOMEM)
			return log_set_err(-EPROTO, err, errlen, "the processes' memory is more "
					   "than --mem-total (%llu MiB; the RAM's own counts too): "
					   "give the destination a larger --mem-total",
					   (unsigned long long)(vm->mem_total >> 20));
		if (rc)
			return log_set_err(-EPROTO, err, errlen, "windows section: block %u of "
					   "window %u %s", head[1], head[0], rc == -EEXIST ?
					   "sent twice" : "is no process's memory");
		memcpy(vm->mem.host + (uint64_t)head[0] * vm->spaces.window +
			       (uint64_t)head[1] * HUGE_SIZE,
		       data + off + TREE_REC_HEAD, HUGE_SIZE);
		memcpy(tp->heads[tp->n++], head, sizeof(head));
	}
	return 0;
}

size_t tree_placed_len(const struct tree_placed *tp)
{
	return tp->n * (TREE_REC_HEAD + HUGE_SIZE);
}

/* A record's place, or its block: the block is in place already (tree_blocks reads it
 * to where it is). */
int tree_placed_read(const struct tree_placed *tp, uint64_t off, void *buf, size_t n)
{
	uint64_t i = off / (TREE_REC_HEAD + HUGE_SIZE), part = off % (TREE_REC_HEAD + HUGE_SIZE);
	const uint8_t *block;

	if (i >= tp->n)
		return -EINVAL;
	if (part == 0 && n == TREE_REC_HEAD) {
		memcpy(buf, tp->heads[i], n);
		return 0;
	}
	if (part != TREE_REC_HEAD || n != HUGE_SIZE)
		return -EINVAL;
	block = tp->vm->mem.host + (uint64_t)tp->heads[i][0] * tp->vm->spaces.window +
		(uint64_t)tp->heads[i][1] * HUGE_SIZE;
	if (buf != block)
		memcpy(buf, block, n);
	return 0;
}

void tree_placed_free(struct tree_placed *tp)
{
	free(tp->heads);
	tp->heads = NULL;
	tp->n = tp->cap = 0;
}

/* ---- check (no VM: inspect uses it too) ---- */

static bool tree_int(json_t *o, const char *key, int64_t lo, int64_t hi)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

static bool tree_place_ok(json_t *o)
{
	return tree_int(o, "pid", 1, INT32_MAX) && tree_int(o, "ppid", 0, INT32_MAX) &&
	       tree_int(o, "pgid", 0, INT32_MAX) && tree_int(o, "sid", 0, INT32_MAX);
}

/* [[block, window], ...] with user blocks of RAM of @ram_size and windows below 64. */
static bool tree_reads_ok(json_t *reads, uint64_t ram_size)
{
	size_t i;
	json_t *r;

	if (!json_is_array(reads))
		return false;
	json_array_foreach(reads, i, r) {
		int64_t b = json_integer_value(json_array_get(r, 0));
		int64_t w = json_integer_value(json_array_get(r, 1));

		if (json_array_size(r) != 2 || b < (int64_t)(LAYOUT_USER_BASE / HUGE_SIZE) ||
		    (uint64_t)b >= ram_size / HUGE_SIZE || w < 0 || w >= GMEM_MAX_WINDOWS)
			return false;
	}
	return true;
}

/* @n bytes of the windows section at @off: from memory, or read in place. */
static int tree_win_read(const struct tree_windows *tw, uint64_t off, void *buf, size_t n)
{
	if (off > tw->len || n > tw->len - off)
		return -EINVAL;
	if (!tw->data)
		return tw->read(tw->ctx, off, buf, n);
	memcpy(buf, tw->data + off, n);
	return 0;
}

/* Each window record names a process's window and a user block, once. */
static int tree_windows_ok(const struct tree_windows *tw, uint64_t wins, uint64_t ram_size,
			   char *err, size_t errlen)
{
	if (tw->len % (TREE_REC_HEAD + HUGE_SIZE))
		return log_set_err(-EINVAL, err, errlen, "windows section: %zu bytes, not whole "
				   "2 MiB blocks with their place", tw->len);
	for (size_t off = 0; off < tw->len; off += TREE_REC_HEAD + HUGE_SIZE) {
		uint32_t head[2];

		if (tree_win_read(tw, off, head, sizeof(head)))
			return log_set_err(-EINVAL, err, errlen, "windows section: unreadable");
		if (head[0] >= GMEM_MAX_WINDOWS || !(wins >> head[0] & 1) ||
		    head[1] < LAYOUT_USER_BASE / HUGE_SIZE || head[1] >= ram_size / HUGE_SIZE)
			return log_set_err(-EINVAL, err, errlen, "windows section: block %u of "
					   "window %u is no saved process's memory", head[1], head[0]);
	}
	return 0;
}

int tree_check(json_t *tree, const struct tree_windows *windows, size_t n_vcpus,
	       int first_threads, uint64_t ram_size, char *err, size_t errlen)
{
	json_t *procs = json_object_get(tree, "procs"), *p;
	size_t i, threads = (size_t)first_threads;
	uint64_t wins = 0;
	char why[512];

	if (!json_is_object(tree) || !json_is_array(procs) ||
	    !json_is_array(json_object_get(tree, "zombies")) ||
	    !tree_int(tree, "next_id", 2, INT32_MAX) ||
	    json_array_size(procs) + json_array_size(json_object_get(tree, "zombies")) >= LX_MAX_PROCS ||
	    !tree_reads_ok(json_object_get(json_object_get(tree, "root"), "reads"), ram_size))
		return log_set_err(-EINVAL, err, errlen, "tree section: not what ccvm writes");
	json_array_foreach(procs, i, p) {
		int64_t w = json_integer_value(json_object_get(p, "win"));
		json_t *st = json_object_get(p, "state");

		if (!tree_place_ok(p) || w < 1 || w >= GMEM_MAX_WINDOWS || (wins >> w & 1) ||
		    !tree_reads_ok(json_object_get(p, "reads"), ram_size))
			return log_set_err(-EINVAL, err, errlen, "tree section: process %zu: its "
					   "ids, window or shared blocks", i);
		if (lx_state_check(st, ram_size, why, sizeof(why)))
			return log_set_err(-EINVAL, err, errlen, "tree section: process %zu: %s", i, why);
		wins |= 1ULL << w;
		threads += (size_t)lx_state_threads(st);
	}
	json_array_foreach(json_object_get(tree, "zombies"), i, p)
		if (!tree_place_ok(p) || !tree_int(p, "wstatus", 0, 0xffff))
			return log_set_err(-EINVAL, err, errlen, "tree section: ended process %zu", i);
	if (threads != n_vcpus)
		return log_set_err(-EINVAL, err, errlen, "tree section: %zu threads for %zu saved "
				   "vCPUs", threads, n_vcpus);
	return tree_windows_ok(windows, wins, ram_size, err, errlen);
}

/* ---- restore ---- */

/* A process's place in the tree, as tree_place saved it (tree_check let it through). */
static struct lx_tree_place tree_place_of(json_t *o)
{
	return (struct lx_tree_place){
		.pid = (int)json_integer_value(json_object_get(o, "pid")),
		.ppid = (int)json_integer_value(json_object_get(o, "ppid")),
		.pgid = (int)json_integer_value(json_object_get(o, "pgid")),
		.sid = (int)json_integer_value(json_object_get(o, "sid")),
	};
}

/* Each saved process's window and space, before any process state: blocks read from
 * another window name it. */
static int tree_spaces(struct vm *vm, json_t *procs, struct aspace **spaces)
{
	size_t i;
	json_t *p;
	int rc = 0;

	json_array_foreach(procs, i, p) {
		int w = (int)json_integer_value(json_object_get(p, "win"));

		rc = aspace_create_at(&vm->spaces, w, &spaces[i]);
		if (!rc && (rc = vm_window_slot(vm, w, true)))
			log_err("cannot give a restored process its memory: %s", strerror(-rc));
		if (rc)
			return rc;
	}
	return 0;
}

/* The saved blocks into their windows, each charged to --mem-total first, a record at
 * a time: an image's go from the file straight into guest memory. Each place is
 * checked again as it is used (an image file may have changed since tree_check). */
static int tree_blocks(struct vm *vm, const struct tree_windows *tw)
{
	for (size_t off = 0; off < tw->len; off += TREE_REC_HEAD + HUGE_SIZE) {
		uint32_t head[2];
		int rc;

		if (tree_win_read(tw, off, head, sizeof(head)))
			goto unreadable;
		rc = aspace_restore_fill(&vm->spaces, (int)head[0], head[1]);
		if (rc == -ENOMEM)
			log_err("cannot restore: the processes' memory is more than --mem-total "
				"(%llu MiB; the RAM's own counts too): give a larger --mem-total",
				(unsigned long long)(vm->mem_total >> 20));
		else if (rc)
			log_err("cannot restore: a saved block lies outside its process's window");
		if (rc)
			return rc == -ENOMEM ? rc : -EBADMSG;
		if (tree_win_read(tw, off + TREE_REC_HEAD,
				  vm->mem.host + (uint64_t)head[0] * vm->spaces.window +
					  (uint64_t)head[1] * HUGE_SIZE,
				  HUGE_SIZE))
			goto unreadable;
	}
	return 0;
unreadable:
	log_err("cannot restore: the windows section is unreadable");
	return -EIO;
}

static int tree_reads(struct aspace *as, json_t *reads)
{
	size_t i;
	json_t *r;
	int rc = 0;

	json_array_foreach(reads, i, r) {
		rc = aspace_restore_read(as, (uint32_t)json_integer_value(json_array_get(r, 0)),
					 (int)json_integer_value(json_array_get(r, 1)));
		if (rc)
			break;
	}
	return rc;
}

int restore_proc_threads(struct vm *vm, struct lx_proc *q, json_t *st,
			 const struct kvm_saved *saved, int first)
{
	int n = lx_state_threads(st), rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		struct vcpu *vcpu;
		int k = first + i;

		rc = vcpu_create(vm, vm->kvm, vm->n_vcpus, &(struct cpu_entry){ 0 }, &vcpu);
		if (rc)
			break;
		vm->vcpus[vm->n_vcpus++] = vcpu;
		rc = kvm_cpu_load(vcpu->cpu, kvm_saved_nth((struct kvm_saved *)saved, (size_t)k));
		if (rc) {
			log_err("the state of vCPU %d does not load (%s)", k, strerror(-rc));
			break;
		}
		rc = lx_thread_restore(q, st, i, vcpu->lx);
		if (rc)
			log_err("thread %d's state is damaged", k);
		vcpu->lx->vcpu = vcpu;
		vcpu->cr3 = 0; /* vcpu_enter loads its process's */
	}
	return rc;
}

static int tree_procs_restore(struct vm *vm, json_t *tree, struct aspace **spaces,
			      const struct lx_restore_policy *pol, const struct kvm_saved *saved,
			      int first)
{
	json_t *procs = json_object_get(tree, "procs"), *p;
	json_t *root = json_object_get(tree, "root");
	int64_t old_pgid = json_integer_value(json_object_get(root, "pgid"));
	int64_t old_sid = json_integer_value(json_object_get(root, "sid"));
	char err[512];
	size_t i;
	int rc = 0;

	json_array_foreach(procs, i, p) {
		json_t *st = json_object_get(p, "state");
		struct lx_tree_place at = tree_place_of(p);
		struct lx_proc *q = NULL;

		/* The first process's group and session are the restoring ccvm's now. */
		if (at.pgid == old_pgid)
			at.pgid = vm->proc->pgid;
		if (at.sid == old_sid)
			at.sid = vm->proc->sid;
		rc = lx_proc_restore(aspace_view(spaces[i]), st, pol, &q, err, sizeof(err));
		if (rc) {
			log_err("cannot restore process %d: %s", at.pid, err);
			return rc;
		}
		q->vm_space = spaces[i];
		rc = lx_tree_restore_add(&vm->tree, q, &at);
		if (rc) {
			log_err("cannot restore process %d: %s", at.pid, rc == -EAGAIN ?
				"the image has more processes than --max-procs allows" :
				"its pid is another's");
			lx_proc_destroy(q);
			return rc;
		}
		rc = restore_proc_threads(vm, q, st, saved, first);
		if (rc)
			return rc;
		first += lx_state_threads(st);
	}
	return 0;
}

static int tree_zombies(struct vm *vm, json_t *tree)
{
	size_t i;
	json_t *z;

	json_array_foreach(json_object_get(tree, "zombies"), i, z) {
		struct lx_tree_place at = tree_place_of(z);
		int rc = lx_tree_restore_zombie(&vm->tree, &at,
						(int)json_integer_value(json_object_get(z, "wstatus")));

		if (rc) {
			log_err("cannot restore ended process %d: %s", at.pid, rc == -EAGAIN ?
				"the image has more processes than --max-procs allows" :
				"its pid is another's");
			return rc;
		}
	}
	return 0;
}

int tree_restore(struct vm *vm, json_t *tree, const struct tree_windows *windows,
		 const struct lx_restore_policy *pol, const struct kvm_saved *saved, int first)
{
	json_t *procs = json_object_get(tree, "procs"), *p;
	struct aspace *spaces[LX_MAX_PROCS] = { 0 };
	size_t i;
	int rc = tree_spaces(vm, procs, spaces);

	if (!rc)
		rc = tree_blocks(vm, windows);
	json_array_foreach(procs, i, p)
		if (!rc)
			rc = tree_reads(spaces[i], json_object_get(p, "reads"));
	if (!rc)
		rc = tree_reads(vm->as0, json_object_get(json_object_get(tree, "root"), "reads"));
	if (rc == -EINVAL)
		log_err("cannot restore: a process's shared blocks do not match the others'");
	if (!rc) {
		aspace_tables(vm->as0);
		json_array_foreach(procs, i, p)
			aspace_tables(spaces[i]);
	}
	if (!rc)
		rc = tree_procs_restore(vm, tree, spaces, pol, saved, first);
	if (!rc)
		rc = tree_zombies(vm, tree);
	if (!rc)
		lx_tree_restore_link(&vm->tree, (int)json_integer_value(json_object_get(tree, "next_id")));
	return rc;
}

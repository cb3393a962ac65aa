/*
 * persist_capture.c - what a snapshot of a VM holds besides its memory.
 *
 * The snapshot engine (snapshot/engine.c) works on a memory range and a struct snap_ops; this
 * file is the one that knows vCPUs and the Linux personality on the capture side
 * (persist_restore.c is its counterpart). Pausing is vm_pause's: every vCPU parked outside guest
 * code. Capture saves each live thread's vCPU registers (kvm_cpu_save) and the
 * process state (lx_state_save) as image sections while the VM stands still, and the
 * other processes of its tree with their own memory (persist_tree.c).
 */
#include "persist_cpu.h"
#include "persist_capture.h"
#include "persist_tree.h"
#include "../snapshot/image.h"
#include "vcpu.h"
#include "vm.h"
#include "../base/log.h"
#include "linux/lx.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int capture_pause(void *ctx)
{
	return vm_pause(ctx);
}

static void capture_resume(void *ctx)
{
	vm_resume(ctx);
}

/* The VM's live processes, the first one first, and whether any other process is in
 * its tree (one that ended and was not waited for too): -EBUSY for a vfork child still
 * in its parent's memory, which has no memory of its own to save. */
static int capture_procs(struct vm *vm, struct tree_procs *tp, bool *tree)
{
	struct lx_tree *t = &vm->tree;
	int rc = 0;

	tp->procs[0] = vm->proc;
	tp->n = 1;
	*tree = false;
	if (!t->max)
		return 0;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < LX_MAX_PROCS && !rc; i++) {
		struct lx_proc *q = t->procs[i];

		if (!q || q == vm->proc)
			continue;
		*tree = true;
		if (q->ended)
			continue;
		if (q->vfork_parent) {
			log_warn("snapshot refused: process %d is a vfork child that has not called "
				 "execve yet (it runs in its parent's memory)", q->pid);
			rc = -EBUSY;
		}
		tp->procs[tp->n++] = q;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Each live thread's vCPU registers, process by process in @tp's order. */
static int capture_vcpus(struct vm *vm, struct tree_procs *tp, void *saved, int *n)
{
	int rc = 0;

	*n = 0;
	for (int k = 0; k < tp->n && !rc; k++) {
		tp->threads[k] = 0;
		for (int i = 0; i < vm->n_vcpus && !rc; i++) {
			struct vcpu *v = vm->vcpus[i];

			/* A finished thread's vCPU is no one's. */
			if (v->state == VCPU_DONE || v->lx->proc != tp->procs[k])
				continue;
			tp->lx[*n] = v->lx;
			rc = kvm_cpu_save(v->cpu, v->in_syscall, kvm_saved_nth(saved, (size_t)*n));
			(*n)++;
			tp->threads[k]++;
		}
		if (!rc && tp->threads[k] == 0)
			rc = -ESRCH;
	}
	return rc;
}

/* The shared memory section streamed as lx_shm_save reads it: begun at its first
 * record, so that a VM without shared memory has none. */
struct capture_shm_out {
	struct img_writer *img;
	bool begun;
};

static int capture_shm_put(void *ctx, const void *head, size_t head_len, const void *data,
			   size_t len)
{
	struct capture_shm_out *c = ctx;
	int rc = c->begun ? 0 : img_stream_begin(c->img, IMG_SEC_SHM);

	c->begun = true;
	return rc ? rc : img_stream_record(c->img, head, head_len, data, len);
}

/* Every memfd and shared anonymous mapping of the processes, once each (shm.c). */
static int capture_shm(struct vm *vm, struct img_writer *img, const struct tree_procs *tp)
{
	struct capture_shm_out c = { .img = img };
	int rc = lx_shm_save(tp->procs, tp->n, vm->ram.size * IMG_SHM_RAM_TIMES,
			     capture_shm_put, &c);

	if (rc == -E2BIG)
		log_warn("snapshot refused: the processes' shared memory is more than %d times "
			 "--mem, which an image does not hold", IMG_SHM_RAM_TIMES);
	if (!rc && c.begun)
		rc = img_stream_end(img);
	return rc;
}

/* vCPU registers and process state, captured while paused: the first process as an
 * image of one process always held it, the others in the tree sections
 * (persist_tree.c), their memory now or, @later, after the pause (capture_finish). */
static int capture_common(struct vm *vm, struct img_writer *img, bool later)
{
	void *saved = calloc((size_t)vm->n_vcpus, kvm_saved_size());
	struct tree_procs tp = { .lx = calloc((size_t)vm->n_vcpus, sizeof(*tp.lx)) };
	json_t *proc = NULL;
	char *text = NULL;
	bool tree = false;
	int rc = saved && tp.lx ? 0 : -ENOMEM, n = 0;

	if (!rc)
		rc = capture_procs(vm, &tp, &tree);
	if (!rc)
		rc = capture_vcpus(vm, &tp, saved, &n);
	if (!rc)
		rc = img_add_section(img, IMG_SEC_VCPUS, saved, (size_t)n * kvm_saved_size());
	if (!rc)
		rc = persist_cpu_capture(vm, img);
	if (!rc && !(proc = lx_state_save(vm->proc, tp.lx, tp.threads[0])))
		rc = -ENOMEM;
	if (!rc && !(text = json_dumps(proc, JSON_COMPACT)))
		rc = -ENOMEM;
	if (!rc)
		rc = img_add_section(img, IMG_SEC_PROCESS, text, strlen(text));
	/* Shared memory first: its section streams now, in the pause, and the windows'
	 * stays open after it (tree_finish) while held blocks are saved. */
	if (!rc)
		rc = capture_shm(vm, img, &tp);
	if (!rc && tree)
		rc = tree_capture(vm, img, &tp, later);
	if (rc && later)
		tree_finish(vm, NULL); /* no finish follows a failed capture */
	free(text);
	json_decref(proc);
	free(saved);
	free(tp.lx);
	return rc;
}

static int capture_state(void *ctx, struct img_writer *img)
{
	return capture_common(ctx, img, false);
}

int capture_vm_sections(struct vm *vm, struct img_writer *img)
{
	return capture_common(vm, img, false);
}

static int capture_live(void *ctx, struct img_writer *img)
{
	return capture_common(ctx, img, true);
}

static int capture_finish(void *ctx, struct img_writer *img)
{
	return tree_finish(ctx, img);
}

/* A lazily restored VM's memory is still arriving from its image: a snapshot now
 * would save pages that are not there yet. */
static const char *capture_refuse(void *ctx)
{
	struct vm *vm = ctx;

	if (__atomic_load_n(&vm->lazy, __ATOMIC_ACQUIRE))
		return "this VM is still loading its memory from the image it was restored "
		       "from; try again in a moment";
	if (__atomic_load_n(&vm->postcopy, __ATOMIC_ACQUIRE))
		return "this VM's memory is still coming from the source of its migration "
		       "(post-copy); try again in a moment";
	return NULL;
}

/* For the end-to-end exactness tests (CCVM_TEST_REFERENCE set): a raw copy of RAM at
 * the snapshot instant next to the image, which they compare with it byte for byte. */
static void capture_test_reference(void *ctx, const char *file)
{
	struct vm *vm = ctx;
	char path[4200];
	int fd;

	if (!getenv("CCVM_TEST_REFERENCE"))
		return;
	snprintf(path, sizeof(path), "%s.ref", file);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	for (uint64_t off = 0; off < vm->ram.size; off += IMG_CHUNK)
		if (pwrite(fd, vm->ram.host + off, IMG_CHUNK, (off_t)off) != (ssize_t)IMG_CHUNK)
			break;
	close(fd);
}

static const struct snap_ops capture_vm_ops = {
	.pause = capture_pause,
	.resume = capture_resume,
	.capture = capture_state,
	.capture_live = capture_live,
	.finish = capture_finish,
	.refuse = capture_refuse,
	.at_instant = capture_test_reference,
	.guest_cpu_ns = vm_guest_cpu_ns,
};

void capture_vm_target(struct vm *vm, struct snap_target *t)
{
	*t = (struct snap_target){ .mem = &vm->ram, .ops = &capture_vm_ops, .ctx = vm };
}

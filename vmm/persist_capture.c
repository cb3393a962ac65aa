/*
 * persist_capture.c - what a snapshot of a VM holds besides its memory.
 *
 * The snapshot engine (snapshot/engine.c) works on a memory range and a struct snap_ops; this
 * file is the one that knows vCPUs and the Linux personality on the capture side
 * (persist_restore.c is its counterpart). Pausing is vm_pause's: every vCPU parked outside guest
 * code. Capture saves each live thread's vCPU registers (kvm_cpu_save) and the
 * process state (lx_state_save) as image sections while the VM stands still.
 */
#include "persist_capture.h"
#include "../snapshot/image.h"
#include "vcpu.h"
#include "vm.h"
#include "base/log.h"
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

/* vCPU registers and process state, captured while paused. */
static int capture_state(void *ctx, struct img_writer *img)
{
	struct vm *vm = ctx;
	void *saved = calloc((size_t)vm->n_vcpus, kvm_saved_size());
	struct lx_thread **threads = calloc((size_t)vm->n_vcpus, sizeof(*threads));
	json_t *proc;
	char *text;
	int rc = saved && threads ? 0 : -ENOMEM, n = 0;

	/* Every live thread, in vCPU order; a finished thread's vCPU is no one's. */
	for (int i = 0; i < vm->n_vcpus && !rc; i++) {
		if (vm->vcpus[i]->state == VCPU_DONE)
			continue;
		if (vm->vcpus[i]->lx->proc != vm->proc) {
			/* Images hold one process; trees come with issue 33's last step. */
			log_warn("snapshot refused: the guest runs a second process (pid %d); "
				 "ccvm snapshots one process only, for now",
				 vm->vcpus[i]->lx->proc->pid);
			rc = -EBUSY;
			break;
		}
		threads[n] = vm->vcpus[i]->lx;
		rc = kvm_cpu_save(vm->vcpus[i]->cpu, vm->vcpus[i]->in_syscall,
				  kvm_saved_nth(saved, (size_t)n++));
	}
	if (!rc && n == 0)
		rc = -ESRCH;
	if (!rc)
		rc = img_add_section(img, IMG_SEC_VCPUS, saved, (size_t)n * kvm_saved_size());
	proc = rc ? NULL : lx_state_save(vm->proc, threads, n);
	free(saved);
	free(threads);
	if (rc)
		return rc;
	text = json_dumps(proc, JSON_COMPACT);
	json_decref(proc);
	if (!text)
		return -ENOMEM;
	rc = img_add_section(img, IMG_SEC_PROCESS, text, strlen(text));
	free(text);
	return rc;
}

/* A lazily restored VM's memory is still arriving from its image: a snapshot now
 * would save pages that are not there yet. */
static const char *capture_refuse(void *ctx)
{
	struct vm *vm = ctx;

	if (__atomic_load_n(&vm->lazy, __ATOMIC_ACQUIRE))
		return "this VM is still loading its memory from the image it was restored "
		       "from; try again in a moment";
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
	.refuse = capture_refuse,
	.at_instant = capture_test_reference,
};

void capture_vm_target(struct vm *vm, struct snap_target *t)
{
	*t = (struct snap_target){ .mem = &vm->ram, .ops = &capture_vm_ops, .ctx = vm };
}

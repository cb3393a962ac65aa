/*
 * vm.h - a virtual machine: RAM, vCPUs, and their run/pause/stop lifecycle.
 */
#ifndef CCVM_VM_H
#define CCVM_VM_H

#include "stats.h"
#include "../mmu/aspace.h"
#include "../mmu/gmem.h"
#include "linux/lx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define VM_MAX_VCPUS      64 /* most guest threads at once (--vcpus) */
#define VM_DEFAULT_VCPUS  64 /* a process is a thread at least: as many as --max-procs */
#define VM_MEM_TOTAL_TIMES 2 /* --mem-total's default, in RAMs: a fork of all of it */

struct kvm_vm;
struct lx_proc;
struct vcpu;

enum vm_state { VM_RUNNING, VM_PAUSED, VM_STOPPED };

struct vm {
	struct kvm_vm *kvm;    /* the platform's VM (vmm/kvm/), or NULL before it exists */
	struct gmem mem;       /* guest memory: a window per process (docs/processes.md) */
	struct gmem ram;       /* window 0, the first process's RAM: what snapshots, images,
				* the tracker and --mem mean, until trees are snapshotted */
	struct aspace_set spaces; /* the processes' address spaces over mem (mmu/aspace.c) */
	struct aspace *as0;    /* the first process's: window 0, RAM mapped to itself */
	uint64_t mem_total;    /* bytes all processes may hold together (--mem-total) */
	uint32_t tsc_khz;

	pthread_mutex_t lock;  /* guards everything below */
	pthread_cond_t cond;
	struct vcpu *vcpus[VM_MAX_VCPUS];
	int n_vcpus;           /* created; a finished thread's vCPU waits for the next */
	int max_vcpus;         /* the guest's thread cap (--vcpus) */
	int max_procs;         /* its process cap (--max-procs; 0: LX_MAX_PROCS) */
	int n_threads;         /* guest threads alive: the VM ends when the last exits */
	int n_parked;          /* vCPUs that honour a pause request right now */
	bool pause_req;
	int pause_count;       /* nested pauses: vCPUs run again when it drops to 0 */
	bool stop_req;
	int n_spawning;        /* vm_spawn under way: a pause or stop waits for it */
	/* A vCPU whose host thread the main thread is asked to start (vm_spawn's): a
	 * thread inherits its maker's seccomp filter, and the control thread's would not
	 * let a guest thread run. start_rc: how that went. */
	struct vcpu *start_req;
	int start_rc;
	enum vm_state state;
	int exit_status;       /* what ccvm exits with once the VM stops */
	uint64_t cpu_done_ns;  /* atomic: the CPU time of vCPU threads that have finished */

	struct lx_proc *proc;  /* the Linux personality of the guest program */
	struct lx_tree tree;   /* its processes: proc is the first (vm_tree) */
	struct lazy *lazy;     /* memory still being loaded by a lazy restore, or NULL */
	bool postcopy;         /* memory still coming from a post-copy migration's source */
	struct tree_hold *hold; /* a snapshot's hold on the children's memory (persist_tree.c),
				 * from its pause until its image is finished; or NULL */
	struct vm_stats stats;
	/* A process started from outside (vm_spawn) ended with wait status @wstatus:
	 * called on the vCPU thread of its last thread, before the process is freed; set
	 * by whoever starts them (the control socket) before the VM runs. */
	void (*spawn_ended)(void *ctx, int pid, int wstatus);
	void *spawn_ctx;
};

int vm_create(struct vm *vm, uint64_t mem_bytes, uint64_t mem_total);
/* (Re)build the system area of guest RAM: page tables and CPU tables. ccvm's own,
 * never an image's. */
int vm_system_area(struct vm *vm);
/* The first process's view of guest memory: what its personality goes through. */
struct gmem *vm_first_view(struct vm *vm);
void vm_destroy(struct vm *vm);
/* vm->proc, just created or restored, becomes the first of the VM's processes. */
int vm_tree(struct vm *vm);

/* Start every vCPU thread and wait until the VM stops (threads.c). Returns the exit
 * status. */
int vm_run(struct vm *vm);
/* Wait until the VM stopped and its vCPUs are quiet, join the finished threads, and
 * return its exit status: vm_run's second half (threads.c), on the main thread, which
 * meanwhile starts the host threads vm->start_req asks for. */
int vm_wait_stopped(struct vm *vm);

/* The CPU time the guest's vCPU threads took so far (finished ones included), never
 * going back: how busy the guest is, for compaction in idle time (struct snap_ops). */
uint64_t vm_guest_cpu_ns(void *vm);
/* Every vCPU is out of guest code for good, or blocked in a host call that will never
 * matter again (the process exits under it), or with @allow_parked parked; and no
 * process is being started from outside. Caller holds vm->lock. */
bool vm_all_quiet(struct vm *vm, bool allow_parked);

/* True when every vCPU thread has finished (after vm_run returned). */
bool vm_all_done(struct vm *vm);

/* Stop all vCPUs for good; the VM exits with @status. Callable from any thread. */
void vm_stop(struct vm *vm, int status);

/* Pause: returns once no vCPU runs guest code. Resume lets them go on. Pauses nest
 * (a snapshot taken while the user has paused the VM leaves it paused). Called from
 * the control thread, never from a vCPU. */
int vm_pause(struct vm *vm);
int vm_resume(struct vm *vm);
enum vm_state vm_get_state(struct vm *vm);

/* The dirty log of guest RAM for the coverage tracker (manual protect switched on).
 * Returns 0 or -errno. */
struct tracker_log;
int vm_dirty_log(struct vm *vm, struct tracker_log *log);

/* Guest threads (threads.c). vm_thread_create is the personality's thread_create
 * hook: a vCPU (reused, or new up to max_vcpus) starts the thread described by @cl.
 * vm_thread_exit ends the calling vCPU's thread; the last one stops the VM. */
struct lx_clone;
int vm_thread_create(void *parent_vcpu, const struct lx_clone *cl);
void vm_thread_exit(struct vcpu *vcpu);
/* Processes (threads.c): the personality's process_create and process_space hooks;
 * vm_process_exit ends the calling vCPU's process (exit_group, a fatal signal) when it
 * is not the first: its other threads stop, and the last one ends it. The address
 * space a process runs over. */
int vm_process_create(void *parent_vcpu, const struct lx_clone *cl, struct lx_proc *child);
int vm_process_space(void *vcpu, struct lx_proc *p);
int vm_process_fork(void *parent_vcpu, const struct lx_clone *cl, struct lx_proc *child);
int vm_process_reset(void *vcpu, struct lx_proc *p);
void vm_process_exit(struct vcpu *vcpu);
/* The address space process @p runs over: its own, or the first process's. */
static inline struct aspace *vm_space_of(struct vm *vm, const struct lx_proc *p)
{
	return p->vm_space ? p->vm_space : vm->as0;
}
/* A process started in the running VM from outside it (threads.c), as a container
 * runtime's exec asks: program @argv[0] (a path, or a name looked up in @envp's PATH)
 * in the first process's root, with @argv, @envp, working directory @cwd and host
 * descriptors @fds as its 0, 1 and 2 (copied). Waits for a pause under way to end.
 * 0 with *@pid its guest pid; -ESRCH once the VM stops, -EAGAIN past --max-procs or
 * --vcpus, -ENOENT, -EACCES, -ENOEXEC, -ENOTDIR as the program or @cwd warrant. Its
 * end goes to vm->spawn_ended. And a signal for it, as if sent from outside:
 * 0, -ESRCH (no such process), -EPERM (the first process: not one of these). */
struct vm_spawn {
	char *const *argv;
	int argc;
	char *const *envp;
	const char *cwd;
	int fds[3];
};
int vm_spawn(struct vm *vm, const struct vm_spawn *s, int *pid);
int vm_spawn_signal(struct vm *vm, int pid, int sig);
/* Window @win of guest memory as a memory slot of its own, or (@on false) taken away.
 * 0 or -errno. */
int vm_window_slot(struct vm *vm, int win, bool on);
/* The address spaces' window_off callback (mmu/aspace.h): window @win's slot goes. */
void vm_window_off(void *ctx, int win);

/* Host resident set size of the whole monitor process, in bytes. */
uint64_t vm_host_rss(void);

#endif

/*
 * vcpu.h - one virtual CPU: the guest thread it runs, its host thread, its state as
 * pauses see it. Its exit loop is vcpu_loop.c.
 */
#ifndef CCVM_VCPU_H
#define CCVM_VCPU_H

#include "linux/lx.h"
#include "kvm/kvm.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct vm;

enum vcpu_state {
	VCPU_GUEST,   /* running the program, or about to */
	VCPU_MONITOR, /* handling an exit */
	VCPU_BLOCKED, /* inside a blocking host call for the guest (read, nanosleep...) */
	VCPU_PARKED,  /* waiting for a pause to end */
	VCPU_DONE,
};

/* How a vCPU's loop ended (vcpu_loop.c), which its thread then acts on (threads.c): the
 * VM stopped, or the guest thread or its whole process ended. */
enum vcpu_end { VCPU_END_VM, VCPU_END_THREAD, VCPU_END_PROCESS };

struct vcpu {
	struct vm *vm;
	int id;
	struct kvm_cpu *cpu;
	pthread_t thread;
	enum vcpu_state state; /* guarded by vm->lock */
	bool in_syscall;       /* between a syscall exit and its return (for snapshots) */
	bool joinable;         /* its host thread was started and not yet joined */
	bool clocked;          /* atomic: its thread runs, its CPU clock is (vm_guest_cpu_ns) */
	clockid_t clock;
	struct lx_thread *lx;  /* the guest thread this vCPU runs (&thread_state) */
	uint64_t cr3;          /* the page tables its next run uses (its process's) */
	/* For vm_flush, which other threads read without a lock: in the guest or about to
	 * enter its run, the window of the space its tables are from, runs finished. */
	bool in_run;
	int win;
	uint64_t runs;
	int cow_retries;       /* write faults in a row on a page writable already, */
	uint64_t cow_page;     /* that page (vcpu_loop.c) */
	bool quit;             /* its process ended (exit_group in another thread): stop */
	enum vcpu_end ends;    /* how its run ended, for its thread (threads.c) */
	struct lx_thread thread_state;
};

/* A vCPU of VM @vm (whose platform VM is @k), not yet running a thread. */
int vcpu_create(struct vm *vm, struct kvm_vm *k, int id, const struct cpu_entry *entry,
		struct vcpu **out);
void vcpu_destroy(struct vcpu *vcpu);

/* Kick a vCPU out of its run (from another thread). */
void vcpu_kick(struct vcpu *vcpu);

/* The vCPU thread's own signal setup: the kicks (whose handlers vcpu_create installed)
 * unblocked, so they interrupt its run and, for a guest signal, the host call it
 * blocks in. */
void vcpu_thread_signals(void);

/* The personality's signal hooks (lx.h) for a vCPU: a kick out of its run or a host
 * call for a signal, and its FPU state in XSAVE form for a signal frame. */
void vcpu_signal_kick(void *vcpu);
int vcpu_fpu_save(void *vcpu, void *buf, size_t cap, uint64_t *xfeatures);
int vcpu_fpu_load(void *vcpu, const void *buf, size_t len);

#endif

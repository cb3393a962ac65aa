/*
 * vcpu.c - a vCPU's life outside its exit loop: creation, kicks, signal hooks.
 *
 * A kick sets the platform's immediate exit, then signals the thread, so a kick that
 * lands just before an entry is not lost. Two signals: the pause and stop kick, whose
 * interrupted host calls restart, and the guest-signal kick, which ends a host call
 * the thread blocks in with EINTR, as a signal ends a Linux system call.
 */
#include "vcpu.h"
#include "../mmu/layout.h"
#include "kvm/kvm.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

/* Not SIGUSR1: the signals ccvm receives go to the guest (sigfwd.c). */
#define VCPU_KICK_SIGNAL (SIGRTMIN + 1)
/* A guest signal for the thread: ends the host call it blocks in with EINTR (so no
 * SA_RESTART) or its run. Apart from the pause kick, whose host calls restart. */
#define VCPU_SIGNAL_KICK (SIGRTMIN + 2)

static pthread_once_t vcpu_handlers_once = PTHREAD_ONCE_INIT;

static void vcpu_kick_handler(int sig)
{
	(void)sig; /* only there to interrupt the run (and, for signals, host calls) */
}

/* The kicks' handlers, for the whole process, before any vCPU thread exists: a kick
 * can come as soon as its thread does (a lazy restore that finds a damaged chunk at
 * once stops the VM), and a real-time signal without a handler ends the process.
 * Once (pthread_once): a guest that starts threads creates vCPUs all its life. */
static void vcpu_install_handlers(void)
{
	struct sigaction sa = { .sa_handler = vcpu_kick_handler, .sa_flags = SA_RESTART };
	struct sigaction sk = { .sa_handler = vcpu_kick_handler }; /* no SA_RESTART */

	sigemptyset(&sa.sa_mask);
	sigaction(VCPU_KICK_SIGNAL, &sa, NULL);
	sigemptyset(&sk.sa_mask);
	sigaction(VCPU_SIGNAL_KICK, &sk, NULL);
}

int vcpu_create(struct vm *vm, struct kvm_vm *k, int id, const struct cpu_entry *entry,
		struct vcpu **out)
{
	struct vcpu *vcpu = calloc(1, sizeof(*vcpu));
	int rc;

	if (!vcpu)
		return -ENOMEM;
	pthread_once(&vcpu_handlers_once, vcpu_install_handlers);
	vcpu->vm = vm;
	vcpu->id = id;
	vcpu->lx = &vcpu->thread_state;
	vcpu->cr3 = entry->cr3 ? entry->cr3 : LAYOUT_PGTABLE;
	rc = kvm_cpu_create(k, id, entry, &vcpu->cpu);
	if (rc) {
		free(vcpu);
		return rc;
	}
	*out = vcpu;
	return 0;
}

void vcpu_destroy(struct vcpu *vcpu)
{
	if (!vcpu)
		return;
	kvm_cpu_destroy(vcpu->cpu);
	free(vcpu);
}

void vcpu_thread_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, VCPU_KICK_SIGNAL);
	sigaddset(&set, VCPU_SIGNAL_KICK);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

void vcpu_signal_kick(void *v)
{
	struct vcpu *vcpu = v;

	if (!vcpu)
		return;
	kvm_cpu_kick(vcpu->cpu);
	pthread_kill(vcpu->thread, VCPU_SIGNAL_KICK);
}

void vcpu_kick(struct vcpu *vcpu)
{
	kvm_cpu_kick(vcpu->cpu);
	pthread_kill(vcpu->thread, VCPU_KICK_SIGNAL);
}

int vcpu_fpu_save(void *v, void *buf, size_t cap, uint64_t *xfeatures)
{
	return kvm_cpu_fpu_save(((struct vcpu *)v)->cpu, buf, cap, xfeatures);
}

int vcpu_fpu_load(void *v, const void *buf, size_t len)
{
	return kvm_cpu_fpu_load(((struct vcpu *)v)->cpu, buf, len);
}

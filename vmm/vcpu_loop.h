/*
 * vcpu_loop.h - a vCPU thread's exit loop, and the states a pause waits on.
 */
#ifndef CCVM_VCPU_LOOP_H
#define CCVM_VCPU_LOOP_H

#include "vcpu.h"

/* Run the guest thread of @vcpu until it, its process or the VM ends, and say which
 * (also in vcpu->ends). The caller, the vCPU's host thread, then ends it (threads.c). */
enum vcpu_end vcpu_loop(struct vcpu *vcpu);

/* Record where the vCPU is (for pauses), and wake whoever waits on it. */
void vcpu_set_state(struct vcpu *vcpu, enum vcpu_state st);

/* Around a host call that may block on behalf of the guest: lets a pause proceed
 * without waiting for it. A call that completes during a pause waits in
 * vcpu_wait_end until the pause is over before its result reaches the registers (a
 * snapshot records it as not yet made). */
void vcpu_wait_begin(struct vcpu *vcpu);
void vcpu_wait_end(struct vcpu *vcpu);

#endif

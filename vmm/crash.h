/*
 * crash.h - the one-screen report printed when a guest program faults.
 */
#ifndef CCVM_CRASH_H
#define CCVM_CRASH_H

#include "kvm/kvm.h"

#include <stdint.h>

struct gmem;

/* What a report is about: the vCPU, its exit and registers, and the guest's memory. */
struct crash_ctx {
	int vcpu_id;
	const char *exe;           /* the guest program, or NULL */
	int child_pid;             /* 0: the first process's crash, which ends the VM; else
				    * the pid of the child process it ends alone */
	const struct gmem *mem;
	const struct cpu_exit *exit;
	const struct cpu_view *view;
};

/* What the CPU pushed on ccvm's CPL0 stack when it entered an exception stub: where the
 * program was (RIP, CS, RFLAGS, RSP, SS) and the error code, if the vector has one. */
struct crash_frame {
	uint64_t error, rip, cs, rflags, rsp, ss;
	int has_error;
};

/* Read that frame for exception @vector: 0, or -1 when the stack pointer is not on
 * ccvm's CPL0 stack (the stub was reached some other way). */
int crash_read_frame(const struct crash_ctx *c, int vector, struct crash_frame *f);

/* Report exception @vector raised at CPL3; returns the exit status a shell would show
 * for the matching signal (128 + SIGSEGV, SIGILL, SIGFPE, ...). */
int crash_report_exception(const struct crash_ctx *c, int vector);

/* Report an exit the guest cannot continue from (@what says which). */
int crash_report_exit(const struct crash_ctx *c, const char *what);

#endif

/*
 * crash.h - the one-screen report printed when a guest program faults.
 */
#ifndef CCVM_CRASH_H
#define CCVM_CRASH_H

struct vcpu;

/* Report exception @vector raised at CPL3; returns the exit status a shell would show
 * for the matching signal (128 + SIGSEGV, SIGILL, SIGFPE, ...). */
int crash_report_exception(struct vcpu *vcpu, int vector);

/* Report an exit the guest cannot continue from (@what says which). */
int crash_report_exit(struct vcpu *vcpu, const char *what);

#endif

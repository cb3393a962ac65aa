/*
 * role.h - what each thread of the monitor is for. A thread says so when it starts;
 * confinement (confine.c) narrows its seccomp filter to what that role calls.
 */
#ifndef CCVM_ROLE_H
#define CCVM_ROLE_H

enum role {
	ROLE_VCPU,     /* runs a guest thread and makes its system calls (vcpu_loop.c) */
	ROLE_CONTROL,  /* the control socket, and starting snapshots (control.c) */
	ROLE_SNAPSHOT, /* writing a snapshot: writer, compressors, copy-on-write faults */
	ROLE_TIMER,    /* the guest's POSIX timers (linux/timer.c) */
	ROLE_HELPER,   /* signals from outside, the fastio flusher, the coverage tracker,
			* loading a restored image's memory */
	ROLE_COUNT
};

/* Name the calling thread ("ccvm-vcpu", ...) and, once the monitor is confined, stack
 * its role's seccomp filter on it. Called first thing by every thread ccvm starts. */
void role_enter(enum role r);

/* What role_enter calls for confinement (confine_seccomp.c installs it). Returns 0 or -errno;
 * role_enter reports a failure and the thread runs on under the process's filter. */
void role_set_hook(int (*hook)(enum role r));

/* "vcpu", "control", ... */
const char *role_name(enum role r);

/* The calling thread's role name, "main" for the main thread; async-signal-safe. */
const char *role_current_name(void);

#endif

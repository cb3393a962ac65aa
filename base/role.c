/*
 * role.c - what each thread of the monitor is for.
 *
 * Each thread ccvm starts names its role first thing (role_enter). The name shows in
 * ps -L, top and the kernel's log, and once the monitor is confined the role's own
 * seccomp filter is stacked on the thread: a vCPU may make the guest's file and
 * socket calls, the timer thread only waits and signals, a snapshot writer only
 * writes. The snapshot core and the memory layer start threads without knowing about
 * confinement: they call role_enter, and the VMM installs the hook. Part of the base
 * layer, like log.c, for that reason.
 */
#include "role.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char *const role_names[ROLE_COUNT] = {
	[ROLE_VCPU] = "vcpu", [ROLE_CONTROL] = "control", [ROLE_SNAPSHOT] = "snapshot",
	[ROLE_TIMER] = "timer", [ROLE_HELPER] = "helper",
};

/* The calling thread's role, for a message from a signal handler; -1: the main thread. */
static __thread int role_current = -1;

/* Set once, before the first thread that calls role_enter starts. */
static int (*role_hook)(enum role r);

const char *role_name(enum role r)
{
	return r >= 0 && r < ROLE_COUNT ? role_names[r] : "?";
}

const char *role_current_name(void)
{
	return role_current < 0 ? "main" : role_names[role_current];
}

void role_set_hook(int (*hook)(enum role r))
{
	role_hook = hook;
}

void role_enter(enum role r)
{
	char name[16];
	int rc;

	role_current = (int)r;
	snprintf(name, sizeof(name), "ccvm-%s", role_name(r));
	pthread_setname_np(pthread_self(), name);
	if (!role_hook)
		return;
	rc = role_hook(r);
	if (rc)
		log_warn("the %s thread runs under the process's seccomp filter only, not its "
			 "own: %s", role_name(r), strerror(-rc));
}

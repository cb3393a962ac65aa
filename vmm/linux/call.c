/*
 * call.c - what every system-call handler does with its call and nothing else: copy a
 * path or a timespec in, bracket a host call that may wait (so that pauses, signals
 * and snapshots treat the waiting vCPU as they must), and say once that a call is not
 * offered (call.h).
 *
 * The bottom of the personality: it uses nothing of the objects or the handlers, and
 * every one of them may use it.
 */
#include "call.h"
#include "../../base/log.h"
#include "syscall_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL

int lx_upath(struct lx_call *c, uint64_t gva, char path[PATH_MAX])
{
	return gmem_copy_str(c->p->mem, path, gva, PATH_MAX, NULL);
}

void lx_wait_begin(struct lx_call *c)
{
	/* A sender kicks a thread in here out of its host call (signal.c). */
	__atomic_store_n(&c->t->in_wait, true, __ATOMIC_SEQ_CST);
	gmem_wait_begin(c->p->mem, &c->span); /* its ranges may be written until it returns */
	if (c->p->hooks && c->p->hooks->wait_begin)
		c->p->hooks->wait_begin(c->t->vcpu);
}

void lx_wait_end(struct lx_call *c)
{
	if (c->p->hooks && c->p->hooks->wait_end)
		c->p->hooks->wait_end(c->t->vcpu);
	gmem_wait_end(c->p->mem, &c->span);
	__atomic_store_n(&c->t->in_wait, false, __ATOMIC_SEQ_CST);
}

const char *lx_syscall_name(unsigned nr)
{
	static char unnamed[LX_NR_SYSCALLS][16];

	if (nr < sizeof(lx_syscall_names) / sizeof(lx_syscall_names[0]) && lx_syscall_names[nr])
		return lx_syscall_names[nr];
	if (nr >= LX_NR_SYSCALLS)
		return "out_of_range";
	if (!unnamed[nr][0])
		snprintf(unnamed[nr], sizeof(unnamed[nr]), "syscall_%u", nr);
	return unnamed[nr];
}

bool lx_first_time(struct lx_call *c)
{
	unsigned nr = c->nr < LX_NR_SYSCALLS ? (unsigned)c->nr : LX_NR_SYSCALLS - 1;

	return !__atomic_exchange_n(&c->p->sys_unknown_logged[nr], 1, __ATOMIC_RELAXED);
}

int64_t lx_unsupported(struct lx_call *c)
{
	if (lx_first_time(c))
		log_warn("guest called unsupported system call %s (%llu); returning ENOSYS",
			 lx_syscall_name((unsigned)c->nr), (unsigned long long)c->nr);
	return -ENOSYS;
}

int lx_read_timespec(struct lx_call *c, uint64_t uts, int64_t *ns)
{
	struct timespec ts;

	if (lx_copy_in(c, &ts, uts, sizeof(ts)))
		return -EFAULT;
	if (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= NSEC_PER_SEC)
		return -EINVAL;
	if (ts.tv_sec > INT64_MAX / NSEC_PER_SEC - 1)
		*ns = INT64_MAX / 2;
	else
		*ns = (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
	return 0;
}

/*
 * call.h - one system call as its handler sees it: the call's context, its guest
 * pointers, paths and copies, and the brackets around a host call that may wait. The
 * bottom of the personality's handlers (call.c): it uses nothing of theirs.
 */
#ifndef CCVM_LX_CALL_H
#define CCVM_LX_CALL_H

#include "lx.h"

#include <errno.h>
#include <limits.h>

#define LX_CALL_HOLDS 4 /* host descriptors a call holds without allocating */

struct lx_call {
	struct lx_thread *t;
	struct lx_proc *p;
	uint64_t nr;
	uint64_t a[6];
	struct cpu_regs *regs;
	struct cpu_segs *segs;
	bool segs_dirty;
	enum lx_action action;
	/* Host descriptors this call resolved (lx_host_fd): held open until it returns,
	 * whatever another guest thread closes meanwhile. */
	int held_inline[LX_CALL_HOLDS];
	int *held;
	int n_held, cap_held;
	struct gmem_span span;   /* guest ranges it took pointers to (lx_uptr) */
};

/* A host call's result as a system-call return value: -errno on failure. */
static inline int64_t host_ret(long r)
{
	return r < 0 ? -errno : r;
}

/* Guest pointers for the bulk paths named in mmu/gmem.h (payloads the host kernel
 * moves, results it writes): never for a value the monitor decides on. */
static inline void *lx_uptr(struct lx_call *c, uint64_t gva, uint64_t len)
{
	void *p = gmem_user_ptr(c->p->mem, gva, len);

	if (p)
		gmem_span_add(c->p->mem, &c->span, gva, len);
	return p;
}

/* Guest structures and lengths are read once into monitor memory, results written
 * back once: 0 or -EFAULT. */
static inline int lx_copy_in(struct lx_call *c, void *dst, uint64_t gva, uint64_t len)
{
	return gmem_copy_in(c->p->mem, dst, gva, len);
}

static inline int lx_copy_out(struct lx_call *c, uint64_t gva, const void *src, uint64_t len)
{
	return gmem_copy_out(c->p->mem, gva, src, len);
}

/* A guest path argument copied into @path: -EFAULT when it does not end inside user
 * RAM, -ENAMETOOLONG when longer than PATH_MAX. */
int lx_upath(struct lx_call *c, uint64_t gva, char path[PATH_MAX]);

/* Around a host call that may wait (a read on an empty pipe, a futex, a poll): while
 * it waits, a pause need not wait for it, a signal's sender kicks it out of it, and a
 * snapshot takes the guest ranges it holds (its span) as written whenever it returns. */
void lx_wait_begin(struct lx_call *c);
void lx_wait_end(struct lx_call *c);

/* True the first time this system call asks for it: its log line is said once. */
bool lx_first_time(struct lx_call *c);
/* A call the personality does not offer: -ENOSYS, logged once by name. */
int64_t lx_unsupported(struct lx_call *c);
/* A guest struct timespec as nanoseconds: -EFAULT, -EINVAL when out of range. */
int lx_read_timespec(struct lx_call *c, uint64_t uts, int64_t *ns);

#endif

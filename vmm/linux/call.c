/*
 * call.c - what every system-call handler does with its call and nothing else: copy a
 * path argument in, and bracket a host call that may wait, so that pauses, signals and
 * snapshots treat the waiting vCPU as they must (call.h).
 */
#include "call.h"

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

/*
 * fdstate.h - descriptors in snapshots (fdstate.c): saved, checked and restored.
 */
#ifndef CCVM_LX_FDSTATE_H
#define CCVM_LX_FDSTATE_H

#include "lx.h"

/* Descriptors in snapshots (fdstate.c); the caller holds p->lock to save. Restore
 * fails (-EADDRNOTAVAIL, message in @err) only when a listening socket cannot listen
 * again; other descriptors that cannot come back stay closed, with a log line. */
struct json_t;
struct json_t *lx_fdstate_save(struct lx_proc *p);
/* JSON numbers of the saved state (state.c): a u64 in, a member's u64 out (0 if absent). */
struct json_t *lx_j_u64(uint64_t v);
uint64_t lx_ju(struct json_t *o, const char *key);
int lx_fdstate_restore(struct lx_proc *p, struct json_t *fds, struct json_t *pipes,
		       struct json_t *shm, char *err, size_t errlen);
/* Refuse saved descriptors ccvm could not have given a guest (a raw socket...):
 * -EINVAL with the field in @err. */
int lx_fdstate_check(struct json_t *fds, char *err, size_t errlen);

#endif

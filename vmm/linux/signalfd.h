/*
 * signalfd.h - signalfds (signalfd.c): signals read as data.
 */
#ifndef CCVM_LX_SIGNALFD_H
#define CCVM_LX_SIGNALFD_H

#include "call.h"

/* signalfd and signalfd4's work: @fd -1 for a new one, else the one whose mask
 * changes. */
int64_t lx_signalfd(struct lx_call *c, int64_t fd, uint64_t umask, uint64_t size,
		    uint64_t flags);
/* Fork's copy of host descriptor @host of @parent, for @child (lx_fd_fork's dup): a
 * duplicate, or for a signalfd one of its own, on @child's signals; 0 with *@out the
 * new host end, or -errno (@parent's lock held). */
int lx_sigfd_fork_dup(struct lx_proc *parent, int host, struct lx_proc *child, int *out);

/* Signalfds (signalfd.c). lx_sigfd_sync: after any change to the pending signals,
 * each signalfd's readiness as its mask says (p->lock held). lx_sigfd_is: is host
 * descriptor @host a signalfd (its reads go to lx_sigfd_read, which takes signals
 * into @iov as struct signalfd_siginfo). lx_sigfd_mask: the mask of signalfd @host
 * and its pipe's inode (which its duplicates share), -EINVAL if it is none (p->lock
 * held).
 * lx_sigfd_create: a new one, *@host the guest's end; 0 or -errno. */
void lx_sigfd_sync(struct lx_proc *p);
bool lx_sigfd_is(struct lx_proc *p, int host);
bool lx_sigfd_is_locked(struct lx_proc *p, int host); /* p->lock held */
int64_t lx_sigfd_read(struct lx_call *c, int host, const struct iovec *iov, int cnt);
int lx_sigfd_mask(struct lx_proc *p, int host, uint64_t *mask, uint64_t *ino);
int lx_sigfd_create(struct lx_proc *p, uint64_t mask, int flags, int *host);
void lx_sigfd_fini(struct lx_proc *p);

#endif

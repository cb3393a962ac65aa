/*
 * fastio.h - the exitless socket path of a process (fastio.c; the guest's side and
 * the shared ring's layout: guest/fastio/fastio_abi.h). Every function is a no-op for
 * a process without it.
 */
#ifndef CCVM_LX_FASTIO_H
#define CCVM_LX_FASTIO_H

#include "call.h"

struct iovec;
uint64_t lx_fastio_area_size(void);
int lx_fastio_init(struct lx_proc *p, uint64_t gva, bool fresh);
void lx_fastio_fini(struct lx_proc *p);
int lx_fastio_open_lib(int *host_fd);
void lx_fastio_accepted(struct lx_proc *p, int fd, int host); /* p->lock held */
void lx_fastio_forget(struct lx_proc *p, int fd);              /* p->lock held */
void lx_fastio_flush(struct lx_proc *p);
void lx_fastio_prefetch(struct lx_proc *p);
int lx_fastio_before_write(struct lx_call *c, int fd, bool wait);
int64_t lx_fastio_take(struct lx_proc *p, int fd, const struct iovec *iov, int cnt, bool peek);
bool lx_fastio_readable(struct lx_proc *p, int fd);

#endif

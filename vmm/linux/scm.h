/*
 * scm.h - control messages of the guest's sockets (scm.c): descriptors passed both ways.
 */
#ifndef CCVM_LX_SCM_H
#define CCVM_LX_SCM_H

#include "call.h"

/* Control messages (scm.c). lx_scm_out: the guest's control data of header @g copied
 * into @buf (room for LX_CMSG_MAX), SCM_RIGHTS descriptors made host ones; *@len its
 * length (0: none); 0 or -errno. lx_scm_in: the control data host header @m received
 * to the guest (@ucontrol, its length at @ulen_at), descriptors installed
 * (@cloexec: MSG_CMSG_CLOEXEC), MSG_CTRUNC into *@flags when the table was full. */
#define LX_CMSG_MAX 4096
struct msghdr;
int lx_scm_out(struct lx_call *c, const struct msghdr *g, uint8_t *buf, size_t *len);
int lx_scm_in(struct lx_call *c, struct msghdr *m, uint64_t ucontrol, uint64_t ulen_at,
	      bool cloexec, int *flags);

#endif

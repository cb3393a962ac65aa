/*
 * sockaddr.h - the guest's socket addresses, read once, checked and translated
 * (sockaddr.c): what the socket calls (sys_net.c) use of them.
 */
#ifndef CCVM_LX_SOCKADDR_H
#define CCVM_LX_SOCKADDR_H

#include "call.h"

#include <sys/socket.h>

/* A guest sockaddr of @len bytes at @ua, copied into @sa: 0, -EINVAL, -EFAULT. */
int lx_read_addr(struct lx_call *c, uint64_t ua, uint64_t len, struct sockaddr_storage *sa);
/* An AF_UNIX address in @sa rewritten to a host path under /proc/self/fd whose
 * descriptor stays open in *@dirfd: the parent directory to bind (@create), else the
 * socket file itself, both resolved in the guest's root. 0 or -errno. */
int lx_unix_path(struct lx_call *c, struct sockaddr_storage *sa, socklen_t *len,
		 bool create, int *dirfd);
/* A Unix socket file a guest of this monitor bound: its own, never probed. */
void lx_own_socket_add(const char *path);
/* A host address back to the guest's view (a published host port reads as its guest
 * port): at most @room bytes at @ua, the full length at @ulen; lx_write_addr when the
 * room is the socklen_t at @ulen. 0 or -errno. */
int lx_put_addr(struct lx_call *c, struct sockaddr_storage *sa, socklen_t len,
		uint64_t ua, socklen_t room, uint64_t ulen);
int lx_write_addr(struct lx_call *c, struct sockaddr_storage *sa, socklen_t len,
		  uint64_t ua, uint64_t ulen);
/* A destination the guest names (@ulen bytes at @ua), read and checked: loopback or
 * (--net host) anywhere; a Unix path confined like a file (*@dirfd open, or -1). */
int lx_read_dest(struct lx_call *c, uint64_t ua, uint64_t ulen, struct sockaddr_storage *sa,
		 socklen_t *len, int *dirfd);
/* Before a connect to Unix socket @sa on host socket @host: 0 when its listener is not
 * another ccvm's (@allowed: named by --allow-unix), else -ECONNREFUSED. */
int lx_unix_peer_ok(struct lx_call *c, int host, const struct sockaddr_storage *sa,
		    socklen_t len, bool allowed);

#endif

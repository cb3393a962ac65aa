/*
 * sys_net.c - sockets: guest sockets are host sockets owned by ccvm.
 *
 * A guest socket is a host socket in the guest's descriptor table, so reads, writes,
 * poll and epoll work on it like on any descriptor. What the guest may do with it is
 * net.c's policy: families AF_INET, AF_INET6 and AF_UNIX (paths resolved in the
 * guest's root like files, created only under --rw directories, no abstract names);
 * binds and listens only on published ports, which land on their host address;
 * outgoing connections to loopback only unless --net host; TCP, UDP and Unix sockets
 * only (net.c, lx_net_socket_ok). Addresses
 * are read, checked and translated both ways by sockaddr.c, so the guest sees its own
 * port numbers. Control messages
 * (sendmsg/recvmsg) pass descriptors (scm.c). Blocking calls block only the calling
 * vCPU.
 */
#include "sys.h"
#include "sockaddr.h"
#include "../../base/log.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LX_SOCK_TYPE_MASK 0xf
#define LX_SOCKOPT_MAX    256   /* the largest option value passed through */
#define LX_IOV_MAX        1024
#define LX_SOCK_FILE_MODE 0777  /* a Unix socket file's mode before the umask */

int64_t sys_socket(struct lx_call *c)
{
	int domain = (int)c->a[0], type = (int)c->a[1], host;

	if (domain != AF_INET && domain != AF_INET6 && domain != AF_UNIX)
		return -EAFNOSUPPORT;
	if (type & ~(LX_SOCK_TYPE_MASK | SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	/* Raw and packet sockets would see and forge any traffic of the host. */
	if (!lx_net_socket_ok(domain, type & LX_SOCK_TYPE_MASK, (int)c->a[2])) {
		if (lx_first_time(c))
			log_warn("guest socket(%d, %d, %d) refused: only TCP, UDP and Unix sockets",
				 domain, type & LX_SOCK_TYPE_MASK, (int)c->a[2]);
		return (type & LX_SOCK_TYPE_MASK) == SOCK_RAW ? -EPERM : -EPROTONOSUPPORT;
	}
	host = socket(domain, type | SOCK_CLOEXEC, (int)c->a[2]);
	if (host < 0)
		return -errno;
	return lx_install(c, host, 0, type & SOCK_CLOEXEC);
}

int64_t sys_socketpair(struct lx_call *c)
{
	int type = (int)c->a[1], host[2];
	int *fds = lx_uptr(c, c->a[3], 2 * sizeof(int));

	if ((int)c->a[0] != AF_UNIX)
		return -EAFNOSUPPORT;
	if (type & ~(LX_SOCK_TYPE_MASK | SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	if (!lx_net_socket_ok(AF_UNIX, type & LX_SOCK_TYPE_MASK, (int)c->a[2]))
		return -EPROTONOSUPPORT;
	if (!fds)
		return -EFAULT;
	if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, (int)c->a[2], host) < 0)
		return -errno;
	return lx_install_pair(c, host, type & SOCK_CLOEXEC, fds);
}

int64_t sys_bind(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]);
	struct sockaddr_storage sa;
	socklen_t len = (socklen_t)c->a[2];
	const struct lx_publish *rule;
	int rc, dirfd = -1;
	uint16_t port;

	if (host < 0)
		return host;
	rc = lx_read_addr(c, c->a[1], c->a[2], &sa);
	if (rc)
		return rc;
	if (sa.ss_family == AF_UNIX) {
		rc = lx_unix_path(c, &sa, &len, true, &dirfd);
		/* The monitor's umask is 0 while the guest runs (path.c): the guest's own
		 * goes on the socket's inode, whose mode bind gives the file, as Linux does
		 * for a process with that umask. Never a moment at 0777. */
		if (!rc && fchmod((int)host, LX_SOCK_FILE_MODE & ~lx_fs_umask(&c->p->fs)) < 0)
			rc = -errno;
		if (!rc)
			rc = (int)host_ret(bind((int)host, (struct sockaddr *)&sa, len));
		if (!rc)
			lx_own_socket_add(((struct sockaddr_un *)&sa)->sun_path);
		if (dirfd >= 0)
			close(dirfd);
		return rc;
	}
	if (sa.ss_family != AF_INET && sa.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	port = lx_net_port((struct sockaddr *)&sa);
	/* an ephemeral port, for an outgoing connection; or any, in a namespace of the
	 * guest's own */
	if (port == 0 || c->p->net.own_ns)
		return host_ret(bind((int)host, (struct sockaddr *)&sa, len));
	rule = lx_net_rule_for_guest(&c->p->net, port);
	if (!rule) {
		log_warn("guest bind to port %u refused: not published (--publish HOSTPORT:%u)",
			 port, port);
		return -EACCES;
	}
	if (rule->host_addr.ss_family != sa.ss_family) {
		log_warn("guest bind to port %u refused: it is published on an address of the "
			 "other family", port);
		return -EAFNOSUPPORT;
	}
	return host_ret(bind((int)host, (const struct sockaddr *)&rule->host_addr, rule->host_len));
}

/* Only a published port may listen: Linux would give an unbound socket (or one bound
 * to port 0) an ephemeral port on every address. */
int64_t sys_listen(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]);
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	uint16_t port;

	if (host < 0)
		return host;
	if (getsockname((int)host, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	if ((sa.ss_family == AF_INET || sa.ss_family == AF_INET6) && !c->p->net.own_ns) {
		port = lx_net_port((struct sockaddr *)&sa);
		if (!port || !lx_net_rule_for_host(&c->p->net, port)) {
			log_warn("guest listen refused: the socket is not bound to a published port");
			return -EACCES;
		}
	}
	return host_ret(listen((int)host, (int)c->a[1]));
}

static int64_t lx_accept(struct lx_call *c, uint64_t fd, uint64_t ua, uint64_t ulen, int flags)
{
	int64_t host = lx_host_fd(c, fd);
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int got, rc;

	if (host < 0)
		return host;
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	lx_wait_begin(c);
	do {
		got = accept4((int)host, (struct sockaddr *)&sa, &len,
			      (flags & SOCK_NONBLOCK) | SOCK_CLOEXEC);
		rc = got < 0 ? -errno : 0;
	} while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	if (got < 0)
		return rc;
	rc = lx_write_addr(c, &sa, len, ua, ulen);
	if (rc) {
		close(got);
		return rc;
	}
	pthread_mutex_lock(&c->p->lock);
	rc = lx_fd_install(c->p, got, 0, flags & SOCK_CLOEXEC);
	/* A TCP connection a server accepted may take the exitless path (fastio.c). */
	if (rc >= 0 && (sa.ss_family == AF_INET || sa.ss_family == AF_INET6))
		lx_fastio_accepted(c->p, rc, got);
	pthread_mutex_unlock(&c->p->lock);
	if (rc < 0)
		close(got);
	return rc;
}

int64_t sys_accept(struct lx_call *c)
{
	return lx_accept(c, c->a[0], c->a[1], c->a[2], 0);
}

int64_t sys_accept4(struct lx_call *c)
{
	return lx_accept(c, c->a[0], c->a[1], c->a[2], (int)c->a[3]);
}

int64_t sys_connect(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]), rc;
	struct sockaddr_storage sa;
	socklen_t len;
	int dirfd;

	if (host < 0)
		return host;
	rc = lx_read_dest(c, c->a[1], c->a[2], &sa, &len, &dirfd);
	if (!rc && sa.ss_family == AF_UNIX)
		rc = lx_unix_peer_ok(c, (int)host, &sa, len, lx_fs_is_one_of(dirfd,
					     c->p->net.allow_unix, c->p->net.n_allow_unix));
	if (rc) {
		if (dirfd >= 0)
			close(dirfd);
		return rc;
	}
	lx_wait_begin(c);
	do
		rc = host_ret(connect((int)host, (struct sockaddr *)&sa, len));
	while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

int64_t sys_shutdown(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]);

	if (host < 0)
		return host;
	/* Bytes the socket still owes from the exitless path go before its FIN; an error
	 * they met is the next send's or recv's to report, not shutdown's. */
	if ((int)c->a[1] != SHUT_RD)
		(void)lx_fastio_before_write(c, (int)c->a[0], true);
	return host_ret(shutdown((int)host, (int)c->a[1]));
}

static int64_t lx_sockname(struct lx_call *c, bool peer)
{
	int64_t host = lx_host_fd(c, c->a[0]);
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int rc;

	if (host < 0)
		return host;
	rc = peer ? getpeername((int)host, (struct sockaddr *)&sa, &len) :
		    getsockname((int)host, (struct sockaddr *)&sa, &len);
	if (rc < 0)
		return -errno;
	if (!c->a[1])
		return -EFAULT;
	return lx_write_addr(c, &sa, len, c->a[1], c->a[2]);
}

int64_t sys_getsockname(struct lx_call *c)
{
	return lx_sockname(c, false);
}

int64_t sys_getpeername(struct lx_call *c)
{
	return lx_sockname(c, true);
}

/* Option values pass through (bounded); SO_BINDTODEVICE would escape the policy. */
int64_t sys_setsockopt(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]);
	int level = (int)c->a[1], name = (int)c->a[2];
	uint64_t len = c->a[4];
	uint8_t val[LX_SOCKOPT_MAX];

	if (host < 0)
		return host;
	if (level == SOL_SOCKET && name == SO_BINDTODEVICE)
		return -EPERM;
	if (len > LX_SOCKOPT_MAX)
		return -EINVAL;
	if (len && lx_copy_in(c, val, c->a[3], len))
		return -EFAULT;
	return host_ret(setsockopt((int)host, level, name, len ? val : NULL, (socklen_t)len));
}

int64_t sys_getsockopt(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]);
	uint8_t val[LX_SOCKOPT_MAX];
	socklen_t len;

	if (host < 0)
		return host;
	if (lx_copy_in(c, &len, c->a[4], sizeof(len)))
		return -EFAULT;
	if ((int)len < 0)
		return -EINVAL;
	if (len > LX_SOCKOPT_MAX)
		len = LX_SOCKOPT_MAX;
	if (getsockopt((int)host, (int)c->a[1], (int)c->a[2], val, &len) < 0)
		return -errno;
	if (len && lx_copy_out(c, c->a[3], val, len))
		return -EFAULT;
	return lx_copy_out(c, c->a[4], &len, sizeof(len));
}

int64_t sys_sendto(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]), rc;
	struct sockaddr_storage sa;
	socklen_t len = 0;
	const void *buf = c->a[2] ? lx_uptr(c, c->a[1], c->a[2]) : NULL;
	int dirfd = -1;

	if (host < 0)
		return host;
	if (c->a[2] && !buf)
		return -EFAULT;
	rc = lx_fastio_before_write(c, (int)c->a[0], false);
	if (!rc && c->a[4])
		rc = lx_read_dest(c, c->a[4], c->a[5], &sa, &len, &dirfd);
	if (rc)
		return rc;
	lx_wait_begin(c);
	do
		rc = host_ret(sendto((int)host, buf, c->a[2], (int)c->a[3] | MSG_NOSIGNAL,
				     c->a[4] ? (struct sockaddr *)&sa : NULL, c->a[4] ? len : 0));
	while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

int64_t sys_recvfrom(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]), rc;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	void *buf = c->a[2] ? lx_uptr(c, c->a[1], c->a[2]) : NULL;
	int err;

	if (host < 0)
		return host;
	if (c->a[2] && !buf)
		return -EFAULT;
	rc = lx_fastio_take(c->p, (int)c->a[0], &(struct iovec){ .iov_base = buf, .iov_len = c->a[2] },
			    1, c->a[3] & MSG_PEEK);
	if (rc > 0 && (c->a[3] & MSG_WAITALL) && !(c->a[3] & MSG_PEEK) && (uint64_t)rc < c->a[2]) {
		/* The rest of what MSG_WAITALL waits for comes from the host socket. */
		int64_t more;

		lx_wait_begin(c);
		do
			more = host_ret(recv((int)host, (uint8_t *)buf + rc, c->a[2] - (uint64_t)rc,
					     (int)c->a[3]));
		while (more == -EINTR && !lx_sig_eintr(c, LX_ERESTARTSYS)); /* keeps what came */
		lx_wait_end(c);
		rc += more > 0 ? more : 0;
	}
	if (rc) {
		len = 0; /* read ahead from a TCP connection: no address, as Linux gives */
	} else {
		lx_wait_begin(c);
		do
			rc = host_ret(recvfrom((int)host, buf, c->a[2], (int)c->a[3],
					       (struct sockaddr *)&sa, &len));
		while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
		lx_wait_end(c);
	}
	if (rc >= 0 && c->a[4]) {
		err = lx_write_addr(c, &sa, len, c->a[4], c->a[5]);
		if (err)
			return err;
	}
	return rc;
}

/*
 * The guest's msghdr, copied once into @g, with every pointer checked: its iovecs
 * (copied once) become host iovecs into guest memory in @iov (room for LX_IOV_MAX);
 * its name gets @sa. Control data is the caller's (scm.c). Everything after this uses
 * the copies: another guest thread may rewrite the header meanwhile.
 */
static int lx_msghdr(struct lx_call *c, uint64_t umsg, struct msghdr *g, struct msghdr *m,
		     struct iovec *iov, struct sockaddr_storage *sa)
{
	if (lx_copy_in(c, g, umsg, sizeof(*g)))
		return -EFAULT;
	if (g->msg_iovlen > LX_IOV_MAX)
		return -EMSGSIZE;
	if (g->msg_iovlen &&
	    lx_copy_in(c, iov, (uint64_t)(uintptr_t)g->msg_iov, g->msg_iovlen * sizeof(*iov)))
		return -EFAULT;
	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < g->msg_iovlen; i++) {
		uint64_t base = (uint64_t)(uintptr_t)iov[i].iov_base;

		iov[i].iov_base = iov[i].iov_len ? lx_uptr(c, base, iov[i].iov_len) : NULL;
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EFAULT;
	}
	m->msg_iov = iov;
	m->msg_iovlen = g->msg_iovlen;
	if (g->msg_name) {
		if (g->msg_namelen > sizeof(*sa))
			return -EINVAL;
		memset(sa, 0, sizeof(*sa));
		m->msg_name = sa;
		m->msg_namelen = g->msg_namelen;
	}
	return 0;
}

int64_t sys_sendmsg(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]), rc;
	static __thread struct iovec iov[LX_IOV_MAX];
	struct sockaddr_storage sa;
	struct msghdr m, g;
	int dirfd = -1;

	if (host < 0)
		return host;
	static __thread uint8_t control[LX_CMSG_MAX];
	size_t clen = 0;

	rc = lx_msghdr(c, c->a[1], &g, &m, iov, &sa);
	if (!rc)
		rc = lx_scm_out(c, &g, control, &clen);
	if (!rc && clen) {
		m.msg_control = control;
		m.msg_controllen = clen;
	}
	if (!rc)
		rc = lx_fastio_before_write(c, (int)c->a[0], false);
	if (!rc && m.msg_name)
		rc = lx_read_dest(c, (uint64_t)(uintptr_t)g.msg_name, g.msg_namelen, &sa,
				  &m.msg_namelen, &dirfd);
	if (rc)
		return rc;
	lx_wait_begin(c);
	do
		rc = host_ret(sendmsg((int)host, &m, (int)c->a[2] | MSG_NOSIGNAL));
	while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

int64_t sys_recvmsg(struct lx_call *c)
{
	int64_t host = lx_host_fd(c, c->a[0]), rc;
	static __thread struct iovec iov[LX_IOV_MAX];
	static __thread uint8_t control[LX_CMSG_MAX];
	struct sockaddr_storage sa;
	struct msghdr m, g;
	int flags;

	if (host < 0)
		return host;
	rc = lx_msghdr(c, c->a[1], &g, &m, iov, &sa);
	if (rc)
		return rc;
	if (m.msg_name)
		m.msg_namelen = sizeof(sa);
	if (g.msg_controllen) {
		m.msg_control = control;
		m.msg_controllen = g.msg_controllen < sizeof(control) ? g.msg_controllen : sizeof(control);
	}
	rc = lx_fastio_take(c->p, (int)c->a[0], iov, (int)m.msg_iovlen, c->a[2] & MSG_PEEK);
	if (rc) {
		m.msg_namelen = 0;
		m.msg_flags = 0;
		m.msg_controllen = 0;
	} else {
		lx_wait_begin(c);
		do
			rc = host_ret(recvmsg((int)host, &m, (int)c->a[2] & ~MSG_CMSG_CLOEXEC));
		while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
		lx_wait_end(c);
	}
	if (rc < 0)
		return rc;
	/* Control data the guest left no room for is cut short, as Linux says. */
	flags = g.msg_controllen ? m.msg_flags : m.msg_flags & ~MSG_CTRUNC;
	if (g.msg_controllen &&
	    lx_scm_in(c, &m, (uint64_t)(uintptr_t)g.msg_control,
		      c->a[1] + offsetof(struct msghdr, msg_controllen), c->a[2] & MSG_CMSG_CLOEXEC,
		      &flags))
		return -EFAULT;
	if (lx_copy_out(c, c->a[1] + offsetof(struct msghdr, msg_flags), &flags, sizeof(flags)))
		return -EFAULT;
	if (m.msg_name) {
		/* Room is the name length the guest gave at the call; the length actually
		 * used goes back into the guest's header. */
		int err = lx_put_addr(c, &sa, m.msg_namelen, (uint64_t)(uintptr_t)g.msg_name,
				      g.msg_namelen, c->a[1] + offsetof(struct msghdr, msg_namelen));

		if (err)
			return err;
	}
	return rc;
}

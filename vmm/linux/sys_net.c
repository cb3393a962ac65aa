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
 * are translated both ways so the guest sees its own port numbers. Control messages
 * (sendmsg/recvmsg) pass descriptors (scm.c). Blocking calls block only the calling
 * vCPU.
 */
#include "sys.h"
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

/* A guest sockaddr of @len bytes at @ua, copied into @sa. */
static int lx_read_addr(struct lx_call *c, uint64_t ua, uint64_t len, struct sockaddr_storage *sa)
{
	if (len > sizeof(*sa) || len < sizeof(sa_family_t))
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	return lx_copy_in(c, sa, ua, len);
}

/* May the guest reach the Unix socket file @fd (an O_PATH descriptor) names? Never
 * ccvm's own control socket; otherwise one under an --rw directory (the guest's own
 * places) or named by --allow-unix. Everything else under --root (the session bus,
 * docker.sock, an ssh agent...) is not the guest's to reach. */
static int lx_unix_reachable(struct lx_call *c, int fd, const char *gpath)
{
	const struct lx_net *net = &c->p->net;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (net->deny_ino && st.st_dev == net->deny_dev && st.st_ino == net->deny_ino) {
		log_warn("guest connection to ccvm's own control socket (%s) refused", gpath);
		return -EACCES;
	}
	if (lx_fs_in_rw(&c->p->fs, fd) || lx_fs_is_one_of(fd, net->allow_unix, net->n_allow_unix))
		return 0;
	if (lx_first_time(c))
		log_warn("guest connection to Unix socket %s refused: outside the --rw directories "
			 "(--allow-unix HOSTPATH allows one)", gpath);
	return -EACCES;
}

/* Is @port (host order) the port of one of the guest's own IP sockets? Two guest
 * sockets may talk over loopback, whatever port one of them got. */
static bool lx_own_port(struct lx_call *c, uint16_t port)
{
	bool own = false;

	pthread_mutex_lock(&c->p->lock);
	for (int fd = 0; fd < c->p->n_files && !own; fd++) {
		struct sockaddr_storage sa;
		socklen_t len = sizeof(sa);
		int host = c->p->files[fd].host_fd;

		own = host >= 0 && getsockname(host, (struct sockaddr *)&sa, &len) == 0 &&
		      (sa.ss_family == AF_INET || sa.ss_family == AF_INET6) &&
		      lx_net_port((struct sockaddr *)&sa) == port;
	}
	pthread_mutex_unlock(&c->p->lock);
	return own;
}

/*
 * An AF_UNIX path, confined like a file and rewritten to a host path under
 * /proc/self/fd whose descriptor stays open in *@dirfd: to bind (@create), the parent
 * directory, resolved in the guest's root and writable, plus the new name (bind never
 * follows a final symlink); to connect or send, the socket file itself, resolved in
 * the guest's root with its symlinks (a plain path here would let the host follow a
 * guest-made symlink out of the root).
 */
static int lx_unix_path(struct lx_call *c, struct sockaddr_storage *sa, socklen_t *len,
			bool create, int *dirfd)
{
	struct sockaddr_un *un = (struct sockaddr_un *)sa;
	char gpath[PATH_MAX], base[NAME_MAX + 1];
	size_t n = *len - offsetof(struct sockaddr_un, sun_path);
	int rc, w;

	*dirfd = -1;
	if (n == 0 || un->sun_path[0] == '\0')
		return -EACCES; /* abstract sockets would reach any host process */
	un->sun_path[n < sizeof(un->sun_path) ? n : sizeof(un->sun_path) - 1] = '\0';
	rc = lx_path_join(c->p, AT_FDCWD, un->sun_path, gpath);
	if (rc)
		return rc;
	if (create) {
		rc = lx_fs_parent(&c->p->fs, gpath, true, dirfd, base);
		w = rc ? 0 : snprintf(un->sun_path, sizeof(un->sun_path), "/proc/self/fd/%d/%s",
				      *dirfd, base);
	} else {
		rc = lx_fs_open_path(&c->p->fs, gpath, true, dirfd);
		if (!rc)
			rc = lx_unix_reachable(c, *dirfd, gpath);
		w = rc ? 0 : snprintf(un->sun_path, sizeof(un->sun_path), "/proc/self/fd/%d", *dirfd);
	}
	if (rc)
		return rc;
	if (w >= (int)sizeof(un->sun_path))
		return -ENAMETOOLONG;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(un->sun_path) + 1);
	return 0;
}

/* The Unix socket files this monitor's guests bound (a ring: the oldest forgotten
 * first). A guest's connect to one of them is to its own VM, and makes no probe
 * (lx_unix_peer_ok): a probe would sit in the guest's own accept queue. */
#define LX_OWN_SOCKETS 256

static struct {
	dev_t dev;
	ino_t ino;
} lx_own_sockets[LX_OWN_SOCKETS];
static unsigned lx_own_next;
static pthread_mutex_t lx_own_lock = PTHREAD_MUTEX_INITIALIZER;

static void lx_own_socket_add(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return;
	pthread_mutex_lock(&lx_own_lock);
	lx_own_sockets[lx_own_next % LX_OWN_SOCKETS].dev = st.st_dev;
	lx_own_sockets[lx_own_next % LX_OWN_SOCKETS].ino = st.st_ino;
	lx_own_next++;
	pthread_mutex_unlock(&lx_own_lock);
}

static bool lx_own_socket(const char *path)
{
	struct stat st;
	bool own = false;

	if (stat(path, &st) < 0 || !st.st_ino)
		return false;
	pthread_mutex_lock(&lx_own_lock);
	for (unsigned i = 0; i < LX_OWN_SOCKETS && i < lx_own_next && !own; i++)
		own = lx_own_sockets[i].dev == st.st_dev && lx_own_sockets[i].ino == st.st_ino;
	pthread_mutex_unlock(&lx_own_lock);
	return own;
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
		if (!rc && fchmod((int)host, LX_SOCK_FILE_MODE & ~c->p->fs.umask) < 0)
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
	if (port == 0) /* an ephemeral port, for an outgoing connection: on loopback */
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
	if (sa.ss_family == AF_INET || sa.ss_family == AF_INET6) {
		port = lx_net_port((struct sockaddr *)&sa);
		if (!port || !lx_net_rule_for_host(&c->p->net, port)) {
			log_warn("guest listen refused: the socket is not bound to a published port");
			return -EACCES;
		}
	}
	return host_ret(listen((int)host, (int)c->a[1]));
}

/* A host address back to the guest's view: a published host port reads as its guest
 * port. Writes at most @room bytes (the guest's buffer size, read once by the caller)
 * at @ua and the full length to @ulen (a socklen_t in guest memory), as the kernel
 * does. */
static int lx_put_addr(struct lx_call *c, struct sockaddr_storage *sa, socklen_t len,
		       uint64_t ua, socklen_t room, uint64_t ulen)
{
	const struct lx_publish *rule;
	socklen_t n;

	if ((int)room < 0)
		return -EINVAL;
	rule = lx_net_rule_for_host(&c->p->net, lx_net_port((struct sockaddr *)sa));
	if (rule)
		lx_net_set_port((struct sockaddr *)sa, rule->guest_port);
	n = room < len ? room : len;
	if (n && lx_copy_out(c, ua, sa, n))
		return -EFAULT;
	return lx_copy_out(c, ulen, &len, sizeof(len));
}

/* lx_put_addr for calls whose buffer size is the socklen_t at @ulen (accept,
 * getsockname, recvfrom). */
static int lx_write_addr(struct lx_call *c, struct sockaddr_storage *sa, socklen_t len,
			 uint64_t ua, uint64_t ulen)
{
	socklen_t room;

	if (!ua)
		return 0;
	if (lx_copy_in(c, &room, ulen, sizeof(room)))
		return -EFAULT;
	return lx_put_addr(c, sa, len, ua, room, ulen);
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

/* Where the guest may connect or send to: loopback (a published guest port going to
 * its host side), anywhere with --net host; AF_UNIX paths confined like files. */
static int lx_dest(struct lx_call *c, struct sockaddr_storage *sa, socklen_t *len, int *dirfd)
{
	const struct lx_publish *rule;
	uint16_t port;

	*dirfd = -1;
	if (sa->ss_family == AF_UNIX)
		return lx_unix_path(c, sa, len, false, dirfd);
	if (sa->ss_family != AF_INET && sa->ss_family != AF_INET6)
		return sa->ss_family == AF_UNSPEC ? 0 : -EAFNOSUPPORT;
	if (!lx_net_is_loopback((struct sockaddr *)sa)) {
		if (c->p->net.host)
			return 0;
		log_warn("guest connection to a non-loopback address refused (--net host allows it)");
		return -ENETUNREACH;
	}
	port = lx_net_port((struct sockaddr *)sa);
	if (!lx_net_loopback_port_ok(&c->p->net, port) && !lx_own_port(c, port)) {
		if (lx_first_time(c))
			log_warn("guest connection to loopback port %u refused: not a port of its own "
				 "(--allow-port %u allows it)", port, port);
		return -EACCES;
	}
	rule = lx_net_rule_for_guest(&c->p->net, port);
	if (rule && rule->host_addr.ss_family == sa->ss_family &&
	    lx_net_is_loopback((const struct sockaddr *)&rule->host_addr)) {
		memcpy(sa, &rule->host_addr, rule->host_len);
		*len = rule->host_len;
	} else if (rule) {
		lx_net_set_port((struct sockaddr *)sa,
				lx_net_port((const struct sockaddr *)&rule->host_addr));
	}
	return 0;
}

/* A destination the guest names (@ulen bytes at @ua), read and checked by lx_dest. */
static int lx_read_dest(struct lx_call *c, uint64_t ua, uint64_t ulen, struct sockaddr_storage *sa,
			socklen_t *len, int *dirfd)
{
	int rc = lx_read_addr(c, ua, ulen, sa);

	*dirfd = -1;
	*len = (socklen_t)ulen;
	return rc ? rc : lx_dest(c, sa, len, dirfd);
}

/* ---- other VMs' sockets ---- */

/* Whether the process @pid runs ccvm: its executable's name starts with "ccvm" (ccvm,
 * ccvm-asan, an installed copy, one replaced on disk since it started). -EACCES where
 * this process may not look: a non-dumpable one (ccvm after --user is). */
static int lx_pid_is_ccvm(pid_t pid)
{
	char link[64], exe[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = '\0';
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	return strncmp(base, "ccvm", 4) == 0;
}

/*
 * VMs never reach each other (issue 54): a guest's connection to a Unix socket that
 * another ccvm listens on (its control socket, a `restore --incoming unix:` listener,
 * a socket of its guest) is refused, whatever directory holds it. The listener is
 * known only once connected (SO_PEERCRED), so a probe connects first, on the socket
 * file @sa already pins, and the guest's own socket connects only if the probe's
 * listener may be reached: the guest never holds, even for a moment, a connection to
 * another monitor. The guest's own listeners get no probe (lx_own_socket); another
 * listener it may reach (under --rw, --allow-unix) sees the probe as a connection that
 * closes at once. A listener this process may not inspect, of this uid, counts as
 * another ccvm unless --allow-unix names it. 0, or -ECONNREFUSED.
 */
static int lx_unix_peer_ok(struct lx_call *c, int host, const struct sockaddr_storage *sa,
			   socklen_t len, bool allowed)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr), tl = sizeof(int);
	int type = 0, probe, rc, ccvm = 0;

	if (getsockopt(host, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type == SOCK_DGRAM)
		return 0; /* (a datagram socket has no listener to ask) */
	if (lx_own_socket(((const struct sockaddr_un *)sa)->sun_path))
		return 0; /* this VM's own: no probe in its accept queue */
	probe = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return 0;
	rc = connect(probe, (const struct sockaddr *)sa, len);
	if (rc == 0 && getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
	    cr.pid > 0 && cr.pid != getpid()) {
		ccvm = lx_pid_is_ccvm(cr.pid);
		if (ccvm == -EACCES)
			ccvm = !allowed && cr.uid == geteuid();
	}
	close(probe);
	if (ccvm != 1)
		return 0; /* a probe that could not connect: the guest's connect says why */
	if (lx_first_time(c))
		log_warn("guest connection to a Unix socket of another ccvm (pid %d) refused: VMs "
			 "never reach each other's sockets or control sockets", (int)cr.pid);
	return -ECONNREFUSED;
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

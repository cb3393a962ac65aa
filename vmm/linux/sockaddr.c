/*
 * sockaddr.c - the guest's socket addresses: read once into monitor memory, checked
 * against net.c's policy and translated both ways, so the guest sees its own port
 * numbers and names Unix sockets by paths inside its root.
 *
 * A Unix socket path is resolved in the guest's root like a file and reached only
 * where the guest may (under an --rw directory, or named by --allow-unix; never ccvm's
 * own control socket). A connection to a Unix listener of another ccvm is refused
 * before the guest holds it: VMs never reach each other's sockets. A destination is
 * loopback (a published guest port going to its host side), or anywhere with --net
 * host.
 */
#include "sockaddr.h"
#include "fdtable.h"
#include "call.h"
#include "net.h"
#include "path.h"
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

/* A guest sockaddr of @len bytes at @ua, copied into @sa. */
int lx_read_addr(struct lx_call *c, uint64_t ua, uint64_t len, struct sockaddr_storage *sa)
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

	lx_fd_lock(c->p);
	for (int fd = 0; fd < c->p->fdt.n_files && !own; fd++) {
		struct sockaddr_storage sa;
		socklen_t len = sizeof(sa);
		int host = c->p->fdt.files[fd].host_fd;

		own = host >= 0 && getsockname(host, (struct sockaddr *)&sa, &len) == 0 &&
		      (sa.ss_family == AF_INET || sa.ss_family == AF_INET6) &&
		      lx_net_port((struct sockaddr *)&sa) == port;
	}
	lx_fd_unlock(c->p);
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
int lx_unix_path(struct lx_call *c, struct sockaddr_storage *sa, socklen_t *len,
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

void lx_own_socket_add(const char *path)
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

/* A host address back to the guest's view: a published host port reads as its guest
 * port. Writes at most @room bytes (the guest's buffer size, read once by the caller)
 * at @ua and the full length to @ulen (a socklen_t in guest memory), as the kernel
 * does. */
int lx_put_addr(struct lx_call *c, struct sockaddr_storage *sa, socklen_t len,
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
int lx_write_addr(struct lx_call *c, struct sockaddr_storage *sa, socklen_t len,
		  uint64_t ua, uint64_t ulen)
{
	socklen_t room;

	if (!ua)
		return 0;
	if (lx_copy_in(c, &room, ulen, sizeof(room)))
		return -EFAULT;
	return lx_put_addr(c, sa, len, ua, room, ulen);
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
	if (c->p->net.own_ns) /* its loopback and its network are its own */
		return 0;
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
int lx_read_dest(struct lx_call *c, uint64_t ua, uint64_t ulen, struct sockaddr_storage *sa,
		 socklen_t *len, int *dirfd)
{
	int rc = lx_read_addr(c, ua, ulen, sa);

	*dirfd = -1;
	*len = (socklen_t)ulen;
	return rc ? rc : lx_dest(c, sa, len, dirfd);
}

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
int lx_unix_peer_ok(struct lx_call *c, int host, const struct sockaddr_storage *sa,
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

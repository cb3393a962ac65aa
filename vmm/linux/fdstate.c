/*
 * fdstate.c - the guest's file descriptors in a snapshot, and what they become on
 * restore.
 *
 * A descriptor is saved with what it is, found from the host descriptor behind it
 * (fstat, /proc/self/fd and /proc/self/fdinfo, socket options), and rebuilt on
 * restore as the closest thing a new process can have:
 *   - the caller's stdin/stdout/stderr: the restoring caller's own;
 *   - regular files: reopened by guest path, at the saved offset;
 *   - listening sockets (and datagram sockets bound to a published port): a new socket
 *     bound again to the port the guest used, through the publish rules in force (the
 *     restore's own --publish, or the saved ones), and listening. If that host address
 *     cannot be had, the restore fails with a message, as a container with a taken
 *     port would not start;
 *   - connected sockets, and AF_UNIX ones: a socket whose peer has gone, so the guest
 *     reads end-of-file and its writes fail (the connection did not survive; its peer
 *     is elsewhere); IP sockets neither bound nor connected come back new;
 *   - pipes: a new pipe shared by the descriptors that shared one (a program's
 *     self-pipe keeps working), holding the bytes that were in it when the snapshot
 *     saw its read end (tee: read without taking them); eventfds with their counter;
 *   - epoll instances: a new instance watching the same guest descriptors with the
 *     same events and the guest's own event data (read from fdinfo), built after the
 *     descriptors it watches;
 *   - timerfds: on the same clock, armed with the time that was left and the period
 *     (expirations not yet read are lost);
 *   - signalfds: on the same mask, shared by the descriptors that shared one, ready
 *     as the restored pending signals say;
 *   - memfds: the image's copy (vmm/linux/shm.c), at the saved offset; descriptors of
 *     one memfd share an offset after a restore;
 *   - anything else stays closed, with a log line.
 * The descriptor's O_NONBLOCK / O_APPEND flags are set again.
 */
#include "fdstate.h"
#include "fdtable.h"
#include "lx.h"
#include "net.h"
#include "path.h"
#include "signalfd.h"
#include "timer.h"
#include "../../base/log.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FD_KEPT_FLAGS (O_NONBLOCK | O_APPEND)
#define FD_PIPE_DATA_MAX (1 << 20) /* bytes a pipe may hold (Linux' pipe-max-size) */
#define PIPE_BUF_DEFAULT 65536     /* a new pipe's size */
#define FD_LISTEN_BACKLOG SOMAXCONN

/* Numbers in the state record (state.c saves and checks the rest of it). */
json_t *lx_j_u64(uint64_t v)
{
	return json_integer((json_int_t)v);
}

uint64_t lx_ju(json_t *o, const char *key)
{
	return (uint64_t)json_integer_value(json_object_get(o, key));
}

static int sockopt_int(int fd, int level, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return getsockopt(fd, level, name, &v, &len) < 0 ? -1 : v;
}

/* ---- save ---- */

/* The bytes in pipe @host, when it is a read end, as hex into @f's "data": copied with
 * tee into a pipe of the same size, so the guest still reads them. Best effort: a
 * pipe that cannot be read this way comes back empty, as before. */
static void save_pipe_data(int host, json_t *f)
{
	int t[2], size = fcntl(host, F_GETPIPE_SZ), fl = fcntl(host, F_GETFL);
	static const char hex[] = "0123456789abcdef";
	uint8_t *buf = NULL;
	char *text = NULL;
	ssize_t n = 0;

	if (size <= 0 || size > FD_PIPE_DATA_MAX || fl < 0 || (fl & O_ACCMODE) != O_RDONLY ||
	    pipe2(t, O_CLOEXEC | O_NONBLOCK) < 0)
		return;
	if (fcntl(t[1], F_SETPIPE_SZ, size) >= size)
		n = tee(host, t[1], (size_t)size, SPLICE_F_NONBLOCK);
	buf = n > 0 ? malloc((size_t)n) : NULL;
	text = buf ? malloc(2 * (size_t)n + 1) : NULL;
	if (text && read(t[0], buf, (size_t)n) == n) {
		for (ssize_t i = 0; i < n; i++) {
			text[2 * i] = hex[buf[i] >> 4];
			text[2 * i + 1] = hex[buf[i] & 15];
		}
		text[2 * n] = '\0';
		json_object_set_new(f, "data", json_string(text));
	}
	free(text);
	free(buf);
	close(t[0]);
	close(t[1]);
}

static void save_socket(struct lx_proc *p, int host, json_t *f)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int family = sockopt_int(host, SOL_SOCKET, SO_DOMAIN);
	const struct lx_publish *rule = NULL;
	bool connected;

	if (getsockname(host, (struct sockaddr *)&sa, &len) == 0 &&
	    (family == AF_INET || family == AF_INET6))
		rule = lx_net_rule_for_host(&p->net, lx_net_port((struct sockaddr *)&sa));
	len = sizeof(sa);
	connected = getpeername(host, (struct sockaddr *)&sa, &len) == 0;
	json_object_set_new(f, "kind", json_string("socket"));
	json_object_set_new(f, "family", json_integer(family));
	json_object_set_new(f, "type", json_integer(sockopt_int(host, SOL_SOCKET, SO_TYPE)));
	json_object_set_new(f, "protocol", json_integer(sockopt_int(host, SOL_SOCKET, SO_PROTOCOL)));
	json_object_set_new(f, "listening", json_boolean(sockopt_int(host, SOL_SOCKET, SO_ACCEPTCONN) == 1));
	json_object_set_new(f, "connected", json_boolean(connected));
	json_object_set_new(f, "port", json_integer(rule ? rule->guest_port : 0));
	if (family == AF_INET6)
		json_object_set_new(f, "v6only", json_integer(sockopt_int(host, IPPROTO_IPV6, IPV6_V6ONLY)));
}

/* The guest descriptor holding host descriptor @host, or -1 (the table held). */
static int guest_fd_of(struct lx_proc *p, int host)
{
	for (int fd = 0; fd < p->fdt.n_files; fd++)
		if (p->fdt.files[fd].host_fd == host)
			return fd;
	return -1;
}

/* What the host kernel tells of descriptor @host (its /proc/self/fdinfo), or NULL. */
static FILE *fdinfo_open(int host)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", host);
	return fopen(path, "re");
}

/* An epoll instance's interest list, from fdinfo: "tfd: N events: X data: Y". */
static void save_epoll(struct lx_proc *p, int host, json_t *f)
{
	json_t *watch = json_array();
	FILE *in = fdinfo_open(host);
	char line[256];

	while (in && fgets(line, sizeof(line), in)) {
		unsigned long long data;
		unsigned events;
		int tfd, gfd;

		if (sscanf(line, "tfd: %d events: %x data: %llx", &tfd, &events, &data) != 3)
			continue;
		gfd = guest_fd_of(p, tfd);
		if (gfd >= 0)
			json_array_append_new(watch, json_pack("[i, I, o]", gfd, (json_int_t)events,
							       lx_j_u64(data)));
	}
	if (in)
		fclose(in);
	json_object_set_new(f, "kind", json_string("epoll"));
	json_object_set_new(f, "watch", watch);
}

static void save_eventfd(int host, json_t *f)
{
	unsigned long long count = 0;
	FILE *in = fdinfo_open(host);
	char line[128];
	int sem = 0;

	while (in && fgets(line, sizeof(line), in)) {
		if (sscanf(line, "eventfd-count: %llx", &count) == 1)
			continue;
		sscanf(line, "eventfd-semaphore: %d", &sem);
	}
	if (in)
		fclose(in);
	json_object_set_new(f, "kind", json_string("eventfd"));
	json_object_set_new(f, "count", lx_j_u64(count));
	json_object_set_new(f, "semaphore", json_boolean(sem));
}

/* A timerfd: its clock, what is left until it fires and its period (ns), whether it
 * blocks; expirations not yet read are not kept. */
static void save_timerfd(int host, json_t *f)
{
	struct itimerspec cur = { 0 };
	int fl = fcntl(host, F_GETFL);

	(void)timerfd_gettime(host, &cur);
	json_object_set_new(f, "kind", json_string("timerfd"));
	json_object_set_new(f, "clock", json_integer(lx_timerfd_clock(host)));
	json_object_set_new(f, "value_ns", json_integer(cur.it_value.tv_sec * 1000000000LL +
							 cur.it_value.tv_nsec));
	json_object_set_new(f, "interval_ns", json_integer(cur.it_interval.tv_sec * 1000000000LL +
							    cur.it_interval.tv_nsec));
	json_object_set_new(f, "nonblock", json_boolean(fl >= 0 && (fl & O_NONBLOCK)));
}

/* A timerfd as save_timerfd described it (checked by lx_fdstate_check). */
static int restore_timerfd(json_t *f, int *host)
{
	int64_t v = json_integer_value(json_object_get(f, "value_ns"));
	int64_t iv = json_integer_value(json_object_get(f, "interval_ns"));
	struct itimerspec its = {
		.it_value = { .tv_sec = v / 1000000000LL, .tv_nsec = v % 1000000000LL },
		.it_interval = { .tv_sec = iv / 1000000000LL, .tv_nsec = iv % 1000000000LL },
	};

	*host = timerfd_create((int)json_integer_value(json_object_get(f, "clock")),
			       TFD_CLOEXEC | (json_is_true(json_object_get(f, "nonblock")) ?
						      TFD_NONBLOCK : 0));
	if (*host < 0)
		return -errno;
	return timerfd_settime(*host, 0, &its, NULL) < 0 ? -errno : 0;
}

static void save_kind(struct lx_proc *p, const struct lx_file *lf, json_t *f)
{
	char link[64], target[64];
	uint64_t mask, ino;
	struct stat st;
	ssize_t n;

	if (lf->std >= 0 && lf->std <= 2) {
		json_object_set_new(f, "kind", json_string("std"));
		return;
	}
	if (lf->path) {
		off_t off = lseek(lf->host_fd, 0, SEEK_CUR);

		json_object_set_new(f, "kind", json_string("file"));
		json_object_set_new(f, "offset", json_integer(off < 0 ? 0 : off));
		return;
	}
	if (fstat(lf->host_fd, &st) < 0)
		st.st_mode = 0;
	if (S_ISSOCK(st.st_mode)) {
		save_socket(p, lf->host_fd, f);
		return;
	}
	if (S_ISFIFO(st.st_mode) && lx_sigfd_mask(p, lf->host_fd, &mask, &ino) == 0) {
		json_object_set_new(f, "kind", json_string("signalfd"));
		json_object_set_new(f, "mask", lx_j_u64(mask));
		json_object_set_new(f, "ino", lx_j_u64(ino));
		return;
	}
	if (S_ISFIFO(st.st_mode)) {
		json_object_set_new(f, "kind", json_string("pipe"));
		json_object_set_new(f, "ino", lx_j_u64(st.st_ino));
		save_pipe_data(lf->host_fd, f);
		return;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", lf->host_fd);
	n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (strncmp(target, "/memfd:", strlen("/memfd:")) == 0) {
		off_t off = lseek(lf->host_fd, 0, SEEK_CUR);

		json_object_set_new(f, "kind", json_string("memfd"));
		json_object_set_new(f, "ino", lx_j_u64(st.st_ino));
		json_object_set_new(f, "offset", json_integer(off < 0 ? 0 : off));
	} else if (strcmp(target, "anon_inode:[eventpoll]") == 0)
		save_epoll(p, lf->host_fd, f);
	else if (strcmp(target, "anon_inode:[eventfd]") == 0)
		save_eventfd(lf->host_fd, f);
	else if (strcmp(target, "anon_inode:[timerfd]") == 0)
		save_timerfd(lf->host_fd, f);
	else
		json_object_set_new(f, "kind", json_string(target[0] ? target : "unknown"));
}

json_t *lx_fdstate_save(struct lx_proc *p)
{
	json_t *fds = json_array();

	lx_fd_lock(p);
	for (int fd = 0; fd < p->fdt.n_files; fd++) {
		const struct lx_file *lf = &p->fdt.files[fd];
		json_t *f;

		if (lf->host_fd < 0)
			continue;
		int fl = fcntl(lf->host_fd, F_GETFL);

		f = json_pack("{s:i, s:b, s:i, s:i, s:s?, s:i, s:i}", "fd", fd, "cloexec",
			      lf->cloexec, "std", lf->std, "oflags", lf->oflags, "path", lf->path,
			      "flags", fl & FD_KEPT_FLAGS, "access", fl & O_ACCMODE);
		save_kind(p, lf, f);
		json_array_append_new(fds, f);
	}
	lx_fd_unlock(p);
	return fds;
}

/* ---- restore ---- */

static int restore_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int restore_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EADDRNOTAVAIL;
}

/* A listening (or bound datagram) socket on its guest port, through the rules in force. */
static int restore_listener(struct lx_proc *p, json_t *f, int *host, char *err, size_t errlen)
{
	int family = (int)lx_ju(f, "family"), type = (int)lx_ju(f, "type"), one = 1, v6only;
	uint16_t port = (uint16_t)lx_ju(f, "port");
	const struct lx_publish *rule = lx_net_rule_for_guest(&p->net, port);
	char spec[80] = "?";

	if (!rule)
		return restore_fail(err, errlen, "the guest listens on port %u, which is not "
				    "published (give --publish HOSTPORT:%u)", port, port);
	lx_net_format_publish(rule, spec, sizeof(spec));
	if (rule->host_addr.ss_family != family)
		return restore_fail(err, errlen, "the guest listens on port %u with IPv%d, but "
				    "--publish %s is IPv%d", port, family == AF_INET6 ? 6 : 4,
				    spec, family == AF_INET6 ? 4 : 6);
	*host = socket(family, type | SOCK_CLOEXEC, (int)lx_ju(f, "protocol"));
	if (*host < 0)
		return -errno;
	setsockopt(*host, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	v6only = (int)lx_ju(f, "v6only");
	if (family == AF_INET6)
		setsockopt(*host, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	if (bind(*host, (const struct sockaddr *)&rule->host_addr, rule->host_len) < 0 ||
	    (json_is_true(json_object_get(f, "listening")) && listen(*host, FD_LISTEN_BACKLOG) < 0)) {
		int e = errno;

		close(*host);
		*host = -1;
		return restore_fail(err, errlen, "cannot listen again for guest port %u on %s: %s",
				    port, spec, strerror(e));
	}
	return 0;
}

static int restore_socket(struct lx_proc *p, json_t *f, int *host, char *err, size_t errlen)
{
	int sv[2];

	if ((json_is_true(json_object_get(f, "listening")) || lx_ju(f, "type") == SOCK_DGRAM) &&
	    lx_ju(f, "port") && !json_is_true(json_object_get(f, "connected")))
		return restore_listener(p, f, host, err, errlen);
	if (!json_is_true(json_object_get(f, "connected")) && lx_ju(f, "family") != AF_UNIX) {
		*host = socket((int)lx_ju(f, "family"), (int)lx_ju(f, "type") | SOCK_CLOEXEC,
			       (int)lx_ju(f, "protocol"));
		return *host < 0 ? -errno : 0;
	}
	/* A connection that did not survive: its peer end closed at once. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	close(sv[1]);
	*host = sv[0];
	return 0;
}

/* The other descriptors saved as the same @kind object @ino (a pipe, a signalfd) get
 * duplicates of @ends now, the write end to those open for writing; marked done. */
static void restore_sharers(struct lx_proc *p, json_t *fds, json_t *f, const char *kind,
			    const int ends[2])
{
	uint64_t ino = lx_ju(f, "ino");
	size_t i;
	json_t *o;

	json_array_foreach(fds, i, o) {
		int gfd = (int)lx_ju(o, "fd"), h;

		if (o == f || json_object_get(o, "done") ||
		    strcmp(json_string_value(json_object_get(o, "kind")) ?: "", kind) != 0 ||
		    lx_ju(o, "ino") != ino)
			continue;
		h = fcntl(lx_ju(o, "access") == O_WRONLY ? ends[1] : ends[0], F_DUPFD_CLOEXEC, 3);
		if (h < 0 || lx_fd_install_at(p, h, gfd, json_is_true(json_object_get(o, "cloexec"))) < 0) {
			if (h >= 0)
				close(h);
			continue;
		}
		fcntl(h, F_SETFL, (int)lx_ju(o, "flags") & FD_KEPT_FLAGS);
		lx_fd_set_origin(p, gfd, NULL, (int)lx_ju(o, "oflags"), -1);
		json_object_set_new(o, "done", json_true());
	}
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A saved pipe's bytes (lx_fdstate_check let only even-length hex through). */
static bool pipe_data_ok(json_t *d)
{
	const char *s = json_string_value(d);
	size_t len = s ? strlen(s) : 0;

	if (!d)
		return true;
	if (!s || len % 2 || len / 2 > FD_PIPE_DATA_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (hex_digit(s[i]) < 0)
			return false;
	return true;
}

/* The bytes any descriptor of pipe @ino saved, into its new write end @w. */
static void restore_pipe_data(json_t *fds, uint64_t ino, int w)
{
	const char *s = NULL;
	uint8_t *buf;
	size_t i, len;
	json_t *o;

	json_array_foreach(fds, i, o)
		if (strcmp(json_string_value(json_object_get(o, "kind")) ?: "", "pipe") == 0 &&
		    lx_ju(o, "ino") == ino && (s = json_string_value(json_object_get(o, "data"))))
			break;
	len = s ? strlen(s) / 2 : 0;
	buf = len ? malloc(len) : NULL;
	if (!buf)
		return;
	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(hex_digit(s[2 * i]) << 4 | hex_digit(s[2 * i + 1]));
	if (len > PIPE_BUF_DEFAULT)
		fcntl(w, F_SETPIPE_SZ, (int)len);
	if (write(w, buf, len) != (ssize_t)len)
		log_warn("restore: a pipe gets back only part of the %zu bytes it held", len);
	free(buf);
}

/* The new pipe for @ino: made (holding what it held) and, in a tree's restore, kept in
 * @pipes for the processes after this one; or the one an earlier process made, its
 * ends duplicated. */
static int pipe_ends(json_t *fds, uint64_t ino, json_t *pipes, int ends[2])
{
	char key[24];
	json_t *e;

	snprintf(key, sizeof(key), "%llu", (unsigned long long)ino);
	e = pipes ? json_object_get(pipes, key) : NULL;
	if (e) {
		ends[0] = fcntl((int)json_integer_value(json_array_get(e, 0)), F_DUPFD_CLOEXEC, 3);
		ends[1] = fcntl((int)json_integer_value(json_array_get(e, 1)), F_DUPFD_CLOEXEC, 3);
		if (ends[0] >= 0 && ends[1] >= 0)
			return 0;
		if (ends[0] >= 0)
			close(ends[0]);
		if (ends[1] >= 0)
			close(ends[1]);
		return -EMFILE;
	}
	if (pipe2(ends, O_CLOEXEC) < 0)
		return -errno;
	restore_pipe_data(fds, ino, ends[1]);
	if (pipes) {
		int keep[2] = { fcntl(ends[0], F_DUPFD_CLOEXEC, 3), fcntl(ends[1], F_DUPFD_CLOEXEC, 3) };

		if (keep[0] >= 0 && keep[1] >= 0)
			json_object_set_new(pipes, key, json_pack("[i, i]", keep[0], keep[1]));
		else if (keep[0] >= 0 || keep[1] >= 0)
			close(keep[0] >= 0 ? keep[0] : keep[1]);
	}
	return 0;
}

void lx_restore_pipes_close(json_t *pipes)
{
	const char *key;
	json_t *e;

	json_object_foreach(pipes, key, e) {
		close((int)json_integer_value(json_array_get(e, 0)));
		close((int)json_integer_value(json_array_get(e, 1)));
	}
}

/* Both ends of the pipe @ino: one new pipe for all of the descriptors that had it
 * (in all the processes of a tree), holding what it held. */
static int restore_pipe(struct lx_proc *p, json_t *fds, json_t *f, json_t *pipes, int *host)
{
	int ends[2], rc = pipe_ends(fds, lx_ju(f, "ino"), pipes, ends);

	if (rc)
		return rc;
	*host = lx_ju(f, "access") == O_WRONLY ? ends[1] : ends[0];
	restore_sharers(p, fds, f, "pipe", ends);
	close(*host == ends[0] ? ends[1] : ends[0]);
	return 0;
}

/* A signalfd on the saved mask, its byte as the restored signals say, shared by the
 * descriptors that shared one. */
static int restore_signalfd(struct lx_proc *p, json_t *fds, json_t *f, int *host)
{
	int rc = lx_sigfd_create(p, lx_ju(f, "mask"), (int)lx_ju(f, "flags") & O_NONBLOCK, host);

	if (!rc)
		restore_sharers(p, fds, f, "signalfd", (int[2]){ *host, *host });
	return rc;
}

static int restore_epoll(struct lx_proc *p, json_t *f, int *host)
{
	size_t i;
	json_t *w;

	*host = epoll_create1(EPOLL_CLOEXEC);
	if (*host < 0)
		return -errno;
	json_array_foreach(json_object_get(f, "watch"), i, w) {
		int gfd = (int)json_integer_value(json_array_get(w, 0));
		struct epoll_event ev = {
			.events = (uint32_t)json_integer_value(json_array_get(w, 1)),
			.data.u64 = (uint64_t)json_integer_value(json_array_get(w, 2)),
		};
		int target = lx_fd_host(p, gfd);

		if (target < 0 || epoll_ctl(*host, EPOLL_CTL_ADD, target, &ev) < 0)
			log_warn("restore: epoll fd %d no longer watches fd %d", (int)lx_ju(f, "fd"), gfd);
	}
	return 0;
}

static int restore_one(struct lx_proc *p, json_t *fds, json_t *f, json_t *pipes, json_t *shm,
		       int *host, char *err, size_t errlen)
{
	const char *kind = json_string_value(json_object_get(f, "kind")) ?: "";
	const char *path = json_string_value(json_object_get(f, "path"));
	int std = (int)json_integer_value(json_object_get(f, "std"));
	int rc = 0;

	*host = -1;
	if (strcmp(kind, "std") == 0 && std >= 0 && std <= 2) {
		*host = fcntl(std, F_DUPFD_CLOEXEC, 3);
	} else if (strcmp(kind, "file") == 0 && path) {
		int flags = (int)lx_ju(f, "oflags") & ~(O_CREAT | O_EXCL | O_TRUNC);

		if (lx_fs_open(NULL, &p->fs, path, flags, 0, host) == 0)
			lseek(*host, (off_t)lx_ju(f, "offset"), SEEK_SET);
		else
			log_warn("restore: cannot reopen guest fd %d (%s); it stays closed",
				 (int)lx_ju(f, "fd"), path);
	} else if (strcmp(kind, "socket") == 0) {
		rc = restore_socket(p, f, host, err, errlen);
	} else if (strcmp(kind, "pipe") == 0) {
		rc = restore_pipe(p, fds, f, pipes, host);
	} else if (strcmp(kind, "signalfd") == 0) {
		rc = restore_signalfd(p, fds, f, host);
	} else if (strcmp(kind, "memfd") == 0) {
		*host = lx_shm_restored(shm, lx_ju(f, "ino"));
		if (*host >= 0)
			lseek(*host, (off_t)lx_ju(f, "offset"), SEEK_SET);
	} else if (strcmp(kind, "eventfd") == 0) {
		*host = eventfd((unsigned)lx_ju(f, "count"),
				EFD_CLOEXEC | (json_is_true(json_object_get(f, "semaphore")) ? EFD_SEMAPHORE : 0));
	} else if (strcmp(kind, "epoll") == 0) {
		rc = restore_epoll(p, f, host);
	} else if (strcmp(kind, "timerfd") == 0) {
		rc = restore_timerfd(f, host);
	} else {
		log_warn("restore: guest fd %d (%s) cannot come back; it stays closed",
			 (int)lx_ju(f, "fd"), kind);
	}
	if (rc == -EADDRNOTAVAIL)
		return rc;
	if (rc)
		log_warn("restore: guest fd %d (%s) stays closed: %s", (int)lx_ju(f, "fd"), kind,
			 strerror(-rc));
	return 0;
}

/* A saved timerfd: one of the clocks a guest may make one on, times 0 .. 2^62 ns. */
static bool timerfd_state_ok(json_t *f)
{
	int64_t clock = json_integer_value(json_object_get(f, "clock"));
	int64_t v = json_integer_value(json_object_get(f, "value_ns"));
	int64_t iv = json_integer_value(json_object_get(f, "interval_ns"));

	return (clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC || clock == CLOCK_BOOTTIME) &&
	       v >= 0 && iv >= 0 && v < (1LL << 62) && iv < (1LL << 62);
}

int lx_fdstate_check(json_t *fds, char *err, size_t errlen)
{
	size_t i;
	json_t *f;

	if (fds && !json_is_array(fds))
		return log_set_err(-EINVAL, err, errlen, "fds: not a list");
	json_array_foreach(fds, i, f) {
		const char *kind = json_string_value(json_object_get(f, "kind")) ?: "";
		int fd = (int)json_integer_value(json_object_get(f, "fd"));

		if (!json_is_object(f) || fd < 0 || fd >= LX_MAX_FDS)
			return log_set_err(-EINVAL, err, errlen, "fds[%zu]: not a descriptor number", i);
		if (strcmp(kind, "socket") == 0 &&
		    !lx_net_socket_ok((int)lx_ju(f, "family"), (int)lx_ju(f, "type"),
				      (int)lx_ju(f, "protocol")))
			return log_set_err(-EINVAL, err, errlen,
					   "fds[%zu] (guest fd %d): socket family %d, type %d, "
					   "protocol %d: not one ccvm lets a guest have", i, fd,
					   (int)lx_ju(f, "family"), (int)lx_ju(f, "type"),
					   (int)lx_ju(f, "protocol"));
		if (strcmp(kind, "pipe") == 0 && !pipe_data_ok(json_object_get(f, "data")))
			return log_set_err(-EINVAL, err, errlen,
					   "fds[%zu] (guest fd %d): pipe data that is not hex of at "
					   "most %d bytes", i, fd, FD_PIPE_DATA_MAX);
		if (strcmp(kind, "timerfd") == 0 && !timerfd_state_ok(f))
			return log_set_err(-EINVAL, err, errlen,
					   "fds[%zu] (guest fd %d): a timerfd ccvm could not have "
					   "(clock or times)", i, fd);
	}
	return 0;
}

/* Two passes: epoll instances last, once the descriptors they watch exist. */
int lx_fdstate_restore(struct lx_proc *p, json_t *fds, json_t *pipes, json_t *shm, char *err,
		       size_t errlen)
{
	for (int pass = 0; pass < 2; pass++) {
		size_t i;
		json_t *f;

		json_array_foreach(fds, i, f) {
			int fd = (int)lx_ju(f, "fd"), host, rc;
			bool epoll = strcmp(json_string_value(json_object_get(f, "kind")) ?: "",
					    "epoll") == 0;

			if (fd < 0 || fd >= LX_MAX_FDS || epoll != (pass == 1) ||
			    json_object_get(f, "done"))
				continue;
			rc = restore_one(p, fds, f, pipes, shm, &host, err, errlen);
			if (rc)
				return rc;
			if (host < 0)
				continue;
			if (lx_fd_install_at(p, host, fd, json_is_true(json_object_get(f, "cloexec"))) < 0) {
				close(host);
				continue;
			}
			fcntl(host, F_SETFL, (int)lx_ju(f, "flags") & FD_KEPT_FLAGS);
			lx_fd_set_origin(p, fd, json_string_value(json_object_get(f, "path")),
					 (int)lx_ju(f, "oflags"),
					 (int)json_integer_value(json_object_get(f, "std")));
		}
	}
	return 0;
}

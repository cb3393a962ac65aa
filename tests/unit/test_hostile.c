/*
 * test_hostile.c - the real system-call handlers (through lx_syscall, the dispatch a
 * vCPU uses) on plain memory standing in for guest RAM, while a second thread rewrites
 * the arguments as a hostile guest thread would: a path flips between a short name and
 * 8 KiB without a NUL, a msghdr's msg_namelen and msg_iovlen flip between sane and
 * huge, timeouts flip between valid and invalid. No VM is needed. Under the ASan/UBSan
 * build nothing may be reported, and every call must return a result or an error Linux
 * gives for such arguments. Before the monitor read guest values once, the path case
 * overflowed a PATH_MAX stack buffer and the msghdr case read past the iovec array.
 */
#include "suites.h"
#include "../../guest/fastio/fastio_abi.h"
#include "../../mmu/layout.h"
#include "../../vmm/confine.h"
#include "../../vmm/linux/sys.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RAM          (32ULL << 20)
#define GFD          5           /* the guest's number for the fast connection */
#define RUN_NS       1000000000LL /* how long each race runs */
#define MAX_CALLS    200000      /* and at most this many calls */
#define LONG_PATH    8192        /* a path without a NUL for this long */
#define MANY_IOV     2000        /* more than LX_IOV_MAX */
#define AREA         0x800000ULL /* guest offsets past the fastio area */
#define G_PATH       (LAYOUT_USER_BASE + AREA)
#define G_MSG        (G_PATH + 0x4000)
#define G_NAME       (G_MSG + 0x100)
#define G_IOV        (G_MSG + 0x1000)
#define G_BUF        (G_IOV + 0x10000)
#define G_TS         (G_BUF + 0x10000)
#define G_FDS        (G_TS + 0x100)

static struct gmem mem;
static struct lx_proc *p;
static struct lx_thread thr;
static char dir[] = "/tmp/ccvm-hostile-XXXXXX";
static int sv[2]; /* sv[0]: the guest's socket (GFD); sv[1]: the peer */
static volatile int stop;

static void *gp(uint64_t gva)
{
	return gmem_user_ptr(&mem, gva, 1);
}

static int64_t sys(uint64_t nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		   uint64_t a4, uint64_t a5)
{
	struct cpu_regs regs = { .rax = nr, .rdi = a0, .rsi = a1, .rdx = a2, .r10 = a3,
				 .r8 = a4, .r9 = a5 };
	struct cpu_segs sregs = { 0 };
	bool dirty = false;

	lx_syscall(&thr, &regs, &sregs, &dirty);
	return (int64_t)regs.rax;
}

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void setup(void)
{
	const char *rw[] = { dir };
	char f[PATH_MAX];
	int fd;

	snprintf(f, sizeof(f), "%s/f", dir);
	fd = open(f, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(gmem_map(&mem, RAM), 0);
	p = calloc(1, sizeof(*p));
	p->mem = &mem;
	p->pid = getpid();
	p->rlim[RLIMIT_NOFILE].rlim_cur = 1024;
	pthread_mutex_init(&p->lock, NULL);
	ck_assert_int_eq(lx_fs_init(&p->fs, dir, rw, 1), 0);
	ck_assert_int_eq(lx_fd_init_empty(p), 0);
	lx_thread_init(p, &thr, NULL);
	ck_assert_uint_le(lx_fastio_area_size(), AREA);
	ck_assert_int_eq(lx_fastio_init(p, LAYOUT_USER_BASE, true), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(lx_fd_install_at(p, sv[0], GFD, true), GFD);
	/* The guest's socket reads ahead into guest memory (fastio.c): a recvmsg then
	 * copies into the guest's iovecs without a host call. */
	lx_fastio_accepted(p, GFD, sv[0]);
	stop = 0;
}

static void teardown(void)
{
	char f[PATH_MAX];

	lx_fastio_fini(p);
	lx_fd_fini(p);
	lx_fs_fini(&p->fs);
	pthread_mutex_destroy(&p->lock);
	free(p);
	gmem_unmap(&mem);
	close(sv[1]);
	snprintf(f, sizeof(f), "%s/f", dir);
	unlink(f);
}

/* The directory, made and removed by Check's own process around all the tests: a
 * test that confines its process (test_personality_confined) ends with _exit, and
 * could not remove it anyway (Landlock grants it the inside, not /tmp). */
static void dir_make(void)
{
	if (!mkdtemp(dir)) {
		perror("hostile: mkdtemp");
		abort();
	}
}

static void dir_remove(void)
{
	char f[PATH_MAX];

	snprintf(f, sizeof(f), "%s/f", dir);
	unlink(f);
	rmdir(dir);
	strcpy(dir, "/tmp/ccvm-hostile-XXXXXX");
}

/* Run @flip on a second thread until told to stop. */
static void *flipper(void *arg)
{
	void (*flip)(unsigned) = (void (*)(unsigned))(uintptr_t)arg;

	for (unsigned i = 0; !stop; i++)
		flip(i);
	return NULL;
}

static void race(void (*flip)(unsigned), void (*call)(void))
{
	pthread_t th;
	int64_t end = now_ns() + RUN_NS;

	ck_assert_int_eq(pthread_create(&th, NULL, flipper, (void *)(uintptr_t)flip), 0);
	for (int n = 0; n < MAX_CALLS && now_ns() < end; n++)
		call();
	stop = 1;
	pthread_join(th, NULL);
}

/* A path that ends at byte 2 ("/f") or runs on for 8 KiB. */
static void flip_path(unsigned i)
{
	__atomic_store_n((char *)gp(G_PATH + 2), (i & 1) ? 'A' : '\0', __ATOMIC_RELAXED);
}

static void call_paths(void)
{
	struct stat st;
	int64_t r;

	r = sys(SYS_openat, (uint64_t)AT_FDCWD, G_PATH, O_RDONLY, 0, 0, 0);
	ck_assert_msg(r >= 0 || r == -ENAMETOOLONG || r == -ENOENT, "openat: %lld", (long long)r);
	if (r >= 0)
		ck_assert_int_eq(sys(SYS_close, (uint64_t)r, 0, 0, 0, 0, 0), 0);
	r = sys(SYS_newfstatat, (uint64_t)AT_FDCWD, G_PATH, G_BUF, 0, 0, 0);
	ck_assert_msg(r == 0 || r == -ENAMETOOLONG || r == -ENOENT, "stat: %lld", (long long)r);
	if (r == 0) {
		memcpy(&st, gp(G_BUF), sizeof(st));
		ck_assert(S_ISREG(st.st_mode));
	}
	r = sys(SYS_access, G_PATH, R_OK, 0, 0, 0, 0);
	ck_assert_msg(r == 0 || r == -ENAMETOOLONG || r == -ENOENT, "access: %lld", (long long)r);
}

/* open/stat/access while another thread moves the path's NUL. */
START_TEST(test_path_flips)
{
	char *path = gp(G_PATH);

	memset(path, 'A', LONG_PATH);
	memcpy(path, "/f", 2);
	race(flip_path, call_paths);
}
END_TEST

static void flip_msg(unsigned i)
{
	struct msghdr *m = gp(G_MSG);

	__atomic_store_n(&m->msg_iovlen, (i & 1) ? MANY_IOV : 1, __ATOMIC_RELAXED);
	__atomic_store_n(&m->msg_namelen, (i & 2) ? 0xffffu : 0u, __ATOMIC_RELAXED);
}

static void call_msgs(void)
{
	int64_t r;

	r = sys(SYS_sendmsg, GFD, G_MSG, MSG_DONTWAIT, 0, 0, 0);
	ck_assert_msg(r >= 0 || r == -EMSGSIZE || r == -EINVAL || r == -EAGAIN,
		      "sendmsg: %lld", (long long)r);
	/* Bytes for the guest's socket, read ahead into guest memory (when refused calls
	 * left the socket full, there is enough to read already). */
	if (write(sv[1], "xyzxyzxyz", 9) < 0)
		ck_assert_int_eq(errno, EAGAIN);
	lx_fastio_prefetch(p);
	r = sys(SYS_recvmsg, GFD, G_MSG, MSG_DONTWAIT, 0, 0, 0);
	ck_assert_msg(r >= 0 || r == -EMSGSIZE || r == -EINVAL || r == -EAGAIN,
		      "recvmsg: %lld", (long long)r);
	/* What a sane count receives fits its one iovec. */
	ck_assert_int_le(r, 4096);
	while (read(sv[1], gp(G_BUF + 0x8000), 4096) > 0)
		;
}

/* sendmsg/recvmsg while another thread flips msg_iovlen (1 / 2000) and msg_namelen. */
START_TEST(test_msghdr_flips)
{
	struct msghdr *m = gp(G_MSG);
	struct iovec *iov = gp(G_IOV);

	/* Every iovec names a byte far from the others: with 2000 of them read, a copy
	 * into more iovecs than were checked would land outside the checked array. */
	for (int i = 0; i < MANY_IOV; i++) {
		iov[i].iov_base = (void *)(uintptr_t)(i == 0 ? G_BUF : G_BUF + 0x1000 + (uint64_t)i);
		iov[i].iov_len = i == 0 ? 4096 : 1;
	}
	memset(m, 0, sizeof(*m));
	m->msg_iov = (struct iovec *)(uintptr_t)G_IOV;
	m->msg_iovlen = 1;
	race(flip_msg, call_msgs);
}
END_TEST

/* A timeout whose nanoseconds flip between valid and out of range. */
static void flip_ts(unsigned i)
{
	struct timespec *ts = gp(G_TS);

	__atomic_store_n(&ts->tv_nsec, (i & 1) ? 2000000000L : 1L, __ATOMIC_RELAXED);
	__atomic_store_n(&ts->tv_sec, (i & 2) ? -1L : 0L, __ATOMIC_RELAXED);
}

static void call_timeouts(void)
{
	int64_t r;

	r = sys(SYS_ppoll, G_FDS, 1, G_TS, 0, 8, 0);
	ck_assert_msg(r == 1 || r == -EINVAL, "ppoll: %lld", (long long)r);
	r = sys(SYS_nanosleep, G_TS, 0, 0, 0, 0, 0);
	ck_assert_msg(r == 0 || r == -EINVAL, "nanosleep: %lld", (long long)r);
}

/* ppoll and nanosleep while another thread flips the timeout. */
START_TEST(test_timeout_flips)
{
	struct pollfd *pfd = gp(G_FDS);

	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	pfd->fd = GFD;
	pfd->events = POLLIN;
	race(flip_ts, call_timeouts);
}
END_TEST

/* select with a timeout of INT64_MAX seconds on a ready descriptor: returns at once,
 * with no signed overflow when the timeout becomes nanoseconds (F11). */
START_TEST(test_select_huge_timeout)
{
	struct timeval *tv = gp(G_TS);
	uint64_t *set = gp(G_FDS);
	int64_t r;

	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	tv->tv_sec = INT64_MAX;
	tv->tv_usec = 0;
	*set = 1ULL << GFD;
	r = sys(SYS_select, GFD + 1, G_FDS, 0, 0, G_TS, 0);
	ck_assert_int_eq(r, 1);
	ck_assert_uint_eq(*set, 1ULL << GFD);
}
END_TEST

/* A guest fd resolved by a call stays the same host file for the whole call: another
 * thread's close of it does not free the host number for the monitor's next open
 * (F6); the host close happens when the call lets go. */
START_TEST(test_fd_held_across_close)
{
	struct lx_call c = { .t = &thr, .p = p };
	int pfd[2], g, host, other;

	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	close(pfd[1]);
	pthread_mutex_lock(&p->lock);
	g = lx_fd_install(p, pfd[0], 0, true);
	pthread_mutex_unlock(&p->lock);
	ck_assert_int_ge(g, 0);
	host = lx_host_fd(&c, (uint64_t)g);
	ck_assert_int_eq(host, pfd[0]);
	/* Another guest thread closes it; the monitor opens a file right after. */
	ck_assert_int_eq(sys(SYS_close, (uint64_t)g, 0, 0, 0, 0, 0), 0);
	other = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(other, 0);
	ck_assert_int_ne(other, host);
	ck_assert_int_eq(fcntl(host, F_GETFD), FD_CLOEXEC);
	lx_call_release(&c);
	ck_assert_int_eq(fcntl(host, F_GETFD), -1);
	close(other);
}
END_TEST

static volatile int blocked, unblocked;

static void hook_begin(void *vcpu)
{
	(void)vcpu;
	__atomic_add_fetch(&blocked, 1, __ATOMIC_SEQ_CST);
}

static void hook_end(void *vcpu)
{
	(void)vcpu;
	__atomic_add_fetch(&unblocked, 1, __ATOMIC_SEQ_CST);
}

/* The FIFO's writer: comes once the guest's open waits in its blocking bracket (or
 * after 2 s, so that a monitor that waits outside it fails the test, not hangs it). */
static void *fifo_writer(void *path)
{
	int fd;

	for (int i = 0; i < 200 && !__atomic_load_n(&blocked, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* A guest open of a FIFO with no writer waits inside the blocking bracket, where a
 * pause of the VM does not wait for it (F8). */
START_TEST(test_fifo_open_in_bracket)
{
	static const struct lx_hooks hooks = { .wait_begin = hook_begin, .wait_end = hook_end };
	char host_path[PATH_MAX];
	pthread_t th;
	int64_t fd;

	snprintf(host_path, sizeof(host_path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(host_path, 0600), 0);
	strcpy(gp(G_PATH), "/fifo");
	blocked = unblocked = 0;
	p->hooks = &hooks;
	ck_assert_int_eq(pthread_create(&th, NULL, fifo_writer, host_path), 0);
	fd = sys(SYS_openat, (uint64_t)AT_FDCWD, G_PATH, O_RDONLY, 0, 0, 0);
	pthread_join(th, NULL);
	p->hooks = NULL;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(blocked, 1);
	ck_assert_int_eq(unblocked, 1);
	unlink(host_path);
}
END_TEST

/* Opens that are refused (a device other than the harmless ones) and mode changes
 * never open the file for real: inotify sees no IN_OPEN on it (F7). */
START_TEST(test_refused_open_opens_nothing)
{
	char node[PATH_MAX], ev[256];
	int in;

	snprintf(node, sizeof(node), "%s/mem", dir);
	if (mknod(node, S_IFCHR | 0600, makedev(1, 1)) < 0) {
		ck_assert_msg(errno == EPERM, "mknod: %s", strerror(errno));
		return; /* not root: no device node to try it on */
	}
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(inotify_add_watch(in, node, IN_OPEN), 0);
	strcpy(gp(G_PATH), "/mem");
	ck_assert_int_eq(sys(SYS_openat, (uint64_t)AT_FDCWD, G_PATH, O_RDONLY, 0, 0, 0), -EACCES);
	ck_assert_int_eq(sys(SYS_openat, (uint64_t)AT_FDCWD, G_PATH, O_RDWR, 0, 0, 0), -EACCES);
	ck_assert_int_eq(sys(SYS_chmod, G_PATH, 0644, 0, 0, 0, 0), 0);
	ck_assert_msg(read(in, ev, sizeof(ev)) < 0 && errno == EAGAIN,
		      "the device node was opened");
	close(in);
	unlink(node);
}
END_TEST

/* A harmless device is writable, but its mode is the host's: with the guest's root at
 * /, chmod of /dev/null is refused (it used to pass, as /dev/null is writable). The
 * mode asked for is the one it has, so the check changes nothing even when it fails. */
START_TEST(test_chmod_of_dev_null_refused)
{
	const char *rw[] = { dir };
	struct stat before, after;

	ck_assert_int_eq(stat("/dev/null", &before), 0);
	lx_fs_fini(&p->fs);
	ck_assert_int_eq(lx_fs_init(&p->fs, "/", rw, 1), 0);
	strcpy(gp(G_PATH), "/dev/null");
	ck_assert_int_eq(sys(SYS_chmod, G_PATH, before.st_mode & 07777, 0, 0, 0, 0), -EROFS);
	ck_assert_int_eq(stat("/dev/null", &after), 0);
	ck_assert_uint_eq(before.st_mode, after.st_mode);
}
END_TEST

/* The guest gets TCP, UDP and Unix sockets; raw and packet sockets, which would see
 * and forge the host's traffic, are refused. */
START_TEST(test_socket_kinds)
{
	int64_t fd;

	ck_assert_int_eq(sys(SYS_socket, AF_INET, SOCK_RAW, IPPROTO_ICMP, 0, 0, 0), -EPERM);
	ck_assert_int_eq(sys(SYS_socket, AF_INET6, SOCK_RAW, IPPROTO_RAW, 0, 0, 0), -EPERM);
	ck_assert_int_eq(sys(SYS_socket, AF_INET, SOCK_STREAM, IPPROTO_UDP, 0, 0, 0),
			 -EPROTONOSUPPORT);
	ck_assert_int_eq(sys(SYS_socket, AF_PACKET, SOCK_RAW, 0, 0, 0, 0), -EAFNOSUPPORT);
	ck_assert_int_eq(sys(SYS_socketpair, AF_UNIX, SOCK_RAW, 0, G_FDS, 0, 0), -EPROTONOSUPPORT);
	fd = sys(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP, 0, 0, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(sys(SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0), 0);
	fd = sys(SYS_socket, AF_UNIX, SOCK_SEQPACKET, 0, 0, 0, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(sys(SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0), 0);
}
END_TEST

/* A host socket listening on loopback, its port in *@port. */
static int host_listener(int type, uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (type == SOCK_STREAM)
		ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* The guest's connect to loopback @port: the call's result. */
static int64_t guest_connect_port(int type, uint16_t port)
{
	struct sockaddr_in *a = gp(G_NAME);
	int64_t fd = sys(SYS_socket, AF_INET, (uint64_t)type, 0, 0, 0, 0), r;

	ck_assert_int_ge(fd, 0);
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	r = sys(SYS_connect, (uint64_t)fd, G_NAME, sizeof(*a), 0, 0, 0);
	sys(SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
	return r;
}

/* Loopback: the guest reaches its own ports and the ones --allow-port names, not the
 * host's other services (F9); --net host lifts it. */
START_TEST(test_loopback_ports)
{
	struct sockaddr_in *a = gp(G_NAME);
	uint16_t port, own;
	int srv = host_listener(SOCK_STREAM, &port);
	int64_t u;

	ck_assert_int_eq(guest_connect_port(SOCK_STREAM, port), -EACCES);
	ck_assert_int_eq(lx_net_allow_port(&p->net, port), 0);
	ck_assert_int_eq(guest_connect_port(SOCK_STREAM, port), 0);
	p->net.n_allow_ports = 0;
	p->net.host = true;
	ck_assert_int_eq(guest_connect_port(SOCK_STREAM, port), 0);
	p->net.host = false;
	/* A UDP socket of its own, on an ephemeral port: the guest may send to it. */
	u = sys(SYS_socket, AF_INET, SOCK_DGRAM, 0, 0, 0, 0);
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(sys(SYS_bind, (uint64_t)u, G_NAME, sizeof(*a), 0, 0, 0), 0);
	*(socklen_t *)gp(G_FDS) = sizeof(*a);
	ck_assert_int_eq(sys(SYS_getsockname, (uint64_t)u, G_NAME, G_FDS, 0, 0, 0), 0);
	own = ntohs(a->sin_port);
	strcpy(gp(G_BUF), "ping");
	ck_assert_int_eq(sys(SYS_sendto, (uint64_t)u, G_BUF, 4, 0, G_NAME, sizeof(*a)), 4);
	ck_assert_int_ne(own, port);
	sys(SYS_close, (uint64_t)u, 0, 0, 0, 0, 0);
	close(srv);
}
END_TEST

/* A host Unix socket listening at @path. */
static int unix_listener(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	return fd;
}

static int64_t guest_connect_unix(const char *gpath)
{
	struct sockaddr_un *a = gp(G_NAME);
	int64_t fd = sys(SYS_socket, AF_UNIX, SOCK_STREAM, 0, 0, 0, 0), r;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	strcpy(a->sun_path, gpath);
	r = sys(SYS_connect, (uint64_t)fd, G_NAME, sizeof(*a), 0, 0, 0);
	sys(SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
	return r;
}

/* Unix sockets: under --rw or named by --allow-unix; ccvm's own control socket never,
 * wherever it lies (F5). */
START_TEST(test_unix_reach)
{
	char rwdir[PATH_MAX], outside[PATH_MAX], inside[PATH_MAX];
	const char *rw[] = { rwdir };
	struct stat st;
	int a, b;

	snprintf(rwdir, sizeof(rwdir), "%s/rw", dir);
	snprintf(outside, sizeof(outside), "%s/bus.sock", dir);
	snprintf(inside, sizeof(inside), "%s/rw/own.sock", dir);
	ck_assert_int_eq(mkdir(rwdir, 0700), 0);
	lx_fs_fini(&p->fs);
	ck_assert_int_eq(lx_fs_init(&p->fs, dir, rw, 1), 0);
	a = unix_listener(outside);
	b = unix_listener(inside);
	ck_assert_int_eq(guest_connect_unix("/bus.sock"), -EACCES);
	ck_assert_int_eq(guest_connect_unix("/rw/own.sock"), 0);
	p->net.allow_unix[0] = outside;
	p->net.n_allow_unix = 1;
	ck_assert_int_eq(guest_connect_unix("/bus.sock"), 0);
	/* The control socket, even under --rw. */
	ck_assert_int_eq(stat(inside, &st), 0);
	p->net.deny_dev = st.st_dev;
	p->net.deny_ino = st.st_ino;
	ck_assert_int_eq(guest_connect_unix("/rw/own.sock"), -EACCES);
	close(a);
	close(b);
	unlink(outside);
	unlink(inside);
	rmdir(rwdir);
}
END_TEST

static int64_t gsys_path(uint64_t nr, const char *path, uint64_t a1, uint64_t a2)
{
	strcpy(gp(G_PATH), path);
	return sys(nr, (uint64_t)AT_FDCWD, G_PATH, a1, a2, 0, 0);
}

/* The guest's file, socket and ioctl calls, made by the real handlers under a Landlock
 * domain of root "/" and --rw dir, the monitor's seccomp filter and a vCPU's own, in
 * the order confine_monitor installs them. */
static void confined_calls(void)
{
	const char *rw[] = { dir };
	struct confine_fs fs = { .root = "/", .rw = rw, .n_rw = 1 };
	char err[CONFINE_ERR_LEN], host[PATH_MAX];
	int64_t fd, fd2;
	int n = 0;

	ck_assert_msg(confine_landlock(&fs, err) == 0 || strstr(err, "no Landlock"), "%s", err);
	ck_assert_msg(confine_seccomp(err) == 0, "%s", err);
	role_enter(ROLE_VCPU);
	/* read and write under --rw, make and remove a directory, list one */
	fd = gsys_path(SYS_openat, "/f", O_RDWR | O_TRUNC, 0);
	ck_assert(fd >= 0);
	memcpy(gp(G_BUF), "hello", 5);
	ck_assert(sys(SYS_write, (uint64_t)fd, G_BUF, 5, 0, 0, 0) == 5);
	ck_assert(sys(SYS_pread64, (uint64_t)fd, G_BUF + 8, 5, 0, 0, 0) == 5);
	ck_assert(memcmp(gp(G_BUF + 8), "hello", 5) == 0);
	ck_assert(sys(SYS_fchmod, (uint64_t)fd, 0640, 0, 0, 0, 0) == 0);
	ck_assert(sys(SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0) == 0);
	ck_assert(gsys_path(SYS_mkdirat, "/d", 0755, 0) == 0);
	ck_assert(gsys_path(SYS_unlinkat, "/d", AT_REMOVEDIR, 0) == 0);
	fd = gsys_path(SYS_openat, "/", O_RDONLY | O_DIRECTORY, 0);
	ck_assert(fd >= 0 && sys(SYS_getdents64, (uint64_t)fd, G_BUF, 4096, 0, 0, 0) > 0);
	/* a pipe, epoll, ioctls: the personality's pass-through ones reach the host */
	ck_assert(sys(SYS_pipe2, G_FDS, 0, 0, 0, 0, 0) == 0);
	memcpy(&n, gp(G_FDS), sizeof(n));
	ck_assert(sys(SYS_ioctl, (uint64_t)n, FIONREAD, G_BUF, 0, 0, 0) == 0);
	ck_assert(sys(SYS_ioctl, (uint64_t)n, TCGETS, G_BUF, 0, 0, 0) == -ENOTTY);
	ck_assert(sys(SYS_ioctl, (uint64_t)n, TIOCSTI, G_BUF, 0, 0, 0) == -ENOTTY);
	ck_assert(sys(SYS_ioctl, GFD, FIONREAD, G_BUF, 0, 0, 0) == 0);
	fd2 = sys(SYS_epoll_create1, 0, 0, 0, 0, 0, 0);
	ck_assert(fd2 >= 0);
	/* sockets: TCP, UDP, Unix made; raw refused by the personality, not the filter */
	ck_assert((fd = sys(SYS_socket, AF_INET6, SOCK_STREAM, 0, 0, 0, 0)) >= 0);
	ck_assert((fd = sys(SYS_socket, AF_INET, SOCK_DGRAM, 0, 0, 0, 0)) >= 0);
	ck_assert(sys(SYS_socketpair, AF_UNIX, SOCK_DGRAM, 0, G_FDS, 0, 0) == 0);
	ck_assert(sys(SYS_socket, AF_INET, SOCK_RAW, IPPROTO_ICMP, 0, 0, 0) == -EPERM);
	ck_assert(sys(SYS_socket, AF_PACKET, SOCK_RAW, 0, 0, 0, 0) == -EAFNOSUPPORT);
	/* The domain is real: the kernel itself lets this thread write under --rw only. */
	snprintf(host, sizeof(host), "%s/f", dir);
	ck_assert(access(host, W_OK) == 0);
	if (!strstr(err, "no Landlock"))
		ck_assert(open("/etc/hostname", O_WRONLY) < 0 && errno == EACCES);
	/* Check's own bookkeeping after a test (its timers) is no call of the monitor's:
	 * end here, as a passed check. */
	_exit(0);
}

/* The personality works under the monitor's confinement: nothing the guest's file,
 * socket and ioctl calls make the monitor do trips the seccomp filter or Landlock.
 * Guest RAM is not inherited by a fork (MADV_DONTFORK), so this confines the test's
 * own process, which Check forks for each test; it is skipped when CK_FORK=no. */
START_TEST(test_personality_confined)
{
	const char *fork_mode = getenv("CK_FORK");

	if (fork_mode && strcmp(fork_mode, "no") == 0) {
		fprintf(stderr, "test_personality_confined: skipped with CK_FORK=no\n");
		return;
	}
	confined_calls();
}
END_TEST

Suite *hostile_suite(void)
{
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("flips");

	tcase_add_unchecked_fixture(tc, dir_make, dir_remove);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_path_flips);
	tcase_add_test(tc, test_msghdr_flips);
	tcase_add_test(tc, test_timeout_flips);
	tcase_add_test(tc, test_select_huge_timeout);
	tcase_add_test(tc, test_fd_held_across_close);
	tcase_add_test(tc, test_fifo_open_in_bracket);
	tcase_add_test(tc, test_refused_open_opens_nothing);
	tcase_add_test(tc, test_chmod_of_dev_null_refused);
	tcase_add_test(tc, test_socket_kinds);
	tcase_add_test(tc, test_loopback_ports);
	tcase_add_test(tc, test_unix_reach);
	tcase_add_test(tc, test_personality_confined);
	suite_add_tcase(s, tc);
	return s;
}

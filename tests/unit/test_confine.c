/*
 * test_confine.c - the monitor confined by the kernel (vmm/confine.c): the seccomp
 * filter lets through what the monitor does and stops it, with a line that names the
 * call, at what it never does; Landlock holds a thread to its root and --rw
 * directories; --user is parsed and the drop cannot be undone. Each check runs in a
 * child process of its own, since a filter, a Landlock domain and a drop are forever.
 */
#include "suites.h"
#include "../../vmm/confine.h"
#include "../../mmu/resident.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/kvm.h>
#include <linux/landlock.h>
#include <linux/securebits.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void install_filter(void)
{
	char err[CONFINE_ERR_LEN];

	if (confine_seccomp(err)) {
		dprintf(STDERR_FILENO, "confine_seccomp: %s\n", err);
		_exit(2);
	}
}

static bool status_shows(const char *needle)
{
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, needle, strlen(needle)) == 0;
	fclose(f);
	return found;
}

static void *thread_ok(void *arg)
{
	return arg;
}

/* What the monitor does while the guest runs, all under the filter. */
static void allowed_calls(void *unused)
{
	int pfd[2], n = -1, s;
	pthread_t th;
	void *ret = NULL;
	char path[] = "/tmp/ccvm-confine-XXXXXX";
	pid_t pid;

	(void)unused;
	install_filter();
	CHILD_CHECK(status_shows("NoNewPrivs:\t1"));
	CHILD_CHECK(status_shows("Seccomp:\t2"));
	/* glibc tries clone3 first; the filter makes it ENOSYS and glibc uses clone. */
	CHILD_CHECK(pthread_create(&th, NULL, thread_ok, &n) == 0);
	CHILD_CHECK(pthread_join(th, &ret) == 0 && ret == &n);
	CHILD_CHECK(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS);
	pid = fork();
	CHILD_CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	CHILD_CHECK(waitpid(pid, NULL, 0) == pid);
	CHILD_CHECK(pipe(pfd) == 0);
	CHILD_CHECK(write(pfd[1], "x", 1) == 1);
	CHILD_CHECK(ioctl(pfd[0], FIONREAD, &n) == 0 && n == 1);
	CHILD_CHECK(ioctl(pfd[0], FIOCLEX) == 0);
	/* A KVM request reaches the kernel (which says a pipe is no KVM fd). */
	CHILD_CHECK(ioctl(pfd[0], KVM_GET_API_VERSION, 0) < 0 && errno == ENOTTY);
	CHILD_CHECK(isatty(pfd[0]) == 0);
	s = mkstemp(path);
	CHILD_CHECK(s >= 0 && write(s, "abc", 3) == 3);
	close(s);
	CHILD_CHECK(unlink(path) == 0);
	CHILD_CHECK(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED);
	for (int f = AF_INET; f <= AF_INET6; f += AF_INET6 - AF_INET) {
		CHILD_CHECK((s = socket(f, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
		close(s);
		CHILD_CHECK((s = socket(f, SOCK_DGRAM | SOCK_NONBLOCK, 0)) >= 0);
		close(s);
	}
	CHILD_CHECK((s = socket(AF_UNIX, SOCK_SEQPACKET, 0)) >= 0);
	close(s);
	CHILD_CHECK((s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP)) >= 0);
	close(s);
	CHILD_CHECK((s = socket(AF_INET6, SOCK_DGRAM, IPPROTO_UDP)) >= 0);
	close(s);
	/* What getaddrinfo asks: refused with an error it knows, not stopped. */
	CHILD_CHECK(socket(AF_NETLINK, SOCK_RAW, 0) < 0 && errno == EAFNOSUPPORT);
	CHILD_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pfd) == 0);
	CHILD_CHECK(sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = SIG_IGN }, NULL) == 0);
	/* The monitor's own pid, limits and thread's priority. */
	CHILD_CHECK(pthread_kill(pthread_self(), 0) == 0);
	CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &(struct rlimit){ 0 }) == 0);
	errno = 0;
	CHILD_CHECK(getpriority(PRIO_PROCESS, 0) >= -20 && errno == 0);
	/* PAGEMAP_SCAN reaches the kernel (a pipe is no pagemap). */
	CHILD_CHECK(ioctl(pfd[0], RES_PAGEMAP_SCAN, NULL) < 0 && errno == ENOTTY);
	CHILD_CHECK(ioctl(pfd[0], USERFAULTFD_IOC_NEW, O_CLOEXEC) < 0 && errno == ENOTTY);
}

/* Everything the monitor does while a guest runs still works under the filter, and
 * /proc shows NoNewPrivs 1 and Seccomp 2 (the acceptance check's view). */
START_TEST(test_seccomp_allows)
{
	struct child_result r;

	run_child(allowed_calls, NULL, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

/* The system call itself, not glibc's execve: a gcov build (make coverage) turns a
 * call to execve() into __gcov_execve, which first writes its counts with openat, and a
 * role that may not open files would be stopped at that openat instead. */
static void call_execve(void)
{
	char *argv[] = { "true", NULL };

	syscall(SYS_execve, "/bin/true", argv, NULL);
}

static void call_ptrace(void)
{
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static void call_tiocsti(void)
{
	char c = 'x';

	ioctl(STDIN_FILENO, TIOCSTI, &c); /* types into a terminal: an escape */
}

static void call_packet(void)
{
	socket(AF_PACKET, SOCK_RAW, 0);
}

static void call_raw(void)
{
	socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6);
}

static void call_unshare(void)
{
	unshare(CLONE_NEWUSER);
}

static void call_clone_ns(void)
{
	syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0);
}

static void call_mount(void)
{
	mount("none", "/tmp", "tmpfs", 0, NULL);
}

static void call_bpf(void)
{
	syscall(SYS_bpf, 0, NULL, 0);
}

static void call_sigsys(void)
{
	signal(SIGSYS, SIG_IGN);
}

static void call_tgkill_other(void)
{
	syscall(SYS_tgkill, 1, 1, 0); /* init's, or any process's: not the monitor's */
}

static void call_prlimit_other(void)
{
	struct rlimit r;

	prlimit(1, RLIMIT_NOFILE, NULL, &r);
}

static void call_setpriority_other(void)
{
	setpriority(PRIO_PROCESS, 1, 19);
}

static void call_kill_term(void)
{
	kill(1, SIGTERM); /* a signal other than 0 and SIGKILL, to any pid */
}

static void call_sctp(void)
{
	socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP); /* a protocol the guest cannot ask */
}

static void call_unix_proto(void)
{
	socket(AF_UNIX, SOCK_STREAM, 1);
}

/* The number PAGEMAP_SCAN's once matched on (type 'f', nr 16) with another size. */
static void call_scan_lookalike(void)
{
	ioctl(STDIN_FILENO, _IOC(_IOC_READ, 'f', 16, 8), NULL);
}

/* userfaultfd's type with a number ccvm never asks. */
static void call_uffd_other(void)
{
	ioctl(STDIN_FILENO, _IOC(_IOC_READ | _IOC_WRITE, UFFDIO, 0x3f, 16), NULL);
}

static const struct denied {
	const char *name;
	void (*call)(void);
} denied[] = {
	{ "execve", call_execve }, { "ptrace", call_ptrace },   { "ioctl", call_tiocsti },
	{ "socket", call_packet }, { "socket", call_raw },      { "unshare", call_unshare },
	{ "clone", call_clone_ns }, { "mount", call_mount },   { "bpf", call_bpf },
	{ "rt_sigaction", call_sigsys }, { "tgkill", call_tgkill_other },
	{ "prlimit64", call_prlimit_other }, { "setpriority", call_setpriority_other },
	{ "kill", call_kill_term },
	{ "socket", call_sctp }, { "socket", call_unix_proto },
	{ "ioctl", call_scan_lookalike }, { "ioctl", call_uffd_other },
};

static void denied_call(void *arg)
{
	const struct denied *d = arg;

	install_filter();
	d->call();
	dprintf(STDERR_FILENO, "%s returned\n", d->name);
}

/* Each call the monitor never needs stops it at once, with status 159 (SIGSYS's) and a
 * line that names the call: an execve, a ptrace, TIOCSTI, a packet or raw socket, a new
 * namespace by unshare or clone, a mount, bpf, and taking over SIGSYS. */
START_TEST(test_seccomp_denies)
{
	/* ... and also a signal, limit or priority of another process, a socket of a
	 * protocol that is not its family's own, and a lookalike of an ioctl it makes. */
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		struct child_result r;
		char want[64];

#if defined(__SANITIZE_ADDRESS__)
		if (denied[i].call == call_ptrace) /* LeakSanitizer needs it in this build */
			continue;
#endif
		run_child(denied_call, (void *)&denied[i], &r);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == CONFINE_EXIT_STATUS,
			      "%s: status 0x%x, stderr: %s", denied[i].name, r.status, r.err);
		snprintf(want, sizeof(want), "system call %s (", denied[i].name);
		ck_assert_msg(strstr(r.err, want) && strstr(r.err, "seccomp"),
			      "%s: the log line does not name it: %s", denied[i].name, r.err);
	}
}
END_TEST

static void call_io_uring_setup(void)
{
	uint8_t params[120] = { 0 }; /* struct io_uring_params */

	syscall(__NR_io_uring_setup, 1, params);
}

static void call_process_vm_writev(void)
{
	char byte = 0;
	struct iovec local = { &byte, 1 }, remote = { &byte, 1 };

	process_vm_writev(1, &local, 1, &remote, 1, 0);
}

static const struct denied denied_to_roles[] = {
	{ "io_uring_setup", call_io_uring_setup }, { "ptrace", call_ptrace },
	{ "process_vm_writev", call_process_vm_writev }, { "execve", call_execve },
};

struct role_call {
	enum role role;
	const struct denied *d;
};

static void *role_thread(void *arg)
{
	const struct role_call *rc = arg;

	role_enter(rc->role);
	rc->d->call();
	dprintf(STDERR_FILENO, "%s returned\n", rc->d->name);
	return NULL;
}

/* In a thread of @arg's role, under the process's filter and the role's own. */
static void denied_in_role(void *arg)
{
	pthread_t th;

	install_filter();
	if (pthread_create(&th, NULL, role_thread, arg) == 0)
		pthread_join(th, NULL);
}

/* A thread of any role under the filter that calls io_uring_setup, ptrace,
 * process_vm_writev or execve is stopped, with the line that names its role and the
 * call; ptrace too in a sanitized build, where the process's filter allows it. */
START_TEST(test_roles_deny)
{
	for (int role = 0; role < ROLE_COUNT; role++) {
		for (size_t i = 0; i < sizeof(denied_to_roles) / sizeof(denied_to_roles[0]); i++) {
			struct role_call rc = { (enum role)role, &denied_to_roles[i] };
			struct child_result r;
			char want[96];

			run_child(denied_in_role, &rc, &r);
			ck_assert_msg(WIFEXITED(r.status) &&
					      WEXITSTATUS(r.status) == CONFINE_EXIT_STATUS,
				      "%s in a %s thread: status 0x%x, stderr: %s", rc.d->name,
				      role_name(rc.role), r.status, r.err);
			snprintf(want, sizeof(want), "%s thread made system call %s (",
				 role_name(rc.role), rc.d->name);
			ck_assert_msg(strstr(r.err, want), "the log line does not say '%s': %s",
				      want, r.err);
		}
	}
}
END_TEST

static void bad_arch_call(void *filter)
{
	long ret = 20; /* getpid in the i386 table */

	if (filter)
		install_filter();
	__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
	dprintf(STDERR_FILENO, "an i386 call returned %ld\n", ret);
}

/* A call through the i386 entry (another architecture to seccomp) ends the whole
 * process by SIGSYS at once, with no handler and no line: KILL_PROCESS. */
START_TEST(test_seccomp_bad_arch)
{
	struct child_result r;

	/* A kernel without the i386 entry (ia32_emulation off) faults it instead (which
	 * AddressSanitizer reports and exits 1 for). */
	run_child(bad_arch_call, NULL, &r);
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0 ||
	    !strstr(r.err, "an i386 call returned")) {
		fprintf(stderr, "test_seccomp_bad_arch: skipped, this kernel has no i386 entry\n");
		return;
	}
	run_child(bad_arch_call, (void *)1, &r);
	ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSYS,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

static char ll_dir[] = "/tmp/ccvm-landlock-XXXXXX";
static char ll_ro[128], ll_rw[128], ll_out[128];

static void ll_setup(void)
{
	char f[256];

	ck_assert_ptr_nonnull(mkdtemp(ll_dir));
	snprintf(ll_ro, sizeof(ll_ro), "%s/ro", ll_dir);
	snprintf(ll_rw, sizeof(ll_rw), "%s/ro/rw", ll_dir);
	snprintf(ll_out, sizeof(ll_out), "%s/out", ll_dir);
	ck_assert_int_eq(mkdir(ll_ro, 0755), 0);
	ck_assert_int_eq(mkdir(ll_rw, 0755), 0);
	ck_assert_int_eq(mkdir(ll_out, 0755), 0);
	snprintf(f, sizeof(f), "%s/file", ll_ro);
	ck_assert_int_eq(close(open(f, O_CREAT | O_WRONLY, 0644)), 0);
	snprintf(f, sizeof(f), "%s/file", ll_out);
	ck_assert_int_eq(close(open(f, O_CREAT | O_WRONLY, 0644)), 0);
}

static void ll_teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", ll_dir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(ll_dir, "/tmp/ccvm-landlock-XXXXXX");
}

static int open_in(const char *dir, const char *name, int flags)
{
	char f[256];

	snprintf(f, sizeof(f), "%s/%s", dir, name);
	return open(f, flags | O_CLOEXEC, 0644);
}

static bool refused(int fd)
{
	if (fd >= 0)
		close(fd);
	return fd < 0 && errno == EACCES;
}

static bool opened(int fd)
{
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

static int ll_wake[2];

/* A thread that exists before the domain is installed: it is not held by it. */
static void *ll_other_thread(void *unused)
{
	char c;

	(void)unused;
	if (read(ll_wake[0], &c, 1) != 1)
		return (void *)1;
	return opened(open_in(ll_ro, "file", O_WRONLY)) ? NULL : (void *)1;
}

static void landlocked_root(void *unused)
{
	const char *rw[] = { ll_rw };
	struct confine_fs fs = { .root = ll_ro, .rw = rw, .n_rw = 1 };
	char err[CONFINE_ERR_LEN], d[256];
	void *other = NULL;
	pthread_t th;
	int rc;

	(void)unused;
	CHILD_CHECK(pipe(ll_wake) == 0);
	CHILD_CHECK(pthread_create(&th, NULL, ll_other_thread, NULL) == 0);
	rc = confine_landlock(&fs, err);
	if (rc == -EOPNOTSUPP) {
		dprintf(STDERR_FILENO, "skipped: %s\n", err);
		_exit(3);
	}
	CHILD_CHECK(rc == 0);
	CHILD_CHECK(opened(open_in(ll_ro, "file", O_RDONLY)));
	CHILD_CHECK(refused(open_in(ll_ro, "file", O_WRONLY)));
	CHILD_CHECK(refused(open_in(ll_ro, "new", O_CREAT | O_WRONLY)));
	CHILD_CHECK(opened(open_in(ll_rw, "new", O_CREAT | O_WRONLY)));
	snprintf(d, sizeof(d), "%s/sub", ll_rw);
	CHILD_CHECK(mkdir(d, 0755) == 0 && rmdir(d) == 0);
	snprintf(d, sizeof(d), "%s/sub", ll_ro);
	CHILD_CHECK(mkdir(d, 0755) < 0 && errno == EACCES);
	/* Outside the root: not even readable. */
	CHILD_CHECK(refused(open_in(ll_out, "file", O_RDONLY)));
	CHILD_CHECK(refused(open("/etc/passwd", O_RDONLY)));
	CHILD_CHECK(write(ll_wake[1], "w", 1) == 1);
	CHILD_CHECK(pthread_join(th, &other) == 0 && other == NULL);
}

/* A thread under Landlock reads its root and nothing outside it, writes only under
 * --rw, while a thread that existed before keeps its rights (the control thread and
 * the snapshot writer stay free). */
START_TEST(test_landlock_root_and_rw)
{
	struct child_result r;

	run_child(landlocked_root, NULL, &r);
	if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3) {
		fprintf(stderr, "test_landlock_root_and_rw: %s", r.err);
		return;
	}
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

#define LL_ABI_SCOPE 6
#define LL_ABSTRACT  "ccvm-test-scope"

/* Under Landlock with scoping (ABI 6): a signal to the process outside (the test's)
 * and a connection to its abstract socket are refused; a signal to its own thread and
 * to a child it forks after goes through. */
static void landlocked_scope(void *unused)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct confine_fs fs = { .root = "/" };
	char err[CONFINE_ERR_LEN];
	int s, abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
				  LANDLOCK_CREATE_RULESET_VERSION);
	pid_t child;

	(void)unused;
	if (abi < LL_ABI_SCOPE)
		_exit(3);
	CHILD_CHECK(confine_landlock(&fs, err) == 0);
	CHILD_CHECK(kill(getppid(), 0) < 0 && errno == EPERM);
	memcpy(sa.sun_path + 1, LL_ABSTRACT, strlen(LL_ABSTRACT));
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHILD_CHECK(s >= 0 && connect(s, (struct sockaddr *)&sa,
				      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
						  strlen(LL_ABSTRACT))) < 0 && errno == EPERM);
	CHILD_CHECK(pthread_kill(pthread_self(), 0) == 0);
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHILD_CHECK(child > 0 && kill(child, SIGKILL) == 0 && waitpid(child, NULL, 0) == child);
}

START_TEST(test_landlock_scoped)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct child_result r;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(s, 0);
	memcpy(sa.sun_path + 1, LL_ABSTRACT, strlen(LL_ABSTRACT));
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
					  strlen(LL_ABSTRACT))), 0);
	ck_assert_int_eq(listen(s, 1), 0);
	run_child(landlocked_scope, NULL, &r);
	close(s);
	if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3) {
		fprintf(stderr, "test_landlock_scoped: skipped, Landlock before ABI 6\n");
		return;
	}
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

static void landlocked_slash(void *unused)
{
	const char *rw[] = { ll_rw };
	struct confine_fs fs = { .root = "/", .rw = rw, .n_rw = 1 };
	char err[CONFINE_ERR_LEN];
	int rc;

	(void)unused;
	rc = confine_landlock(&fs, err);
	if (rc == -EOPNOTSUPP)
		_exit(3);
	CHILD_CHECK(rc == 0);
	CHILD_CHECK(opened(open("/etc/passwd", O_RDONLY)));
	CHILD_CHECK(opened(open("/dev/null", O_WRONLY)));
	CHILD_CHECK(opened(open("/dev/zero", O_RDWR)));
	CHILD_CHECK(refused(open_in(ll_out, "file", O_WRONLY)));
	CHILD_CHECK(refused(open_in(ll_out, "new", O_CREAT | O_WRONLY)));
	CHILD_CHECK(opened(open_in(ll_rw, "new", O_CREAT | O_WRONLY | O_TRUNC)));
}

/* With the default root "/", the devices the personality allows stay writable and
 * everything outside --rw is read-only to the kernel itself. */
START_TEST(test_landlock_default_root)
{
	struct child_result r;

	run_child(landlocked_slash, NULL, &r);
	if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3)
		return;
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

static void expect_parse_error(const char *spec, int rc, const char *needle)
{
	struct confine_user u;
	char err[CONFINE_ERR_LEN] = "";

	ck_assert_int_eq(confine_user_parse(spec, &u, err), rc);
	ck_assert_msg(strstr(err, needle), "'%s': error '%s' lacks '%s'", spec, err, needle);
}

/* --user takes names or numbers, USER's own group by default; bad input is refused
 * with a message that says what was wrong and what to write. */
START_TEST(test_user_parse)
{
	struct passwd *nobody = getpwnam("nobody");
	struct confine_user u;
	char err[CONFINE_ERR_LEN], spec[64];

	ck_assert_ptr_nonnull(nobody);
	ck_assert_int_eq(confine_user_parse("nobody", &u, err), 0);
	ck_assert_uint_eq(u.uid, nobody->pw_uid);
	ck_assert_uint_eq(u.gid, nobody->pw_gid);
	ck_assert_str_eq(u.name, "nobody");
	ck_assert_int_eq(confine_user_parse("nobody:root", &u, err), 0);
	ck_assert_uint_eq(u.gid, 0);
	snprintf(spec, sizeof(spec), "%u", (unsigned)nobody->pw_uid);
	ck_assert_int_eq(confine_user_parse(spec, &u, err), 0);
	ck_assert_str_eq(u.name, "nobody");
	ck_assert_int_eq(confine_user_parse("4321:1234", &u, err), 0);
	ck_assert_uint_eq(u.uid, 4321);
	ck_assert_uint_eq(u.gid, 1234);
	ck_assert_str_eq(u.name, "");
	expect_parse_error("", -EINVAL, "USER:GROUP");
	expect_parse_error(":", -EINVAL, "USER:GROUP");
	expect_parse_error("nobody:", -EINVAL, "USER:GROUP");
	expect_parse_error(":0", -EINVAL, "USER:GROUP");
	expect_parse_error("no-such-user-ccvm", -ENOENT, "no user named 'no-such-user-ccvm'");
	expect_parse_error("nobody:no-such-group", -ENOENT, "no group named 'no-such-group'");
	expect_parse_error("4321", -EINVAL, "give --user 4321:GROUP");
	expect_parse_error("12345678901", -ENOENT, "no user named");
	memset(spec, 'a', sizeof(spec) - 1);
	spec[sizeof(spec) - 1] = '\0';
	expect_parse_error(spec, -ENOENT, "no user named");
}
END_TEST

static void dropped(void *unused)
{
	struct passwd *nobody = getpwnam("nobody");
	struct confine_user u;
	char err[CONFINE_ERR_LEN];
	uid_t r, e, s;
	gid_t groups[8];

	(void)unused;
	CHILD_CHECK(nobody && confine_user_parse("nobody", &u, err) == 0);
	CHILD_CHECK(confine_drop_user(&u, err) == 0);
	CHILD_CHECK(getresuid(&r, &e, &s) == 0);
	CHILD_CHECK(r == nobody->pw_uid && e == r && s == r);
	CHILD_CHECK(getgid() == nobody->pw_gid && getegid() == nobody->pw_gid);
	for (int i = 0, n = getgroups(8, groups); i < n; i++)
		CHILD_CHECK(groups[i] != 0);
	CHILD_CHECK(refused(open("/etc/shadow", O_RDONLY)));
	CHILD_CHECK(setuid(0) < 0 && errno == EPERM);
}

/* As root, the drop leaves the process nobody for good: real, effective and saved ids,
 * no root group, /etc/shadow unreadable, setuid(0) refused. Not root: refused. */
START_TEST(test_drop_user)
{
	struct confine_user u = { .uid = 65534, .gid = 65534 };
	struct child_result r;
	char err[CONFINE_ERR_LEN];

	if (geteuid() != 0) {
		ck_assert_int_eq(confine_drop_user(&u, err), -EPERM);
		ck_assert_msg(strstr(err, "started as root"), "%s", err);
		return;
	}
	run_child(dropped, NULL, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

/* The capability set @field ("CapEff", "CapBnd", ...) of the calling thread. */
static unsigned long long thread_caps(const char *field)
{
	char line[256];
	unsigned long long v = ~0ULL;
	size_t n = strlen(field);
	FILE *f = fopen("/proc/thread-self/status", "r");

	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 16);
	fclose(f);
	return v;
}

#define CAP_BIT(c) (1ULL << (c))
#define CAPS_CONTROL_MOST (CAP_BIT(CAP_SYS_NICE) | CAP_BIT(CAP_SYS_PTRACE))

/* What a vCPU thread of a confined root monitor has: its capabilities, and whether it
 * may read a file another user keeps to themselves. */
static void *vcpu_caps(void *file)
{
	int fd;

	role_enter(ROLE_VCPU);
	CHILD_CHECK(thread_caps("CapEff") == 0 && thread_caps("CapPrm") == 0);
	fd = open(file, O_RDONLY);
	CHILD_CHECK(fd < 0 && errno == EACCES);
	return NULL;
}

static void caps_dropped(void *file)
{
	char err[CONFINE_ERR_LEN];
	pthread_t th;

	if (confine_caps_drop(false, err)) {
		dprintf(STDERR_FILENO, "confine_caps_drop: %s\n", err);
		_exit(2);
	}
	CHILD_CHECK(prctl(PR_GET_SECUREBITS) & (1 << SECURE_NOROOT_LOCKED));
	install_filter();
	CHILD_CHECK(thread_caps("CapBnd") == 0 && thread_caps("CapAmb") == 0);
	CHILD_CHECK((thread_caps("CapEff") & ~CAPS_CONTROL_MOST) == 0);
	CHILD_CHECK(thread_caps("CapEff") & CAP_BIT(CAP_SYS_NICE));
	CHILD_CHECK(pthread_create(&th, NULL, vcpu_caps, file) == 0);
	CHILD_CHECK(pthread_join(th, NULL) == 0);
}

/* Root without --user (finding 5): the process keeps no bounding or ambient set and
 * at most CAP_SYS_NICE and CAP_SYS_PTRACE, its securebits locked; a vCPU thread has
 * CapEff 0 and cannot read a file mode 0600 of another user. */
START_TEST(test_root_caps_dropped)
{
	char file[] = "/tmp/ccvm-caps-XXXXXX";
	struct child_result r;
	int fd;

	if (geteuid() != 0) {
		fprintf(stderr, "test_root_caps_dropped: skipped, not root\n");
		return;
	}
	fd = mkstemp(file);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
	close(fd);
	run_child(caps_dropped, file, &r);
	unlink(file);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "status 0x%x, stderr: %s", r.status, r.err);
}
END_TEST

Suite *confine_suite(void)
{
	Suite *s = suite_create("confine");
	TCase *tc = tcase_create("kernel");
	TCase *ll = tcase_create("landlock");

	tcase_add_test(tc, test_seccomp_allows);
	tcase_add_test(tc, test_seccomp_denies);
	tcase_add_test(tc, test_roles_deny);
	tcase_add_test(tc, test_seccomp_bad_arch);
	tcase_add_test(tc, test_user_parse);
	tcase_add_test(tc, test_drop_user);
	tcase_add_test(tc, test_root_caps_dropped);
	tcase_add_checked_fixture(ll, ll_setup, ll_teardown);
	tcase_add_test(ll, test_landlock_root_and_rw);
	tcase_add_test(ll, test_landlock_default_root);
	tcase_add_test(ll, test_landlock_scoped);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, ll);
	return s;
}

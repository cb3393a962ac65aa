/*
 * test_control.c - the control socket's limits, against a real server (ctl_start) over
 * a real Unix socket, with a VM structure that has no KVM behind it: only the monitor's
 * user may connect, at most 16 connections, 64 KiB a request, a per-connection request
 * rate, and a client that stops reading never holds up the others.
 */
#include "suites.h"
#include "../../vmm/control.h"
#include "../../vmm/vm.h"
#include "../../vmm/linux/lx.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS   10000 /* a reply that takes this long means the server is stuck */
#define MANY      1000  /* requests sent at once to meet the rate limit */

static struct vm vm;
static struct ctl_server *srv;
static char dir[] = "/tmp/ccvm-ctl-XXXXXX", path[128];

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	memset(&vm, 0, sizeof(vm));
	pthread_mutex_init(&vm.lock, NULL);
	pthread_cond_init(&vm.cond, NULL);
	ck_assert_int_eq(ctl_start(&vm, path, NULL, NULL, NULL, &srv), 0);
}

static void teardown(void)
{
	ctl_stop(srv);
	rmdir(dir);
	strcpy(dir, "/tmp/ccvm-ctl-XXXXXX");
}

static int dial(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(sa.sun_path, path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void say(int fd, const char *s)
{
	size_t n = strlen(s), off = 0;

	while (off < n) {
		ssize_t w = write(fd, s + off, n - off);

		ck_assert_int_gt(w, 0);
		off += (size_t)w;
	}
}

/* Read one reply line into @buf; "" when the server closed the connection. */
static void hear(int fd, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	while (len < size - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "no reply within %d ms", WAIT_MS);
		n = read(fd, buf + len, 1);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (buf[len - 1] == '\n')
			break;
	}
	buf[len] = '\0';
}

/* A status request is answered. */
START_TEST(test_status)
{
	char reply[4096];
	int fd = dial();

	say(fd, "{\"cmd\":\"status\"}\n");
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "\"ok\":true"), "reply: %s", reply);
	close(fd);
}
END_TEST

/* A connection sending far more than 50 requests a second gets some refused with a
 * message, and every request gets a reply. */
START_TEST(test_rate_limit)
{
	static char burst[MANY * 20];
	char reply[4096];
	int fd = dial(), ok = 0, slow = 0;

	burst[0] = '\0';
	for (int i = 0; i < MANY; i++)
		strcat(burst, "{\"cmd\":\"status\"}\n");
	say(fd, burst);
	for (int i = 0; i < MANY; i++) {
		hear(fd, reply, sizeof(reply));
		ok += strstr(reply, "\"ok\":true") != NULL;
		slow += strstr(reply, "too many requests") != NULL;
	}
	ck_assert_int_eq(ok + slow, MANY);
	ck_assert_int_ge(ok, 100);
	ck_assert_int_gt(slow, 0);
	close(fd);
}
END_TEST

/* A client that sends requests and never reads its replies does not hold up another
 * client's reply (replies are queued, not sent with a wait). */
START_TEST(test_stuck_client)
{
	char reply[4096];
	int stuck = dial(), fd;

	for (int i = 0; i < 100; i++)
		say(stuck, "{\"cmd\":\"stats\"}\n");
	fd = dial();
	say(fd, "{\"cmd\":\"status\"}\n");
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "\"ok\":true"), "reply: %s", reply);
	close(fd);
	close(stuck);
}
END_TEST

/* The 17th connection is told why and closed; the 16 others keep working. */
START_TEST(test_connection_cap)
{
	char reply[4096];
	int fds[16], extra;

	for (int i = 0; i < 16; i++) {
		fds[i] = dial();
		say(fds[i], "{\"cmd\":\"status\"}\n");
		hear(fds[i], reply, sizeof(reply));
		ck_assert_msg(strstr(reply, "\"ok\":true"), "client %d: %s", i, reply);
	}
	extra = dial();
	hear(extra, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "too many control connections"), "reply: %s", reply);
	hear(extra, reply, sizeof(reply));
	ck_assert_str_eq(reply, "");
	say(fds[15], "{\"cmd\":\"status\"}\n");
	hear(fds[15], reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "\"ok\":true"), "reply: %s", reply);
	close(extra);
	for (int i = 0; i < 16; i++)
		close(fds[i]);
}
END_TEST

/* A request longer than 64 KiB is refused with a message and the connection closed. */
START_TEST(test_long_request)
{
	static char big[70000];
	char reply[4096];
	int fd = dial();

	memset(big, 'x', sizeof(big) - 1);
	say(fd, big);
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "request too long"), "reply: %s", reply);
	hear(fd, reply, sizeof(reply));
	ck_assert_str_eq(reply, "");
	close(fd);
}
END_TEST

/* Another user is refused without a reply, even with the socket file open to it. */
START_TEST(test_other_user_refused)
{
	int status;
	pid_t pid;

	if (geteuid() != 0)
		return; /* only root can be another user here */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(chmod(path, 0666), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		static const char req[] = "{\"cmd\":\"status\"}\n";
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct pollfd pf = { .events = POLLIN };
		char reply[64];
		int fd;

		/* Plain calls: the server may close before the request is even sent. */
		if (setgid(65534) || setuid(65534))
			_exit(2);
		strcpy(sa.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(3);
		(void)send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
		pf.fd = fd;
		if (poll(&pf, 1, WAIT_MS) != 1)
			_exit(4);
		_exit(read(fd, reply, sizeof(reply)) > 0 ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "another user was answered (status %d)", status);
}
END_TEST

/* kill: a bad SIGNAL and a VM without a process get error replies; a fatal signal,
 * taken by default (no delivery in this VM), stops it with 128 + the signal; one the
 * guest ignores does nothing. */
START_TEST(test_kill)
{
	char *argv[] = { "true", NULL }, *envp[] = { NULL };
	struct lx_config cfg = { .program = "/usr/bin/true", .argc = 1, .argv = argv,
				 .envp = envp, .root = "/" };
	struct lx_sigaction ign = { .handler = (uint64_t)(uintptr_t)SIG_IGN };
	struct lx_entry entry;
	struct gmem mem;
	char reply[4096];
	int fd = dial();

	say(fd, "{\"cmd\":\"kill\",\"args\":[\"SIGNOPE\"]}\n");
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "\"ok\":false") && strstr(reply, "SIGNAL"), "reply: %s", reply);
	say(fd, "{\"cmd\":\"kill\",\"args\":[\"TERM\"]}\n");
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "no guest process"), "reply: %s", reply);

	ck_assert_int_eq(gmem_map(&mem, 64ULL << 20), 0);
	ck_assert_int_eq(lx_proc_create(&mem, &cfg, &vm.proc, &entry), 0);
	vm.proc->sigact[SIGUSR2] = ign;
	say(fd, "{\"cmd\":\"kill\",\"args\":[\"usr2\"]}\n");
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "\"action\":\"sent\"") && strstr(reply, "SIGUSR2"), "reply: %s",
		      reply);
	ck_assert(!vm.stop_req);
	say(fd, "{\"cmd\":\"kill\",\"args\":[\"15\"]}\n");
	hear(fd, reply, sizeof(reply));
	ck_assert_msg(strstr(reply, "\"action\":\"stopped\"") && strstr(reply, "SIGTERM"),
		      "reply: %s", reply);
	/* The server stops the VM right after it replied. */
	pthread_mutex_lock(&vm.lock);
	for (int i = 0; i < WAIT_MS && !vm.stop_req; i++) {
		struct timespec ms;

		clock_gettime(CLOCK_REALTIME, &ms);
		ms.tv_nsec += 1000000;
		if (ms.tv_nsec >= 1000000000) {
			ms.tv_sec++;
			ms.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&vm.cond, &vm.lock, &ms);
	}
	pthread_mutex_unlock(&vm.lock);
	ck_assert(vm.stop_req);
	ck_assert_int_eq(vm.exit_status, 128 + SIGTERM);
	close(fd);
	lx_proc_destroy(vm.proc);
	vm.proc = NULL;
	gmem_unmap(&mem);
}
END_TEST

/* @line sent with @n copies of descriptor @fd (SCM_RIGHTS), as exec's client sends. */
static void say_fds(int sock, const char *line, int fd, int n)
{
	char ctrl[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = { .iov_base = (void *)line, .iov_len = strlen(line) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memset(ctrl, 0, sizeof(ctrl));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(cm) + (size_t)i * sizeof(int), &fd, sizeof(int));
	ck_assert_int_eq(sendmsg(sock, &mh, 0), (ssize_t)strlen(line));
}

/* exec refuses what it cannot run with a reply that says why, and lets go of the
 * descriptors that came with the request (a pipe's reader then sees its end). */
START_TEST(test_exec_refusals)
{
	static const struct {
		const char *line, *says;
		int fds;
	} cases[] = {
		{ "{\"cmd\":\"exec\",\"args\":[\"sh\"]}\n", "exactly 3 descriptors", 0 },
		{ "{\"cmd\":\"exec\",\"args\":[\"sh\"]}\n", "too many", 4 },
		{ "{\"cmd\":\"exec\",\"args\":[\"sh\"],\"cwd\":\"rel\"}\n", "absolute path", 3 },
		{ "{\"cmd\":\"exec\",\"args\":[]}\n", "name the program", 3 },
		{ "{\"cmd\":\"exec\",\"args\":\"sh\"}\n", "array of strings", 3 },
		{ "{\"cmd\":\"exec\",\"args\":[\"sh\",7]}\n", "args[1]", 3 },
		{ "{\"cmd\":\"exec\",\"args\":[\"sh\"],\"env\":[\"NOEQ\"]}\n", "NAME=VALUE", 3 },
		{ "{\"cmd\":\"exec\",\"args\":[\"sh\"]}\n", "has stopped", 3 },
		{ "{\"cmd\":\"kill\",\"args\":[\"TERM\"],\"pid\":12}\n", "no such guest process", 0 },
		{ "{\"cmd\":\"kill\",\"args\":[\"TERM\"],\"pid\":\"x\"}\n", "guest pid", 0 },
	};
	char reply[4096], b;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = dial(), p[2];

		ck_assert_int_eq(pipe(p), 0);
		if (cases[i].fds)
			say_fds(fd, cases[i].line, p[1], cases[i].fds);
		else
			say(fd, cases[i].line);
		hear(fd, reply, sizeof(reply));
		ck_assert_msg(strstr(reply, "\"ok\":false") && strstr(reply, cases[i].says),
			      "case %zu: reply: %s", i, reply);
		close(p[1]);
		ck_assert_msg(read(p[0], &b, 1) == 0, "case %zu: the server kept a descriptor", i);
		close(p[0]);
		close(fd);
	}
}
END_TEST

/* Issue 54 finding 6: the control socket is bound (0600) and the snapshot log opened
 * (0600, appending) before confinement; when the monitor's end of the janitor's pipe
 * closes, the janitor removes the socket file, but never a file put in its place; a
 * log that is not a regular file fails the preparation and leaves nothing behind. */
START_TEST(test_prepare_and_janitor)
{
	char sock[192], log[192];
	struct ctl_prep p;
	struct stat st;
	int fd;

	snprintf(sock, sizeof(sock), "%s/prep.sock", dir);
	snprintf(log, sizeof(log), "%s/s.log", dir);
	ck_assert_int_eq(ctl_prepare(sock, log, &p), 0);
	ck_assert(p.listen_fd >= 0 && p.log_fd >= 0 && p.janitor >= 0);
	ck_assert_int_eq(lstat(sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
	ck_assert_int_eq(lstat(log, &st), 0);
	ck_assert(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	ctl_prep_release(&p);
	ck_assert_int_gt(waitpid(-1, NULL, 0), 0); /* the janitor, done */
	ck_assert_msg(access(sock, F_OK) < 0, "the janitor left the socket file");

	ck_assert_int_eq(ctl_prepare(sock, NULL, &p), 0);
	ck_assert_int_eq(unlink(sock), 0);
	fd = open(sock, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ctl_prep_release(&p);
	ck_assert_int_gt(waitpid(-1, NULL, 0), 0);
	ck_assert_msg(access(sock, F_OK) == 0, "the janitor removed a file that is not its socket");
	ck_assert_int_eq(unlink(sock), 0);

	ck_assert_int_eq(unlink(log), 0);
	ck_assert_int_eq(mkdir(log, 0700), 0);
	ck_assert_int_eq(ctl_prepare(sock, log, &p), -EINVAL);
	ck_assert(p.listen_fd < 0 && p.log_fd < 0 && p.janitor < 0);
	ck_assert_msg(access(sock, F_OK) < 0, "a failed preparation left a socket");
	ck_assert_int_eq(rmdir(log), 0);
}
END_TEST

Suite *control_suite(void)
{
	Suite *s = suite_create("control");
	TCase *tc = tcase_create("limits");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_rate_limit);
	tcase_add_test(tc, test_stuck_client);
	tcase_add_test(tc, test_connection_cap);
	tcase_add_test(tc, test_long_request);
	tcase_add_test(tc, test_other_user_refused);
	tcase_add_test(tc, test_kill);
	tcase_add_test(tc, test_exec_refusals);
	tcase_add_test(tc, test_prepare_and_janitor);
	suite_add_tcase(s, tc);
	return s;
}

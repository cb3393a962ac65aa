/*
 * control_client.c - `ccvm ctl`: one request to a running ccvm's control socket, its
 * reply line printed; for `events`, the lines that follow until the monitor closes.
 */
#include "control_impl.h"
#include "../base/log.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The monitor runs in another directory: a relative snapshot FILE means the
 * caller's directory. */
static void ctl_absolute_file(json_t *req)
{
	json_t *args = json_object_get(req, "args");
	const char *f = json_string_value(json_array_get(args, 0));
	char cwd[PATH_MAX], *abs;

	if (!f || f[0] == '/' || strcmp(json_string_value(json_object_get(req, "cmd")), "snapshot"))
		return;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, f) < 0)
		return;
	json_array_set_new(args, 0, json_string(abs));
	free(abs);
}

/* `migrate ... --tls-creds DIR`: DIR's client files read here, by the caller, and sent as
 * their texts: the confined monitor opens no directory, and never this one. 0, or -errno
 * said. */
static int ctl_tls_creds(json_t *req)
{
	const json_t *dir = json_object_get(req, "tls-creds");
	struct tls_creds c;
	char err[512];
	json_t *texts;
	int rc;

	if (!dir || strcmp(json_string_value(json_object_get(req, "cmd")), "migrate"))
		return 0;
	if (!json_is_string(dir)) {
		log_err("ctl: --tls-creds DIR");
		return -EINVAL;
	}
	rc = tls_creds_read(json_string_value(dir), TLS_CLIENT, &c, err, sizeof(err));
	if (!rc)
		rc = tls_creds_check(&c, TLS_CLIENT, err, sizeof(err));
	if (rc) {
		log_err("ctl: %s", err);
		tls_creds_free(&c);
		return rc;
	}
	texts = c.psk ? json_pack("{s:s}", "psk", c.psk) :
			json_pack("{s:s, s:s, s:s}", "ca-cert", c.ca, "client-cert", c.cert,
				  "client-key", c.key);
	tls_creds_free(&c);
	if (!texts)
		return -ENOMEM;
	json_object_set_new(req, "tls-creds", texts);
	return 0;
}

/* `events`: every line the monitor sends after the reply, as it comes, until it closes
 * the connection (the VM ended, or moved away). */
static void ctl_follow(int fd)
{
	char more[CTL_MAX_LINE];
	ssize_t n;

	fflush(stdout);
	while ((n = read(fd, more, sizeof(more))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0 && (fwrite(more, 1, (size_t)n, stdout) != (size_t)n || fflush(stdout)))
			return;
}

/* Connect to @path and send @line; the connection, or -1 (reported). */
static int ctl_connect_send(const char *path, const char *line)
{
	struct sockaddr_un sa;
	int fd;

	if (ctl_sockaddr(path, &sa))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_err("ctl: cannot connect to %s: %s (is a VM running with --control %s?)", path,
			strerror(errno), path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (dprintf(fd, "%s\n", line) < 0) {
		log_err("ctl: sending to %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The reply line into @reply (CTL_MAX_LINE bytes): its length, 0 when none came. */
static size_t ctl_read_reply(int fd, char *reply)
{
	size_t len = 0;

	while (len < CTL_MAX_LINE - 1) {
		ssize_t n = read(fd, reply + len, CTL_MAX_LINE - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(reply, '\n', len))
			break;
	}
	reply[len] = '\0';
	return len;
}

int ctl_call(const char *path, const char *cmd, int argc, char *const *argv, char *reply,
	     int *keep)
{
	char err[256];
	json_t *req, *msg;
	char *line;
	size_t len;
	int fd, ok;

	req = ctl_request_from_argv(cmd, argc, argv, err, sizeof(err));
	if (!req) {
		log_err("ctl: %s", err);
		return 2;
	}
	ctl_absolute_file(req);
	if (ctl_tls_creds(req)) {
		json_decref(req);
		return 2;
	}
	line = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	fd = line ? ctl_connect_send(path, line) : -1;
	free(line);
	if (fd < 0)
		return 1;
	len = ctl_read_reply(fd, reply);
	if (!len) {
		log_err("ctl: %s closed the connection without a reply", path);
		close(fd);
		return 1;
	}
	msg = json_loads(reply, JSON_DISABLE_EOF_CHECK, NULL);
	ok = json_is_true(json_object_get(msg, "ok"));
	json_decref(msg);
	if (keep)
		*keep = fd;
	else
		close(fd);
	return ok ? 0 : 1;
}

static int ctl_exec_client(const char *path, int argc, char *const *argv);

int ctl_client(const char *path, const char *cmd, int argc, char *const *argv)
{
	char reply[CTL_MAX_LINE];
	int fd = -1, rc;

	if (strcmp(cmd, "exec") == 0)
		return ctl_exec_client(path, argc, argv);
	rc = ctl_call(path, cmd, argc, argv, reply, &fd);

	if (fd < 0)
		return rc;
	fputs(reply, stdout);
	if (reply[strlen(reply) - 1] != '\n')
		fputc('\n', stdout);
	if (rc == 0 && strcmp(cmd, "events") == 0)
		ctl_follow(fd); /* (what came with the reply is printed) */
	close(fd);
	return rc;
}

/* ---- exec's client (ccvm-oci exec) ---- */

/* One line from @fd into @buf (@cap bytes), read a byte at a time so that nothing
 * after it is taken: its length, 0 at the end of the stream, -errno. */
static ssize_t ctl_read_line(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0 || buf[len] == '\n')
			break;
		len++;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

/* @line and descriptors @fds in one message, as the server takes them together. */
static int ctl_send_fds(int fd, const char *line, const int fds[3])
{
	char ctrl[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
	struct iovec iov = { .iov_base = (void *)line, .iov_len = strlen(line) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memset(ctrl, 0, sizeof(ctrl));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * CTL_MAX_FDS);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * CTL_MAX_FDS);
	while (iov.iov_len) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		iov.iov_base = (char *)iov.iov_base + n;
		iov.iov_len -= (size_t)n;
		mh.msg_control = NULL; /* the descriptors went with the first bytes */
		mh.msg_controllen = 0;
	}
	return 0;
}

int ctl_exec_start(const char *path, json_t *req, const int fds[3], int *pid, int *conn,
		   char *err, size_t len)
{
	char *text = json_dumps(req, JSON_COMPACT), *line = NULL, reply[CTL_MAX_LINE];
	struct sockaddr_un sa;
	json_t *msg = NULL;
	int fd = -1, rc = 1;

	if (!text || asprintf(&line, "%s\n", text) < 0)
		line = NULL;
	free(text);
	if (!line || ctl_sockaddr(path, &sa) ||
	    (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(err, len, "cannot reach the VM at %s: %s", path, strerror(errno));
		goto out;
	}
	if (ctl_send_fds(fd, line, fds) || ctl_read_line(fd, reply, sizeof(reply)) <= 0) {
		snprintf(err, len, "the VM at %s did not answer", path);
		goto out;
	}
	msg = json_loads(reply, 0, NULL);
	if (!json_is_true(json_object_get(msg, "ok"))) {
		const char *why = json_string_value(json_object_get(msg, "error"));

		snprintf(err, len, "%s", why ? why : reply);
		goto out;
	}
	*pid = (int)json_integer_value(json_object_get(msg, "pid"));
	*conn = fd;
	fd = -1;
	rc = 0;
out:
	json_decref(msg);
	free(line);
	if (fd >= 0)
		close(fd);
	return rc;
}

int ctl_exec_wait(int conn, int *status)
{
	char line[CTL_MAX_LINE];

	for (;;) {
		ssize_t n = ctl_read_line(conn, line, sizeof(line));
		json_t *msg;
		const char *ev;

		if (n <= 0)
			return -EPIPE;
		msg = json_loads(line, 0, NULL);
		ev = json_string_value(json_object_get(msg, "event"));
		if (ev && strcmp(ev, "exit") == 0) {
			*status = (int)json_integer_value(json_object_get(msg, "status"));
			json_decref(msg);
			return 0;
		}
		json_decref(msg); /* any other line is not this connection's business */
	}
}

/* `ccvm ctl PATH exec [--cwd DIR] [--env NAME=VALUE]... [--] PROGRAM [ARG...]`: the
 * request built from the words (the program's own may start with dashes after the
 * first word that is not an option), or NULL said. */
static json_t *ctl_exec_request(int argc, char *const *argv)
{
	json_t *req = json_pack("{s:s, s:[], s:[]}", "cmd", "exec", "args", "env");
	int i = 0;

	for (; req && i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "--cwd") != 0 && strcmp(argv[i], "--env") != 0)
			break;
		if (i + 1 == argc) {
			log_err("ctl exec: %s needs a value", argv[i]);
			json_decref(req);
			return NULL;
		}
		if (strcmp(argv[i], "--cwd") == 0)
			json_object_set_new(req, "cwd", json_string(argv[++i]));
		else
			json_array_append_new(json_object_get(req, "env"), json_string(argv[++i]));
	}
	for (; req && i < argc; i++)
		json_array_append_new(json_object_get(req, "args"), json_string(argv[i]));
	if (req && !json_array_size(json_object_get(req, "args"))) {
		log_err("usage: ccvm ctl PATH exec [--cwd DIR] [--env NAME=VALUE]... [--] PROGRAM "
			"[ARG...]");
		json_decref(req);
		return NULL;
	}
	return req;
}

/* The program run in the VM with this command's stdin, stdout and stderr; its exit
 * status is this command's (128 + the signal that ended it). */
static int ctl_exec_client(const char *path, int argc, char *const *argv)
{
	json_t *req = ctl_exec_request(argc, argv);
	int fds[3] = { 0, 1, 2 }, pid, conn, status;
	char err[CTL_MAX_LINE];

	if (!req)
		return 2;
	if (ctl_exec_start(path, req, fds, &pid, &conn, err, sizeof(err))) {
		log_err("ctl: %s", err);
		json_decref(req);
		return 1;
	}
	json_decref(req);
	if (ctl_exec_wait(conn, &status)) {
		log_err("ctl exec: the VM ended before process %d did", pid);
		status = 128 + SIGKILL;
	}
	close(conn);
	return status;
}

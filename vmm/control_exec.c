/*
 * control_exec.c - `exec` on the control socket: a program started in the running VM
 * from outside it, as a container runtime's exec asks (ccvm-oci exec).
 *
 * The request names the program and its arguments ("args"), its environment ("env",
 * NAME=VALUE strings) and working directory ("cwd", a guest path); its stdin, stdout
 * and stderr come with the request as descriptors (SCM_RIGHTS), exactly three. All of
 * it is checked in monitor memory before the VM is asked (vm_spawn). The reply gives
 * the guest pid at once; the connection then waits for the process's end, sent to
 * that client alone as an "exit" line with the status a shell would report. A client
 * that goes away first takes its process with it (SIGKILL): the connection is the
 * process's handle, as a runtime's exec process is the container process, and nothing
 * started from outside runs on unwatched.
 */
#include "control_impl.h"
#include "../base/log.h"
#include "vm.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXEC_MAX_STRINGS 4096 /* args or env entries: far above any real command */

/* The strings of array @key of @msg, borrowed, NULL-ended, into *@out (freed by the
 * caller): the count, or -1 with @err set. @need_eq: each must be NAME=VALUE. */
static int exec_strings(const json_t *msg, const char *key, bool need_eq, char ***out,
			char *err, size_t len)
{
	const json_t *a = json_object_get(msg, key), *v;
	size_t i, n = json_array_size(a);

	*out = NULL;
	if (a && !json_is_array(a))
		return snprintf(err, len, "exec: \"%s\" must be an array of strings", key), -1;
	if (n > EXEC_MAX_STRINGS)
		return snprintf(err, len, "exec: \"%s\" has %zu entries (at most %d)", key, n,
				EXEC_MAX_STRINGS), -1;
	*out = calloc(n + 1, sizeof(**out));
	if (!*out)
		return snprintf(err, len, "exec: out of memory"), -1;
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(v);

		if (!s || (need_eq && (!strchr(s, '=') || s[0] == '=')))
			return snprintf(err, len, "exec: %s[%zu] must be a %s", key, i,
					need_eq ? "NAME=VALUE string" : "string"), -1;
		(*out)[i] = (char *)s;
	}
	return (int)n;
}

/* Why vm_spawn refused, for the reply. */
static void exec_why(int rc, const char *prog, const char *cwd, char *err, size_t len)
{
	switch (rc) {
	case -ENOENT:
		snprintf(err, len, "exec: cannot run '%s': no such file in the guest's root "
			 "(a bare name is looked up in PATH)", prog);
		break;
	case -ENOTDIR:
		snprintf(err, len, "exec: cwd %s: no such directory in the guest's root", cwd);
		break;
	case -EAGAIN:
		snprintf(err, len, "exec: the VM already runs as many processes (--max-procs) "
			 "or threads (--vcpus) as it may");
		break;
	case -ESRCH:
		snprintf(err, len, "exec: the VM has stopped");
		break;
	default:
		snprintf(err, len, "exec: cannot run '%s': %s", prog, strerror(-rc));
	}
}

/* The descriptors @c sent, closed. */
static void exec_close_fds(struct ctl_client *c)
{
	for (int i = 0; i < c->n_fds; i++)
		close(c->fds[i]);
	c->n_fds = 0;
	c->fds_bad = false;
}

/* The request checked and run: 0 with *@pid, or -1 with @err set. */
static int exec_run(struct ctl_server *srv, struct ctl_client *c, const json_t *msg, int *pid,
		    char *err, size_t len)
{
	const json_t *jcwd = json_object_get(msg, "cwd");
	const char *cwd = jcwd ? json_string_value(jcwd) : "/";
	struct vm_spawn s = { .cwd = cwd };
	char **argv = NULL, **envp = NULL;
	int rc = -1, argc = 0;

	if (c->fds_bad || c->n_fds != CTL_MAX_FDS)
		snprintf(err, len, "exec: send exactly 3 descriptors (stdin, stdout, stderr) "
			 "with the request (SCM_RIGHTS); %d came%s", c->n_fds,
			 c->fds_bad ? ", some cut short or too many" : "");
	else if (!cwd || cwd[0] != '/' || strlen(cwd) >= PATH_MAX)
		snprintf(err, len, "exec: \"cwd\" must be an absolute path");
	else if (srv->user_paused)
		snprintf(err, len, "exec: the VM is paused; resume it first");
	else if (c->exec_pid)
		snprintf(err, len, "exec: this connection already waits for process %d",
			 c->exec_pid);
	else if ((argc = exec_strings(msg, "args", false, &argv, err, len)) == 0)
		snprintf(err, len, "exec: \"args\" must name the program");
	else if (argc > 0 && exec_strings(msg, "env", true, &envp, err, len) >= 0)
		rc = 0;
	if (!rc) {
		s.argv = argv;
		s.argc = argc;
		s.envp = envp;
		memcpy(s.fds, c->fds, sizeof(s.fds));
		rc = vm_spawn(srv->vm, &s, pid);
		if (rc)
			exec_why(rc, argv[0], cwd, err, len);
	}
	free(argv);
	free(envp);
	exec_close_fds(c); /* one request's: the process has its own copies */
	return rc ? -1 : 0;
}

char *ctl_exec(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req)
{
	char err[PATH_MAX + 128];
	int pid;

	if (exec_run(srv, c, req->msg, &pid, err, sizeof(err)))
		return ctl_reply_error(err);
	c->exec_pid = pid;
	log_info("exec: guest process %d started", pid);
	return ctl_reply_ok(json_pack("{s:i}", "pid", pid));
}

void ctl_exec_take_fds(struct ctl_client *c, struct msghdr *mh)
{
	if (mh->msg_flags & MSG_CTRUNC)
		c->fds_bad = true;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t n;
		int fd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (c->n_fds < CTL_MAX_FDS) {
				c->fds[c->n_fds++] = fd;
			} else {
				close(fd);
				c->fds_bad = true;
			}
		}
	}
}

void ctl_exec_ended(void *arg, int pid, int wstatus)
{
	struct ctl_server *srv = arg;
	struct ctl_exit *e = malloc(sizeof(*e));

	if (!e) {
		log_warn("exec: process %d ended, but its status cannot be kept (out of memory)",
			 pid);
		return;
	}
	*e = (struct ctl_exit){ .pid = pid, .wstatus = wstatus };
	pthread_mutex_lock(&srv->exits_lock);
	e->next = srv->exits;
	srv->exits = e;
	pthread_mutex_unlock(&srv->exits_lock);
	if (write(srv->wake[1], "x", 1) < 0)
		log_warn("exec: cannot signal the end of process %d", pid);
}

/* The exit line for a process that ended with @wstatus: the status a shell reports
 * (128 + the signal for one killed), and the signal. */
static char *exec_exit_line(int pid, int wstatus)
{
	int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
	int status = sig ? 128 + sig : WEXITSTATUS(wstatus);

	return ctl_line(json_pack("{s:s, s:i, s:i, s:i}", "event", "exit", "pid", pid, "status",
				  status, "signal", sig));
}

void ctl_deliver_exits(struct ctl_server *srv)
{
	struct ctl_exit *e;

	pthread_mutex_lock(&srv->exits_lock);
	e = srv->exits;
	srv->exits = NULL;
	pthread_mutex_unlock(&srv->exits_lock);
	while (e) {
		struct ctl_exit *next = e->next;

		for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
			struct ctl_client *c = srv->clients[i];

			if (c && c->fd >= 0 && c->exec_pid == e->pid) {
				ctl_send(c, exec_exit_line(e->pid, e->wstatus));
				c->exec_pid = 0;
			}
		}
		log_info("exec: guest process %d ended (wait status %#x)", e->pid, e->wstatus);
		free(e);
		e = next;
	}
}

void ctl_exec_drop(struct ctl_server *srv, struct ctl_client *c)
{
	exec_close_fds(c);
	if (!c->exec_pid)
		return;
	/* Its end may be queued already: then there is no such process any more. */
	if (vm_spawn_signal(srv->vm, c->exec_pid, SIGKILL) == 0)
		log_info("exec: the client of process %d went away; process killed", c->exec_pid);
	c->exec_pid = 0;
}

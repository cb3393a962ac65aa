/*
 * cmd_exec.c - exec: a process started in a running container, as conmon and
 * containerd's shim ask runc (`exec --process FILE --detach --pid-file F ID`), or as a
 * person types it (`exec [--env N=V]... [--cwd DIR] [--tty] ID COMMAND [ARG...]`).
 *
 * The process is the VM's: the monitor starts it through its control socket's exec
 * (vmm/control_exec.c), in the container's root, with the caller's stdin, stdout and
 * stderr (or a terminal). ccvm-oci leaves behind a host process that stands for it,
 * as runc's exec leaves the container process itself: it holds the connection the
 * process's end comes on, passes on to it the signals it is sent, and exits with its
 * status, so conmon and the shim, which wait for the pid in --pid-file, see what they
 * would see under runc. With --detach the command returns once the process runs;
 * without, it waits and exits with the process's status.
 *
 * The description is checked as create checks config.json's process, and what ccvm
 * cannot honour is refused by field: a user other than the container's (every process
 * of a container runs as its monitor's user), limits other than the container's (its
 * processes share them), descriptors beyond the standard three. Capabilities and
 * no-new-privileges are accepted as they come: the guest's calls are the
 * personality's, and no capability of the host reaches them.
 */
#include "cmd.h"

#include "config.h"
#include "init.h"
#include "../base/log.h"
#include "../vmm/control.h"
#include "../vmm/ctl_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXEC_MAX_ENV     OCI_MAX_LIST
#define EXEC_GONE_STATUS (128 + SIGKILL) /* the VM ended under the process: killed with it */

/* Signals the standing process passes on to the guest process. */
static const int exec_fwd_sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 };

struct exec_args {
	const char *process, *console, *cwd, *user, *pid_file, *preserve, *label, *apparmor;
	const char *gids, *cgroup;
	bool detach, tty, no_new_privs, ignore_paused;
	const char *env[EXEC_MAX_ENV];
	int n_env;
};

/* Every --env/-e value (oci_flags keeps one value per flag): 0, or 1 said. */
static int exec_env_flags(int argc, char **argv, struct exec_args *a)
{
	for (int i = 0; i < argc && argv[i][0] == '-'; i++) {
		const char *f = argv[i] + (argv[i][1] == '-' ? 2 : 1), *v = NULL;

		if (strcmp(f, "env") == 0 || strcmp(f, "e") == 0)
			v = i + 1 < argc ? argv[++i] : NULL;
		else if (strncmp(f, "env=", 4) == 0 || strncmp(f, "e=", 2) == 0)
			v = strchr(f, '=') + 1;
		else
			continue;
		if (!v || a->n_env == EXEC_MAX_ENV) {
			log_err("exec: --env needs NAME=VALUE (at most %d)", EXEC_MAX_ENV);
			return 1;
		}
		a->env[a->n_env++] = v;
	}
	return 0;
}

/* Flags up to the ID: its index in @argv, or -1 said. */
static int exec_parse(int argc, char **argv, struct exec_args *a)
{
	const char *env_last = NULL;
	const struct oci_flag flags[] = {
		{ "process", "p", &a->process, NULL },       { "console-socket", NULL, &a->console, NULL },
		{ "cwd", NULL, &a->cwd, NULL },              { "env", "e", &env_last, NULL },
		{ "tty", "t", NULL, &a->tty },               { "user", "u", &a->user, NULL },
		{ "detach", "d", NULL, &a->detach },         { "pid-file", NULL, &a->pid_file, NULL },
		{ "preserve-fds", NULL, &a->preserve, NULL }, { "no-new-privs", NULL, NULL, &a->no_new_privs },
		{ "process-label", NULL, &a->label, NULL },  { "apparmor", NULL, &a->apparmor, NULL },
		{ "additional-gids", "g", &a->gids, NULL },  { "cgroup", NULL, &a->cgroup, NULL },
		{ "ignore-paused", NULL, NULL, &a->ignore_paused },
		{ NULL, NULL, NULL, NULL },
	};
	int i = exec_env_flags(argc, argv, a) ? -1 : oci_flags_prefix("exec", argc, argv, flags);

	if (i < 0)
		return -1;
	if (i >= argc) {
		log_err("usage: ccvm-oci exec [--process FILE | --env N=V... --cwd DIR --tty] "
			"[--detach] [--pid-file F] [--console-socket S] ID [COMMAND [ARG...]]");
		return -1;
	}
	return i;
}

/* Flags ccvm cannot honour, refused by name; those that change nothing accepted. */
static int exec_refusals(const struct exec_args *a)
{
	const char *what = NULL;

	if (a->preserve && strcmp(a->preserve, "0") != 0)
		what = "--preserve-fds: only the standard streams reach a guest process";
	else if ((a->label && a->label[0]) || (a->apparmor && a->apparmor[0]))
		what = "--process-label/--apparmor: the guest's calls are the personality's, "
		       "under the monitor's own confinement";
	else if (a->gids && a->gids[0])
		what = "--additional-gids: every process of a container runs as its monitor's user";
	else if (a->cgroup && a->cgroup[0])
		what = "--cgroup: the whole VM is in the container's cgroup";
	if (what)
		log_err("exec: %s", what);
	return what ? 1 : 0;
}

/* --user UID[:GID] (numbers, as runc takes them without a passwd lookup) into @p:
 * 0, or 1 said. */
static int exec_user(const char *user, struct oci_config *p)
{
	unsigned long uid, gid = p->gid;
	char *end;

	errno = 0;
	uid = strtoul(user, &end, 10);
	if (*end == ':')
		gid = strtoul(end + 1, &end, 10);
	if (errno || *end || end == user || uid >= UINT32_MAX || gid >= UINT32_MAX) {
		log_err("exec: --user %s: give UID[:GID] as numbers", user);
		return 1;
	}
	p->uid = (uint32_t)uid;
	p->gid = (uint32_t)gid;
	return 0;
}

/* @p: the process from --process, or from the container's own with the command line's
 * changes. 0, or 1 said. */
static int exec_process(const struct exec_args *a, const struct oci_config *ctr, int argc,
			char **cmd, struct oci_config *p)
{
	char err[PATH_MAX + 256];

	if (a->process) {
		if (oci_process_load(a->process, p, err, sizeof(err))) {
			log_err("exec: %s", err);
			return 1;
		}
		return 0;
	}
	memset(p, 0, sizeof(*p));
	if (argc < 1) {
		log_err("exec: give the COMMAND to run, or --process FILE");
		return 1;
	}
	p->args = cmd;
	p->n_args = (size_t)argc;
	p->uid = ctr->uid;
	p->gid = ctr->gid;
	p->terminal = a->tty;
	p->rlimits = ctr->rlimits;
	if (a->user && exec_user(a->user, p))
		return 1;
	return 0;
}

/* A process the container's monitor can run as @p asks, or 1 said. */
static int exec_check(const struct oci_config *p, const struct oci_config *ctr,
		      const struct exec_args *a)
{
	if (p->uid != ctr->uid || p->gid != ctr->gid) {
		log_err("exec: process.user %u:%u: every process of a container runs as its "
			"monitor's user, here %u:%u", p->uid, p->gid, ctr->uid, ctr->gid);
		return 1;
	}
	/* none asked: the container's apply, as they do anyway */
	if (a->process && p->rlimits.set && memcmp(&p->rlimits, &ctr->rlimits, sizeof(p->rlimits))) {
		log_err("exec: process.rlimits: the container's processes share its limits "
			"(config.json's process.rlimits); an exec cannot ask others");
		return 1;
	}
	if (p->terminal && !a->console) {
		log_err("exec: process.terminal: exec needs --console-socket");
		return 1;
	}
	return 0;
}

/* The control socket's exec request: args; env, the container's overlaid by the
 * command line's --env (or the process file's alone); cwd. */
static json_t *exec_request(const struct exec_args *a, const struct oci_config *p,
			    const struct oci_config *ctr)
{
	json_t *req = json_pack("{s:s, s:[], s:[], s:s}", "cmd", "exec", "args", "env", "cwd",
				a->cwd ? a->cwd : p->cwd ? p->cwd : ctr->cwd ? ctr->cwd : "/");
	json_t *args = json_object_get(req, "args"), *env = json_object_get(req, "env");
	const struct oci_config *base = a->process ? p : ctr;

	for (size_t i = 0; req && i < p->n_args; i++)
		json_array_append_new(args, json_string(p->args[i]));
	for (size_t i = 0; req && i < base->n_env; i++)
		json_array_append_new(env, json_string(base->env[i]));
	for (int i = 0; req && i < a->n_env; i++)
		json_array_append_new(env, json_string(a->env[i]));
	return req;
}

/* What the standing process sends to the guest process: each signal it gets. */
static void exec_forward(const char *sock, int sfd, int pid)
{
	struct signalfd_siginfo si;
	char sig[16], num[16], reply[CTL_MAX_LINE];
	char *argv[] = { sig, (char *)"--pid", num };

	if (read(sfd, &si, sizeof(si)) != sizeof(si))
		return;
	snprintf(sig, sizeof(sig), "%u", si.ssi_signo);
	snprintf(num, sizeof(num), "%d", pid);
	if (ctl_call(sock, "kill", 3, argv, reply, NULL))
		log_warn("exec: signal %u not passed on to process %d", si.ssi_signo, pid);
}

/* The standing process, once the guest process runs: wait for its end on @conn,
 * passing signals on; its status. */
static int exec_stand(const char *sock, int conn, int pid)
{
	sigset_t set;
	int sfd, status = EXEC_GONE_STATUS;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(exec_fwd_sigs) / sizeof(exec_fwd_sigs[0]); i++)
		sigaddset(&set, exec_fwd_sigs[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	for (;;) {
		struct pollfd pf[2] = { { .fd = conn, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };

		if (poll(pf, sfd >= 0 ? 2 : 1, -1) < 0)
			continue;
		if (sfd >= 0 && pf[1].revents)
			exec_forward(sock, sfd, pid);
		if (pf[0].revents) {
			if (ctl_exec_wait(conn, &status))
				status = EXEC_GONE_STATUS;
			break;
		}
	}
	if (sfd >= 0)
		close(sfd);
	close(conn);
	return status;
}

/* In the standing process: the terminal if asked, the guest process started, its
 * pid or why not to @report, then the wait. Its exit status. */
static int exec_child(const char *sock, json_t *req, const struct exec_args *a, bool tty,
		      int report)
{
	char err[PATH_MAX + 256] = "";
	int fds[3] = { 0, 1, 2 }, pid = 0, conn = -1, null;

	if (tty && (setsid() < 0 || oci_terminal(a->console, err, sizeof(err))))
		goto fail;
	if (ctl_exec_start(sock, req, fds, &pid, &conn, err, sizeof(err)))
		goto fail;
	if (write(report, "", 1) != 1)
		log_warn("exec: cannot tell the caller the process runs");
	close(report);
	/* The process has its own copies: its output ends when it ends, not when this
	 * process does. */
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; null >= 0 && fd < 3; fd++)
		dup2(null, fd);
	if (null > 2)
		close(null);
	return exec_stand(sock, conn, pid);
fail:
	if (!err[0])
		snprintf(err, sizeof(err), "%s", strerror(errno));
	if (write(report, err, strlen(err)) < 0)
		log_err("exec: %s", err);
	close(report);
	return 1;
}

/* The caller's side: the standing process forked; once it says the guest process runs,
 * its pid into --pid-file, and with --detach return, else wait for it. */
static int exec_spawn(const char *sock, json_t *req, const struct exec_args *a, bool tty)
{
	char msg[PATH_MAX + 256], text[24];
	int pfd[2], status;
	ssize_t n;
	pid_t child;

	if (pipe2(pfd, O_CLOEXEC)) {
		log_err("exec: pipe: %s", strerror(errno));
		return 1;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		log_err("exec: fork: %s", strerror(errno));
		return 1;
	}
	if (child == 0) {
		close(pfd[0]);
		return exec_child(sock, req, a, tty, pfd[1]);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], msg, sizeof(msg) - 1)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (n != 1) {
		msg[n > 0 ? n : 0] = '\0';
		log_err("%s", n > 0 ? msg : "exec: the process standing for it ended first");
		waitpid(child, NULL, 0);
		return 1;
	}
	snprintf(text, sizeof(text), "%d", (int)child);
	if (a->pid_file && oci_write_file(a->pid_file, text, strlen(text), 0644)) {
		log_err("exec: --pid-file %s: %s", a->pid_file, strerror(errno));
		kill(child, SIGTERM); /* passed on: the guest process ends too */
		waitpid(child, NULL, 0);
		return 1;
	}
	if (a->detach)
		return 0;
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int oci_cmd_exec(const struct oci_global *g, int argc, char **argv)
{
	struct exec_args a = { .process = NULL };
	struct oci_config ctr, p = { .doc = NULL };
	char err[PATH_MAX + 256], sock[PATH_MAX + 16];
	struct oci_state st;
	json_t *req = NULL;
	int i = exec_parse(argc, argv, &a), rc = 1;
	enum oci_status s;

	if (i < 0 || exec_refusals(&a) || oci_load(g, argv[i], &st))
		return 1;
	s = oci_state_status(&st);
	if (s != OCI_RUNNING) {
		log_err("exec: container %s is %s; it must be running", st.id, oci_status_name(s));
		goto out_state;
	}
	if (oci_config_load(st.bundle, &ctr, err, sizeof(err))) {
		log_err("exec: container %s: %s", st.id, err);
		goto out_state;
	}
	if (exec_process(&a, &ctr, argc - i - 1, argv + i + 1, &p) || exec_check(&p, &ctr, &a))
		goto out_ctr;
	req = exec_request(&a, &p, &ctr);
	snprintf(sock, sizeof(sock), "%s/%s", st.dir, OCI_CTL_FILE);
	if (req)
		rc = exec_spawn(sock, req, &a, p.terminal);
	json_decref(req);
	if (a.process)
		oci_config_free(&p);
out_ctr:
	oci_config_free(&ctr);
out_state:
	oci_state_free(&st);
	return rc;
}

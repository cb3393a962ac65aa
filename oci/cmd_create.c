/*
 * cmd_create.c - `ccvm-oci create`: check the bundle, record the container, leave its
 * process behind, waiting for start.
 *
 * Everything that can be refused is refused before anything exists: the config is
 * read and checked whole, the command line the process will become is built once as
 * a trial, a systemd cgroup path is refused. Only then are the record, the start FIFO
 * and the process made; if the process cannot set itself up, it says why through a
 * pipe and create removes all of it again, so a refusal leaves nothing behind.
 */
#include "cmd.h"

#include "cgroup.h"
#include "config.h"
#include "init.h"
#include "../base/log.h"
#include "../vmm/linux/sysfilter.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The config checked whole, and the command line built once, before anything is made. */
static int create_check(const struct oci_global *g, const struct oci_create_args *a,
			struct oci_config *c)
{
	char err[PATH_MAX + 256];
	struct oci_rw none = { 0 };
	char **argv = NULL;

	if (oci_config_load(a->bundle, c, err, sizeof(err))) {
		log_err("%s", err);
		return 1;
	}
	if (c->seccomp) {
		struct lx_filter f;

		if (lx_filter_parse(c->seccomp, &f, err, sizeof(err))) {
			log_err("config.json: %s", err);
			goto fail;
		}
		lx_filter_free(&f);
	}
	if (oci_run_argv(c, &none, "-", NULL, false, &argv, err, sizeof(err))) {
		log_err("%s", err);
		goto fail;
	}
	oci_argv_free(argv);
	if (c->cgroups_path && (g->systemd_cgroup || oci_cgroup_is_systemd(c->cgroups_path))) {
		log_err("linux.cgroupsPath %s: systemd cgroups need systemd, which ccvm-oci does "
			"not drive; run podman with --cgroup-manager cgroupfs (or containerd "
			"without SystemdCgroup)", c->cgroups_path);
		goto fail;
	}
	if (c->terminal && !a->console) {
		log_err("process.terminal: create needs --console-socket");
		goto fail;
	}
	return 0;
fail:
	oci_config_free(c);
	return 1;
}

/* @path written whole with @pid, as conmon reads it. */
static int write_pid_file(const char *path, pid_t pid)
{
	char text[24];

	snprintf(text, sizeof(text), "%d", (int)pid);
	return oci_write_file(path, text, strlen(text), 0644);
}

/* mkdir -p, as runc makes its --root (containerd's /run/containerd/runc/NAMESPACE). */
static int mkdirs(const char *path)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0711) && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0711) && errno != EEXIST ? -1 : 0;
}

/* The record: ROOT/ID made (it must not exist), the start FIFO (@fifo_too), the
 * seccomp profile, state.json. */
static int create_record(const struct oci_global *g, const char *id, const struct oci_config *c,
			 bool fifo_too, struct oci_state *st)
{
	char fifo[PATH_MAX + 16];
	time_t now = time(NULL);
	struct tm tm;

	memset(st, 0, sizeof(*st));
	if (mkdirs(g->root)) {
		log_err("--root %s: %s", g->root, strerror(errno));
		return 1;
	}
	snprintf(st->id, sizeof(st->id), "%s", id);
	oci_state_path(g->root, id, st->dir);
	if (mkdir(st->dir, 0700)) {
		if (errno == EEXIST)
			log_err("container \"%s\" already exists", id);
		else
			log_err("%s: %s", st->dir, strerror(errno));
		return 1;
	}
	snprintf(st->bundle, sizeof(st->bundle), "%s", c->bundle);
	snprintf(st->rootfs, sizeof(st->rootfs), "%s", c->root);
	gmtime_r(&now, &tm);
	strftime(st->created, sizeof(st->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	st->cgroups_path = c->cgroups_path ? strdup(c->cgroups_path) : NULL;
	st->annotations = c->annotations ? json_incref(c->annotations) : NULL;
	snprintf(fifo, sizeof(fifo), "%s/%s", st->dir, OCI_FIFO_FILE);
	if (c->seccomp) {
		char prof[PATH_MAX + 16];

		snprintf(prof, sizeof(prof), "%s/%s", st->dir, OCI_SECCOMP_FILE);
		if (json_dump_file(c->seccomp, prof, JSON_COMPACT)) {
			log_err("%s: cannot write it", prof);
			oci_remove(st);
			return 1;
		}
	}
	if ((fifo_too && mkfifo(fifo, 0600)) || oci_state_save(st)) {
		log_err("%s: %s", st->dir, strerror(errno));
		oci_remove(st);
		return 1;
	}
	return 0;
}

/* What the process said through the pipe: nothing once it is set up. */
static void read_ready(int fd, char *msg, size_t len)
{
	size_t n = 0;
	ssize_t got;

	while (n < len - 1 && ((got = read(fd, msg + n, len - 1 - n)) > 0 || (got < 0 && errno == EINTR)))
		if (got > 0)
			n += (size_t)got;
	msg[n] = '\0';
}

/* Fork the container's process and wait until it is set up or has said why not. */
static int create_spawn(const struct oci_global *g, const struct oci_create_args *a,
			const struct oci_config *c, struct oci_state *st, pid_t *out)
{
	char msg[1024];
	int ready[2], rc;
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC)) {
		log_err("pipe: %s", strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct oci_init in = { .c = c, .oci_root = g->root, .state_dir = st->dir, .console_socket = a->console,
				       .systemd_cgroup = g->systemd_cgroup, .debug = g->debug,
				       .ready_fd = ready[1], .image = a->image };

		close(ready[0]);
		_exit(oci_init_run(&in)); /* only on failure: on success it became ccvm run */
	}
	close(ready[1]);
	if (pid < 0) {
		close(ready[0]);
		log_err("fork: %s", strerror(errno));
		return 1;
	}
	read_ready(ready[0], msg, sizeof(msg));
	close(ready[0]);
	if (msg[0]) {
		log_err("%s", msg);
		waitpid(pid, NULL, 0);
		return 1;
	}
	st->pid = pid;
	st->start = oci_proc_start(pid);
	*out = pid;
	rc = oci_state_save(st);
	if (!rc && a->pid_file)
		rc = write_pid_file(a->pid_file, pid);
	if (rc) {
		log_err("container %s: recording its process: %s", st->id, strerror(-rc));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}
	return 0;
}

int oci_create_from(const struct oci_global *g, const char *id, const struct oci_create_args *a,
		    pid_t *pid)
{
	struct oci_config c;
	struct oci_state st;
	int rc;

	if (!oci_id_ok(id)) {
		log_err("container ID \"%s\": letters, digits, '_', '-' and '.', at most %d", id,
			OCI_MAX_ID);
		return 1;
	}
	if (a->preserve && strcmp(a->preserve, "0") != 0) {
		log_err("--preserve-fds %s: a guest gets only its standard streams", a->preserve);
		return 1;
	}
	if (create_check(g, a, &c))
		return 1;
	rc = create_record(g, id, &c, !a->image, &st);
	if (!rc && (rc = create_spawn(g, a, &c, &st, pid))) {
		oci_cgroup_remove(st.cgroups_path);
		oci_remove(&st);
	}
	oci_state_free(&st);
	oci_config_free(&c);
	return rc;
}

int oci_cmd_create(const struct oci_global *g, int argc, char **argv)
{
	struct oci_create_args a = { .bundle = "." };
	bool detach = false; /* what go-runc may pass; create always returns at once */
	const struct oci_flag flags[] = {
		{ "bundle", "b", &a.bundle, NULL },     { "pid-file", NULL, &a.pid_file, NULL },
		{ "console-socket", NULL, &a.console, NULL },
		{ "preserve-fds", NULL, &a.preserve, NULL },
		{ "no-pivot", NULL, NULL, &a.no_pivot }, { "no-new-keyring", NULL, NULL, &a.no_keyring },
		{ "detach", "d", NULL, &detach },       { NULL, NULL, NULL, NULL },
	};
	const char *pos[OCI_MAX_POS];
	int n = oci_flags_parse("create", argc, argv, flags, pos);
	pid_t pid;

	if (n != 1) {
		if (n >= 0)
			log_err("usage: ccvm-oci create --bundle DIR [--pid-file FILE] "
				"[--console-socket SOCK] ID");
		return 1;
	}
	return oci_create_from(g, pos[0], &a, &pid);
}

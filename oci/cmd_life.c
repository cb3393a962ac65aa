/*
 * cmd_life.c - a created container's life: start, state, kill, pause, resume, delete.
 *
 * Each command reads the record, tells the status from the process (state.c) and
 * acts on the process or, for pause and resume, on the VM's control socket. A
 * container is gone only once its process is: delete --force kills it and waits
 * before it removes the cgroup and the record.
 */
#include "cmd.h"

#include "cgroup.h"
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
#include <strings.h>
#include <unistd.h>

#define LIFE_POLL_MS     100
#define LIFE_KILL_WAIT_S 10   /* delete --force: how long a killed monitor may take */

/* The one positional argument most commands take. */
static int one_id(const char *cmd, int argc, char **argv, const struct oci_flag *flags,
		  const char **id)
{
	const char *pos[OCI_MAX_POS];
	int n = oci_flags_parse(cmd, argc, argv, flags, pos);

	if (n != 1) {
		if (n >= 0)
			log_err("usage: ccvm-oci %s ID", cmd);
		return 1;
	}
	*id = pos[0];
	return 0;
}

/* Open the FIFO (the process's open for writing completes), read its byte, remove it. */
static int start_fifo(struct oci_state *st)
{
	char fifo[PATH_MAX + 16], b;
	int fd, rc = 1;

	snprintf(fifo, sizeof(fifo), "%s/%s", st->dir, OCI_FIFO_FILE);
	fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		log_err("container %s: %s: %s", st->id, fifo, strerror(errno));
		return 1;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, LIFE_POLL_MS) > 0 && read(fd, &b, 1) == 1) {
			rc = 0;
			break;
		}
		if (oci_proc_start(st->pid) != st->start) {
			log_err("container %s: its process ended before it started", st->id);
			break;
		}
	}
	close(fd);
	if (!rc)
		unlink(fifo);
	return rc;
}

int oci_cmd_start(const struct oci_global *g, int argc, char **argv)
{
	const struct oci_flag flags[] = { { NULL, NULL, NULL, NULL } };
	struct oci_state st;
	const char *id;
	int rc;

	if (one_id("start", argc, argv, flags, &id) || oci_load(g, id, &st))
		return 1;
	if (oci_state_status(&st) != OCI_CREATED) {
		log_err("cannot start container %s: it is %s, not created", id,
			oci_status_name(oci_state_status(&st)));
		rc = 1;
	} else {
		rc = start_fifo(&st);
	}
	oci_state_free(&st);
	return rc;
}

int oci_cmd_state(const struct oci_global *g, int argc, char **argv)
{
	const struct oci_flag flags[] = { { NULL, NULL, NULL, NULL } };
	struct oci_state st;
	const char *id;
	json_t *j;
	int rc = 0;

	if (one_id("state", argc, argv, flags, &id) || oci_load(g, id, &st))
		return 1;
	j = oci_state_json(&st);
	if (!j || json_dumpf(j, stdout, JSON_INDENT(2)) || puts("") < 0)
		rc = 1;
	json_decref(j);
	oci_state_free(&st);
	return rc;
}

/* "TERM", "SIGTERM", "term" or "15". */
static int parse_signal(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (*s && !*end)
		return n > 0 && n < NSIG ? (int)n : -EINVAL;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int sig = 1; sig < NSIG; sig++) {
		const char *name = sigabbrev_np(sig);

		if (name && strcasecmp(s, name) == 0)
			return sig;
	}
	return -EINVAL;
}

int oci_cmd_kill(const struct oci_global *g, int argc, char **argv)
{
	bool all = false;
	const struct oci_flag flags[] = { { "all", "a", NULL, &all }, { NULL, NULL, NULL, NULL } };
	const char *pos[OCI_MAX_POS];
	int n = oci_flags_parse("kill", argc, argv, flags, pos), sig = SIGTERM, rc = 1;
	struct oci_state st;

	if (n < 1 || n > 2) {
		if (n >= 0)
			log_err("usage: ccvm-oci kill [--all] ID [SIGNAL]");
		return 1;
	}
	if (n == 2 && (sig = parse_signal(pos[1])) < 0) {
		log_err("kill: '%s' is not a signal", pos[1]);
		return 1;
	}
	if (oci_load(g, pos[0], &st))
		return 1;
	/* the guest's processes all live in the monitor: --all is the same one process */
	if (oci_state_status(&st) == OCI_STOPPED)
		log_err("container %s is not running", st.id);
	else if (st.pid <= 0)
		log_err("container %s has no process yet", st.id);
	else if (kill(st.pid, sig))
		log_err("kill %s (pid %d): %s", st.id, (int)st.pid, strerror(errno));
	else
		rc = 0;
	oci_state_free(&st);
	return rc;
}

int oci_kill_wait(struct oci_state *st)
{
	/* no process yet (a create that died before it had one): nothing to kill, and
	 * kill(0) would signal this process's own group */
	if (st->pid <= 0 || oci_state_status(st) == OCI_STOPPED)
		return 0;
	if (kill(st->pid, SIGKILL) && errno != ESRCH) {
		log_err("kill %s (pid %d): %s", st->id, (int)st->pid, strerror(errno));
		return 1;
	}
	for (int i = 0; i < LIFE_KILL_WAIT_S * 1000 / LIFE_POLL_MS; i++) {
		if (oci_proc_start(st->pid) != st->start)
			return 0;
		poll(NULL, 0, LIFE_POLL_MS);
	}
	log_err("container %s: pid %d did not end within %d s of SIGKILL", st->id, (int)st->pid,
		LIFE_KILL_WAIT_S);
	return 1;
}

int oci_cmd_delete(const struct oci_global *g, int argc, char **argv)
{
	bool force = false;
	const struct oci_flag flags[] = { { "force", "f", NULL, &force }, { NULL, NULL, NULL, NULL } };
	struct oci_state st;
	enum oci_status s;
	const char *id;
	int rc = 0;

	if (one_id("delete", argc, argv, flags, &id) || oci_load(g, id, &st))
		return 1;
	s = oci_state_status(&st);
	/* a created container was never started: deleting it is how it is abandoned */
	if (s != OCI_STOPPED && s != OCI_CREATED && !force) {
		log_err("cannot delete container %s: it is %s (delete --force kills it)", id,
			oci_status_name(s));
		rc = 1;
	} else if (s != OCI_STOPPED) {
		rc = oci_kill_wait(&st);
	}
	if (!rc) {
		oci_cgroup_remove(st.cgroups_path);
		oci_remove(&st);
	}
	oci_state_free(&st);
	return rc;
}

/* pause and resume: the VM's own, through its control socket. */
static int pause_resume(const struct oci_global *g, int argc, char **argv, bool pause)
{
	const char *cmd = pause ? "pause" : "resume";
	const struct oci_flag flags[] = { { NULL, NULL, NULL, NULL } };
	char ctl[PATH_MAX + 16], *reply = malloc(CTL_MAX_LINE);
	struct oci_state st;
	const char *id;
	int rc = 1;

	if (!reply || one_id(cmd, argc, argv, flags, &id) || oci_load(g, id, &st)) {
		free(reply);
		return 1;
	}
	reply[0] = '\0';
	if (oci_state_status(&st) != (pause ? OCI_RUNNING : OCI_PAUSED)) {
		log_err("cannot %s container %s: it is %s", cmd, id, oci_status_name(oci_state_status(&st)));
		goto out;
	}
	snprintf(ctl, sizeof(ctl), "%s/%s", st.dir, OCI_CTL_FILE);
	if (ctl_call(ctl, cmd, 0, NULL, reply, NULL)) {
		log_err("container %s: %s: %s", id, cmd, reply);
		goto out;
	}
	st.paused = pause;
	rc = oci_state_save(&st) ? 1 : 0;
out:
	free(reply);
	oci_state_free(&st);
	return rc;
}

int oci_cmd_pause(const struct oci_global *g, int argc, char **argv)
{
	return pause_resume(g, argc, argv, true);
}

int oci_cmd_resume(const struct oci_global *g, int argc, char **argv)
{
	return pause_resume(g, argc, argv, false);
}

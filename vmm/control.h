/*
 * control.h - the monitor thread: control socket server and periodic housekeeping.
 */
#ifndef CCVM_CONTROL_H
#define CCVM_CONTROL_H

#include <jansson.h>
#include <stdbool.h>

struct vm;
struct ctl_server;
struct snap_engine;
struct snap_schedule;

/* What the monitor thread takes from before confinement, so that Landlock grants
 * nothing on the directories of --control and --snapshot-log (docs/security.md). */
struct ctl_prep {
	int listen_fd; /* the control socket, bound and listening; -1: none */
	int janitor;   /* the pipe whose end has the janitor remove it (control_janitor.c) */
	int log_fd;    /* --snapshot-log, open for appending; -1: none */
};

#define CTL_PREP_NONE { .listen_fd = -1, .janitor = -1, .log_fd = -1 }

/* Bind and listen on @path (NULL: no socket) and start its janitor, open @log (NULL:
 * none) for appending (0600, a regular file only): while the monitor is still one
 * thread, before it confines itself. Returns 0 or -errno (reported); @p then holds
 * what was made, for ctl_start or ctl_prep_release. */
int ctl_prepare(const char *path, const char *log, struct ctl_prep *p);
void ctl_prep_release(struct ctl_prep *p);

/* The janitor of the socket file @path (control_janitor.c): a process, forked while
 * the monitor is alone, that removes it once the monitor has ended. *@keep is the pipe
 * end the monitor keeps open for its whole life. 0 or -errno. */
int ctl_janitor_start(const char *path, int *keep);

/* Start the monitor thread; with @path non-NULL it also serves the control socket
 * there (@prep's, or bound now without one); with @engine non-NULL it takes
 * snapshots on request, and periodically when @sched says so. Takes over @prep's
 * descriptors (NULL: none). Returns 0 or -errno (reported). */
int ctl_start(struct vm *vm, const char *path, struct snap_engine *engine,
	      const struct snap_schedule *sched, struct ctl_prep *prep, struct ctl_server **out);
void ctl_stop(struct ctl_server *srv);

/* Client: send `COMMAND [ARGS...]` to the socket at @path, print the reply line.
 * Returns 0 when the reply says ok, 1 otherwise (errors reported). */
int ctl_client(const char *path, const char *cmd, int argc, char *const *argv);
/* The same without printing: the reply line in @reply (CTL_MAX_LINE bytes); with @keep
 * non-NULL the connection is left open there (-1 when none was made). 0 when the reply
 * says ok, 1 when it does not or none came, 2 for a request that cannot be made. */
int ctl_call(const char *path, const char *cmd, int argc, char *const *argv, char *reply,
	     int *keep);

/* Client of exec (control_client.c): @req (an exec request object, not taken) sent
 * to @path with descriptors @fds as the process's stdin, stdout and stderr. 0 with
 * *@pid the guest pid and *@conn the connection its end comes on; 1 with the
 * monitor's refusal, or why nothing could be asked, in @err. ctl_exec_wait reads
 * that end: 0 with *@status as a shell reports it (128 + the signal for a process
 * killed), or -EPIPE when the monitor went first (the VM ended under it). */
int ctl_exec_start(const char *path, json_t *req, const int fds[3], int *pid, int *conn,
		   char *err, size_t len);
int ctl_exec_wait(int conn, int *status);

/* @path removed if it is a Unix socket nobody listens on any more (left by a ccvm
 * that was killed): 0, also when nothing is there; -EEXIST for a file that is not a
 * socket, -EADDRINUSE when a process listens there, -errno. The control socket and
 * `restore --incoming unix:` clear their paths with it. */
int ctl_clear_stale(const char *path);

/* Whether the peer of the Unix socket @fd runs as this process's user or as root (the
 * control socket's rule, and `restore --incoming unix:`'s); a refusal is logged,
 * naming @who. */
bool ctl_peer_allowed(int fd, const char *who);

#endif

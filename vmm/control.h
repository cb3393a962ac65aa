/*
 * control.h - the monitor thread: control socket server and periodic housekeeping.
 */
#ifndef CCVM_CONTROL_H
#define CCVM_CONTROL_H

#include <stdbool.h>

struct vm;
struct ctl_server;
struct snap_engine;
struct snap_schedule;

/* Start the monitor thread; with @path non-NULL it also serves the control socket
 * there; with @engine non-NULL it takes snapshots on request, and periodically when
 * @sched says so. Returns 0 or -errno (reported). */
int ctl_start(struct vm *vm, const char *path, struct snap_engine *engine,
	      const struct snap_schedule *sched, struct ctl_server **out);
void ctl_stop(struct ctl_server *srv);

/* Client: send `COMMAND [ARGS...]` to the socket at @path, print the reply line.
 * Returns 0 when the reply says ok, 1 otherwise (errors reported). */
int ctl_client(const char *path, const char *cmd, int argc, char *const *argv);

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

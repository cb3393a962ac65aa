/*
 * control_impl.h - what the control socket's server (control.c) and its commands
 * (control_cmd.c) share: a client, the server, and the calls between them.
 */
#ifndef CCVM_CONTROL_IMPL_H
#define CCVM_CONTROL_IMPL_H

#include "control.h"
#include "ctl_proto.h"
#include "../snapshot/request.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#define CTL_MAX_CLIENTS 16
#define CTL_TICK_MS     1000
#define CTL_MAX_PENDING (1 << 20) /* reply bytes a client may leave unread before it is dropped */
#define CTL_RATE        50.0      /* requests per second a connection may make ... */
#define CTL_BURST       100.0     /* ... after a burst of this many */
#define CTL_FILE_MODE   0600 /* files ccvm creates for its user (the snapshot log) */
#define CTL_MAX_FDS     3    /* descriptors a request may bring: exec's stdin, stdout, stderr */

struct ctl_client {
	int fd;
	uint64_t wait_id;  /* a snapshot whose end this client waits for (--wait) */
	bool events;       /* asked for event lines */
	bool wait_mig;     /* waits for the migration's end (migrate --wait) */
	size_t len;
	char buf[CTL_MAX_LINE];
	/* Replies not yet taken by the client: sent as its socket accepts them, so a
	 * client that does not read never stalls the control thread nor other clients. */
	char *out;
	size_t out_len;
	double tokens;     /* requests it may still make now (CTL_RATE, CTL_BURST) */
	double refilled_s; /* when the tokens were last counted */
	int fds[CTL_MAX_FDS]; /* descriptors it sent (SCM_RIGHTS), for its next exec */
	int n_fds;
	bool fds_bad;      /* it sent more than CTL_MAX_FDS, or they were cut short */
	int exec_pid;      /* the guest process its exec started, until it ends (0: none) */
};

/* A process started by exec ended: queued by the vCPU thread it ended on, delivered
 * by the control thread (control_exec.c). */
struct ctl_exit {
	int pid, wstatus;
	struct ctl_exit *next;
};

struct ctl_server {
	struct vm *vm;
	struct snap_engine *engine;
	const struct snap_schedule *sched;
	const char *snap_log;    /* --snapshot-log: every finished snapshot, one JSON line */
	int log_fd;              /* it, opened for appending before confinement (-1: none) */
	int janitor;             /* the control socket's janitor's pipe (-1: none) */
	double sched_due;        /* CLOCK_MONOTONIC seconds of the next periodic snapshot */
	bool user_paused;
	char *path;
	int listen_fd;
	int wake[2];
	pthread_t thread;
	struct timespec started;
	struct ctl_client *clients[CTL_MAX_CLIENTS];
	struct ctl_migration *mig; /* the running migration (control_migrate.c), or NULL */
	pthread_mutex_t exits_lock;
	struct ctl_exit *exits;  /* exec's processes that ended, not yet delivered */
};

/* Queue reply @line (taken over, freed here) for client @c: sent as its socket takes
 * it (control_send.c). */
void ctl_send(struct ctl_client *c, char *line);
/* Send what @c has pending, as much as its socket takes now. false: drop the client. */
bool ctl_flush(struct ctl_client *c);

/* The reply to request @req of client @c, or NULL for none now (a --wait reply comes
 * later); *@stop set to the VM's exit status when the request ends it. */
char *ctl_dispatch(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req,
		   int *stop);

/* A snapshot ended: its figures to the clients that wait for it, its event to those
 * that asked for events, its line to the snapshot log. */
void ctl_deliver_snapshot(struct ctl_server *srv);
/* An image compacted in idle time, or given up: told to event listeners. */
void ctl_deliver_compaction(struct ctl_server *srv);

/* `migrate` (control_migrate.c): started on its own thread; the reply now, or NULL
 * for --wait. */
char *ctl_migrate(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req);

/* The migration thread woke the control thread: its progress events to the clients
 * that asked for events; at its end, the waiting clients' reply, and the VM stopped
 * (status 0) when it runs on the destination. */
void ctl_deliver_migration(struct ctl_server *srv);

/* A migration still running is cancelled (the VM resumes here) and waited for. */
void ctl_migration_stop(struct ctl_server *srv);

/* `exec` (control_exec.c): a program started in the VM with the descriptors @c sent;
 * the reply (the pid, or why not). ctl_exec_ended is the VM's spawn_ended: queued,
 * and the control thread woken ('x'); ctl_deliver_exits sends each queued end to the
 * client that waits for it. ctl_exec_drop: client @c goes; the process it started,
 * still running, is killed, and descriptors it sent are closed. */
char *ctl_exec(struct ctl_server *srv, struct ctl_client *c, const struct ctl_request *req);
void ctl_exec_ended(void *srv, int pid, int wstatus);
void ctl_deliver_exits(struct ctl_server *srv);
void ctl_exec_drop(struct ctl_server *srv, struct ctl_client *c);
/* SCM_RIGHTS descriptors of message @mh kept for @c's next exec (control_exec.c). */
struct msghdr;
void ctl_exec_take_fds(struct ctl_client *c, struct msghdr *mh);

/* The socket address of @path: 0, or -ENAMETOOLONG. */
int ctl_sockaddr(const char *path, struct sockaddr_un *sa);

#endif

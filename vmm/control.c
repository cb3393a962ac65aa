/*
 * control.c - the control socket and the monitor thread that serves it.
 *
 * One thread, never on a vCPU's path, polls the listening socket, its clients and a
 * wake-up pipe, with a one-second timeout that doubles as the tick for housekeeping
 * (refreshing the guest's realtime clock offset). Requests are turned into calls on
 * the VM core (vm_pause, vm_stop, counters); this file issues no KVM ioctls. A client
 * that sends garbage gets an error reply; one that sends an over-long line gets an
 * error and is disconnected; one that stops reading cannot block the thread for more
 * than the send timeout. The commands are control_cmd.c's, the client `ccvm ctl`
 * control_client.c's.
 */
#include "control_impl.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/role.h"
#include "vm.h"
#include "linux/lx.h"
#include "../snapshot/engine.h"
#include "../snapshot/image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int ctl_sockaddr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		log_err("control socket path too long (%zu bytes; at most %zu): %s", strlen(path),
			sizeof(sa->sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

/* The guest's clock page follows the host's wall clock, but never while the VM is
 * paused: a snapshot may be taking its instant then (--precopy rounds pauses from its
 * own thread), and paused memory must hold still. Under the VM's lock, so that a
 * pause waits for a refresh under way. */
static void ctl_clock_refresh(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->proc && !vm->pause_req)
		lx_tree_clock_refresh(vm->proc);
	pthread_mutex_unlock(&vm->lock);
}

int ctl_clear_stale(const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc = ctl_sockaddr(path, &sa);

	if (rc)
		return rc;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	return unlink(path) < 0 ? -errno : 0;
}

static int ctl_listen(const char *path)
{
	struct sockaddr_un sa;
	mode_t old;
	int fd, rc;

	rc = ctl_sockaddr(path, &sa);
	if (!rc)
		rc = ctl_clear_stale(path);
	if (rc == -EEXIST)
		log_err("--control %s: a file that is not a socket is in the way; not replacing it",
			path);
	else if (rc == -EADDRINUSE)
		log_err("--control %s: another process is serving this socket", path);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	old = umask(0177); /* the socket file is created 0600 */
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 8) < 0) {
		rc = -errno;
		log_err("--control %s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

/* The engine's compactor calls this from its thread when it finished with an image. */
static void ctl_compaction_done(void *arg)
{
	struct ctl_server *srv = arg;

	if (write(srv->wake[1], "c", 1) < 0)
		log_warn("control: cannot signal the end of a compaction");
}

/* The engine calls this from its writer thread when a snapshot ends. */
static void ctl_snapshot_done(void *arg)
{
	struct ctl_server *srv = arg;

	if (write(srv->wake[1], "s", 1) < 0)
		log_warn("control: cannot signal the end of a snapshot");
}

static void ctl_handle_line(struct ctl_server *srv, struct ctl_client *c, const char *line,
			    size_t len)
{
	struct ctl_request req;
	char err[256];
	int stop = -1;

	if (ctl_parse(line, len, &req, err, sizeof(err))) {
		ctl_send(c, ctl_reply_error(err));
		return;
	}
	ctl_send(c, ctl_dispatch(srv, c, &req, &stop));
	if (stop == 0)
		log_info("stopping the VM: quit requested on the control socket");
	else if (stop > 0)
		log_info("stopping the VM: the signal sent with 'kill' ends the guest (status %d)",
			 stop);
	if (stop >= 0)
		vm_stop(srv->vm, stop);
	ctl_request_free(&req);
}

static void ctl_drop(struct ctl_server *srv, int i)
{
	ctl_exec_drop(srv, srv->clients[i]);
	if (srv->clients[i]->fd >= 0)
		close(srv->clients[i]->fd);
	free(srv->clients[i]->out);
	free(srv->clients[i]);
	srv->clients[i] = NULL;
}

/* One request's worth of @c's allowance: a token bucket, CTL_RATE a second. */
static bool ctl_rate_ok(struct ctl_client *c)
{
	double now = mono_s();

	c->tokens += (now - c->refilled_s) * CTL_RATE;
	if (c->tokens > CTL_BURST)
		c->tokens = CTL_BURST;
	c->refilled_s = now;
	if (c->tokens < 1)
		return false;
	c->tokens -= 1;
	return true;
}

/* Read what the client sent and answer every complete line. Returns false when the
 * client is to be dropped. */
static bool ctl_serve_client(struct ctl_server *srv, struct ctl_client *c)
{
	/* Descriptors come with exec's request (SCM_RIGHTS), close-on-exec at once. */
	char ctrl[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
	struct iovec iov = { .iov_base = c->buf + c->len, .iov_len = sizeof(c->buf) - c->len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
	char *nl;

	if (n >= 0)
		ctl_exec_take_fds(c, &mh);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n < 0)
		return true;
	c->len += (size_t)n;
	while (c->fd >= 0 && (nl = memchr(c->buf, '\n', c->len))) {
		size_t line = (size_t)(nl - c->buf);

		if (ctl_rate_ok(c))
			ctl_handle_line(srv, c, c->buf, line);
		else
			ctl_send(c, ctl_reply_error("too many requests on this connection (at most 50 "
						    "a second); slow down"));
		memmove(c->buf, nl + 1, c->len - line - 1);
		c->len -= line + 1;
	}
	if (c->fd < 0)
		return false;
	if (c->len == sizeof(c->buf)) {
		ctl_send(c, ctl_reply_error("request too long (no newline within 65536 bytes); "
					    "closing the connection"));
		return false;
	}
	return true;
}

/* Only the monitor's own user (or root) may drive it: the socket file is 0600, and
 * the peer's credentials are checked too (a descriptor passed on, a directory with
 * looser rights on the way). */
bool ctl_peer_allowed(int fd, const char *who)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warn("%s: SO_PEERCRED: %s; connection refused", who, strerror(errno));
		return false;
	}
	if (cred.uid == geteuid() || cred.uid == 0)
		return true;
	log_warn("%s: refused a peer running as uid %u (pid %d): only uid %u or root may use "
		 "this socket", who, (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
	return false;
}

static void ctl_accept(struct ctl_server *srv)
{
	int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int i;

	if (fd < 0)
		return;
	if (!ctl_peer_allowed(fd, "control")) {
		close(fd);
		return;
	}
	for (i = 0; i < CTL_MAX_CLIENTS && srv->clients[i]; i++)
		;
	if (i == CTL_MAX_CLIENTS || !(srv->clients[i] = calloc(1, sizeof(struct ctl_client)))) {
		static const char busy[] = "{\"ok\":false,\"error\":\"too many control connections "
					   "(at most 16)\"}\n";

		if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("control: a refused client did not take its reply");
		close(fd);
		return;
	}
	srv->clients[i]->fd = fd;
	srv->clients[i]->tokens = CTL_BURST;
	srv->clients[i]->refilled_s = mono_s();
}

/* Milliseconds until the next periodic snapshot or housekeeping tick. */
static int ctl_timeout_ms(struct ctl_server *srv)
{
	double left;

	if (!srv->sched || srv->mig) /* a migration holds the dirty log */
		return CTL_TICK_MS;
	srv->sched_due = snap_schedule_tick(srv->engine, srv->sched, mono_s(), srv->sched_due);
	left = (srv->sched_due - mono_s()) * 1000.0;
	return left < 1 ? 1 : left > CTL_TICK_MS ? CTL_TICK_MS : (int)left;
}

static void *ctl_thread(void *arg)
{
	struct ctl_server *srv = arg;
	struct pollfd pfd[CTL_MAX_CLIENTS + 2];
	int who[CTL_MAX_CLIENTS + 2];

	role_enter(ROLE_CONTROL);
	for (;;) {
		int n = 0, timeout = ctl_timeout_ms(srv);

		/* Clients a reply could not be queued for (ctl_send closed them) go now. */
		for (int i = 0; i < CTL_MAX_CLIENTS; i++)
			if (srv->clients[i] && srv->clients[i]->fd < 0)
				ctl_drop(srv, i);
		pfd[n++] = (struct pollfd){ .fd = srv->wake[0], .events = POLLIN };
		if (srv->listen_fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = srv->listen_fd, .events = POLLIN };
		for (int i = 0; i < CTL_MAX_CLIENTS; i++)
			if (srv->clients[i]) {
				who[n] = i;
				pfd[n++] = (struct pollfd){
					.fd = srv->clients[i]->fd,
					.events = POLLIN | (srv->clients[i]->out_len ? POLLOUT : 0),
				};
			}
		if (poll(pfd, (nfds_t)n, timeout) <= 0) {
			ctl_clock_refresh(srv->vm);
			continue;
		}
		if (pfd[0].revents) {
			char why = 'q';

			if (read(srv->wake[0], &why, 1) == 1 && why == 's') {
				ctl_deliver_snapshot(srv);
				if (srv->sched)
					snap_schedule_prune(srv->sched);
				continue;
			}
			if (why == 'm') {
				ctl_deliver_migration(srv);
				continue;
			}
			if (why == 'x') {
				ctl_deliver_exits(srv);
				continue;
			}
			if (why == 'c') {
				ctl_deliver_compaction(srv);
				continue;
			}
			break;
		}
		for (int k = 1; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (srv->listen_fd >= 0 && pfd[k].fd == srv->listen_fd)
				ctl_accept(srv);
			else if (((pfd[k].revents & POLLOUT) && !ctl_flush(srv->clients[who[k]])) ||
				 ((pfd[k].revents & ~POLLOUT) &&
				  !ctl_serve_client(srv, srv->clients[who[k]])))
				ctl_drop(srv, who[k]);
		}
	}
	return NULL;
}

static void ctl_close_all(struct ctl_server *srv);

/* Open --snapshot-log @log for appending: created 0600 if absent (whatever the
 * umask), a regular file only, never through a link. A descriptor or -errno. */
static int ctl_open_log(const char *log)
{
	const char *name;
	int dir = img_dir_open(log, &name), fd;

	if (dir < 0)
		return dir;
	fd = img_append_open(dir, name, CTL_FILE_MODE);
	close(dir);
	return fd;
}

void ctl_prep_release(struct ctl_prep *p)
{
	if (p->listen_fd >= 0)
		close(p->listen_fd);
	if (p->janitor >= 0)
		close(p->janitor); /* the janitor removes the socket file now */
	if (p->log_fd >= 0)
		close(p->log_fd);
	*p = (struct ctl_prep)CTL_PREP_NONE;
}

int ctl_prepare(const char *path, const char *log, struct ctl_prep *p)
{
	int rc = 0;

	*p = (struct ctl_prep)CTL_PREP_NONE;
	if (log) {
		p->log_fd = ctl_open_log(log);
		if (p->log_fd < 0) {
			rc = p->log_fd;
			log_err("--snapshot-log %s: %s", log,
				rc == -EINVAL ? "not a regular file" : strerror(-rc));
			p->log_fd = -1;
			return rc;
		}
	}
	if (path) {
		p->listen_fd = ctl_listen(path);
		if (p->listen_fd < 0) {
			rc = p->listen_fd;
			p->listen_fd = -1;
		}
	}
	if (!rc && path && (rc = ctl_janitor_start(path, &p->janitor)))
		log_err("--control %s: starting the process that removes it at the end: %s",
			path, strerror(-rc));
	if (rc) {
		if (p->listen_fd >= 0)
			unlink(path);
		ctl_prep_release(p);
	}
	return rc;
}

int ctl_start(struct vm *vm, const char *path, struct snap_engine *engine,
	      const struct snap_schedule *sched, struct ctl_prep *prep, struct ctl_server **out)
{
	struct ctl_prep none = CTL_PREP_NONE;
	struct ctl_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!prep)
		prep = &none;
	if (!srv) {
		ctl_prep_release(prep);
		return -ENOMEM;
	}
	srv->vm = vm;
	srv->engine = engine;
	srv->sched = snap_schedule_on(sched) && engine ? sched : NULL;
	srv->snap_log = sched && engine ? sched->log : NULL;
	srv->log_fd = prep->log_fd;
	srv->janitor = prep->janitor;
	srv->listen_fd = prep->listen_fd;
	*prep = (struct ctl_prep)CTL_PREP_NONE; /* the server's now */
	pthread_mutex_init(&srv->exits_lock, NULL);
	if (engine) {
		snap_engine_on_done(engine, ctl_snapshot_done, srv);
		snap_engine_on_compacted(engine, ctl_compaction_done, srv);
	}
	clock_gettime(CLOCK_MONOTONIC, &srv->started);
	if (srv->sched)
		srv->sched_due = snap_schedule_first(srv->sched, mono_s());
	srv->wake[0] = srv->wake[1] = -1;
	if (pipe2(srv->wake, O_CLOEXEC) < 0) {
		rc = -errno;
		goto err;
	}
	if (path && srv->listen_fd < 0) { /* not prepared: bound now (tests) */
		srv->listen_fd = ctl_listen(path);
		if (srv->listen_fd < 0) {
			rc = srv->listen_fd;
			goto err;
		}
	}
	if (path && !(srv->path = strdup(path))) {
		rc = -ENOMEM;
		goto err;
	}
	if (pthread_create(&srv->thread, NULL, ctl_thread, srv)) {
		rc = -EAGAIN;
		goto err;
	}
	vm->spawn_ctx = srv;
	vm->spawn_ended = ctl_exec_ended;
	*out = srv;
	return 0;
err:
	if (engine) {
		snap_engine_on_done(engine, NULL, NULL);
		snap_engine_on_compacted(engine, NULL, NULL);
	}
	ctl_close_all(srv);
	pthread_mutex_destroy(&srv->exits_lock);
	free(srv);
	return rc;
}

/* Close the server's descriptors, the socket's file removed where the monitor may
 * still remove it (unconfined; confined, its janitor does when the monitor ends). */
static void ctl_close_all(struct ctl_server *srv)
{
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		if (srv->path)
			(void)unlink(srv->path);
	}
	if (srv->wake[0] >= 0)
		close(srv->wake[0]);
	if (srv->wake[1] >= 0)
		close(srv->wake[1]);
	if (srv->log_fd >= 0)
		close(srv->log_fd);
	if (srv->janitor >= 0)
		close(srv->janitor);
	free(srv->path);
}

void ctl_stop(struct ctl_server *srv)
{
	if (!srv)
		return;
	srv->vm->spawn_ended = NULL;
	if (srv->engine) {
		snap_engine_on_done(srv->engine, NULL, NULL);
		snap_engine_on_compacted(srv->engine, NULL, NULL);
	}
	if (write(srv->wake[1], "q", 1) == 1)
		pthread_join(srv->thread, NULL);
	ctl_migration_stop(srv);
	for (int i = 0; i < CTL_MAX_CLIENTS; i++)
		if (srv->clients[i])
			ctl_drop(srv, i);
	ctl_close_all(srv);
	for (struct ctl_exit *e = srv->exits, *next; e; e = next) {
		next = e->next;
		free(e);
	}
	pthread_mutex_destroy(&srv->exits_lock);
	free(srv);
}

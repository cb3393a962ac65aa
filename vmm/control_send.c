/*
 * control_send.c - a control client's reply queue: lines are queued and sent as its
 * socket takes them, so a client that does not read never stalls the control thread.
 *
 * The server (control.c) and the commands it runs (control_cmd.c, control_migrate.c)
 * all reply through here, which is why it is a file of its own below them all.
 */
#include "control_impl.h"
#include "../base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Send what @c has pending, as much as its socket takes now. false: drop the client. */
bool ctl_flush(struct ctl_client *c)
{
	while (c->out_len) {
		ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w <= 0)
			return false;
		memmove(c->out, c->out + w, c->out_len - (size_t)w);
		c->out_len -= (size_t)w;
	}
	return true;
}

/* Queue @line (freed here) for @c and send what its socket takes now. A client with
 * more than CTL_MAX_PENDING bytes unread is marked for dropping (fd -1 then). */
void ctl_send(struct ctl_client *c, char *line)
{
	size_t n;
	char *grown;

	if (!line || c->fd < 0) {
		free(line);
		return;
	}
	n = strlen(line);
	if (c->out_len + n > CTL_MAX_PENDING || !(grown = realloc(c->out, c->out_len + n))) {
		log_warn("control: a client left %zu reply bytes unread; closing its connection",
			 c->out_len);
		free(line);
		close(c->fd);
		c->fd = -1;
		return;
	}
	memcpy(grown + c->out_len, line, n);
	c->out = grown;
	c->out_len += n;
	free(line);
	if (!ctl_flush(c)) {
		close(c->fd);
		c->fd = -1;
	}
}

/*
 * persist_incoming.c - a VM restored from a migration stream (docs/migration.md):
 * `ccvm restore --incoming unix:PATH | tcp:ADDR:PORT`.
 *
 * It listens, takes one connection, reads the hello (the RAM size, which --mem must
 * match when given), makes the VM, and reads frames: memory straight into the first
 * process's RAM, each frame checked before it lands (snapshot/migstream.c), state
 * sections kept until the end. There the sections are checked and the VM rebuilt
 * exactly as from an image (restore_read_sections, restore_vm_state): the stream is
 * data, never policy, and the destination's own command line confines the guest. The
 * sender hears READY once the VM is built and RUNNING as it starts; any refusal goes
 * back to it with its reason, and the destination exits nonzero.
 */
#include "persist_incoming.h"
#include "persist_restore.h"
#include "migrate.h"
#include "base/log.h"
#include "vm.h"
#include "../snapshot/image.h"
#include "../snapshot/migstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define INCOMING_SECTIONS 16 /* distinct state sections a stream may carry */
#define INCOMING_ERR      512

struct incoming_section {
	uint32_t type;
	uint8_t *data;
	size_t len;
};

struct incoming {
	struct incoming_section sec[INCOMING_SECTIONS];
	int n;
};

static int incoming_section(void *ctx, uint32_t type, void **data, size_t *len)
{
	struct incoming *in = ctx;

	for (int i = 0; i < in->n; i++) {
		if (in->sec[i].type != type)
			continue;
		*len = in->sec[i].len;
		*data = in->sec[i].len ? malloc(in->sec[i].len) : NULL;
		if (in->sec[i].len && !*data)
			return -EIO;
		if (*data)
			memcpy(*data, in->sec[i].data, in->sec[i].len);
		return 0;
	}
	return -ENOENT;
}

static void incoming_free(struct incoming *in)
{
	for (int i = 0; i < in->n; i++)
		free(in->sec[i].data);
	in->n = 0;
}

/* A section of the stream kept (its data taken over): -EPROTO for a second one of a
 * type, or more than a stream may carry. */
static int incoming_keep(struct incoming *in, struct mig_event *ev, char *err, size_t errlen)
{
	for (int i = 0; i < in->n; i++)
		if (in->sec[i].type == ev->at)
			return log_set_err(-EPROTO, err, errlen, "section %llu sent twice",
					   (unsigned long long)ev->at);
	if (in->n == INCOMING_SECTIONS)
		return log_set_err(-EPROTO, err, errlen, "more than %d sections",
				   INCOMING_SECTIONS);
	in->sec[in->n++] = (struct incoming_section){ .type = (uint32_t)ev->at, .data = ev->data,
						      .len = ev->len };
	ev->data = NULL;
	return 0;
}

/* A listening socket at @where (migrate_addr): the fd, or -errno with why in @err. */
static int incoming_listen(const char *where, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = migrate_addr(where, &ss, &sl, err, errlen), fd, one = 1;

	if (rc)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_set_err(-errno, err, errlen, "--incoming: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1) < 0) {
		rc = -errno;
		close(fd);
		return log_set_err(rc, err, errlen, "--incoming %s: %s", where, strerror(-rc));
	}
	return fd;
}

/* One connection on @where, the listener gone once it came. */
static int incoming_accept(const char *where, char *err, size_t errlen)
{
	int lfd = incoming_listen(where, err, errlen), fd;

	if (lfd < 0)
		return lfd;
	log_info("waiting for a migration on %s", where);
	do
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		log_set_err(-errno, err, errlen, "--incoming %s: %s", where, strerror(errno));
	close(lfd);
	if (strncmp(where, "unix:", 5) == 0)
		unlink(where + 5);
	return fd < 0 ? -EIO : fd;
}

/* Frames until the end: memory into @vm's RAM, sections into @in. */
static int incoming_read(struct mig_in *mi, struct incoming *in, char *err, size_t errlen)
{
	struct mig_event ev;
	int rc;

	for (;;) {
		rc = mig_next(mi, &ev, err, errlen);
		if (!rc && ev.type == MIG_SECTION)
			rc = incoming_keep(in, &ev, err, errlen);
		free(ev.data);
		if (rc || ev.type == MIG_END)
			return rc;
	}
}

int restore_vm_incoming(const char *where, const struct restore_opts *o, struct vm *vm,
			uint64_t *mono_ns, int *conn)
{
	struct incoming in = { .n = 0 };
	struct restore_saved st = { 0 };
	struct mig_in mi = { .fd = -1 };
	char err[INCOMING_ERR] = "";
	uint64_t ram = 0;
	int fd = incoming_accept(where, err, sizeof(err)), rc;

	if (fd < 0) {
		log_err("cannot take a migration: %s", err);
		return fd;
	}
	rc = mig_in_open(&mi, fd, NULL, o->mem, &ram, err, sizeof(err));
	if (!rc && (rc = restore_vm_create(vm, ram, o)))
		snprintf(err, sizeof(err), "cannot make the VM: %s", strerror(-rc));
	if (!rc) {
		mi.mem = vm->ram.host;
		rc = incoming_read(&mi, &in, err, sizeof(err));
	}
	if (!rc) {
		const struct restore_src src = { .section = incoming_section, .ctx = &in,
						 .ram_size = ram };

		rc = restore_read_sections(&src, &st, err, sizeof(err));
	}
	if (!rc && (rc = restore_vm_state(where, &st, o, vm, mono_ns)))
		snprintf(err, sizeof(err), "the VM could not be rebuilt (the log says why)");
	log_info("migration from %s: %llu bytes received", where,
		 (unsigned long long)mi.bytes_read);
	restore_saved_free(&st);
	incoming_free(&in);
	mig_in_close(&mi);
	if (rc) {
		log_err("migration refused: %s", err);
		mig_send_ack(fd, MIG_ACK_REFUSED, err);
		close(fd);
		return rc;
	}
	mig_send_ack(fd, MIG_ACK_READY, NULL);
	*conn = fd;
	return 0;
}

void incoming_running(int conn)
{
	if (conn < 0)
		return;
	mig_send_ack(conn, MIG_ACK_RUNNING, NULL);
	close(conn);
}

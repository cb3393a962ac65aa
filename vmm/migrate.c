/*
 * migrate.c - the sending side of a live migration (docs/migration.md): `ccvm ctl SOCK
 * migrate unix:PATH|tcp:ADDR:PORT`.
 *
 * This first sender stops and copies: it pauses the VM, sends all of the first
 * process's memory (zero pages as holes) and the state sections an image would hold
 * (vCPUs, processes, the other processes' memory, shared memory) over the stream
 * (snapshot/migstream.c), and waits for the destination's answer. Only after RUNNING
 * does it leave the VM paused for good, for its caller to end: the VM runs there now.
 * Anything else (no destination, a cut connection, REFUSED with its reason) resumes
 * the VM here. Pre-copy rounds in coverage order, which shorten the pause to what is
 * still dirty at the end, are the next step.
 */
#include "migrate.h"
#include "persist_capture.h"
#include "base/log.h"
#include "base/mono.h"
#include "vm.h"
#include "../snapshot/image.h"
#include "../snapshot/migstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MIGRATE_NS_PER_MS 1000000ULL

int migrate_addr(const char *where, struct sockaddr_storage *ss, socklen_t *sl, char *err,
		 size_t errlen)
{
	memset(ss, 0, sizeof(*ss));
	if (strncmp(where, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;

		if (!where[5] || strlen(where + 5) >= sizeof(un->sun_path))
			return log_set_err(-EINVAL, err, errlen, "%s: a socket path of 1 to %zu "
					   "bytes", where, sizeof(un->sun_path) - 1);
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, where + 5);
		*sl = sizeof(*un);
		return 0;
	}
	if (strncmp(where, "tcp:", 4) == 0) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		const char *colon = strrchr(where + 4, ':');
		char addr[INET_ADDRSTRLEN], *end = NULL;
		long port = colon ? strtol(colon + 1, &end, 10) : -1;

		if (!colon || (size_t)(colon - where - 4) >= sizeof(addr) || *end || port < 1 ||
		    port > 65535)
			return log_set_err(-EINVAL, err, errlen, "%s: tcp:ADDR:PORT, ADDR an IPv4 "
					   "address", where);
		memcpy(addr, where + 4, (size_t)(colon - where - 4));
		addr[colon - where - 4] = '\0';
		if (inet_pton(AF_INET, addr, &in->sin_addr) != 1)
			return log_set_err(-EINVAL, err, errlen, "%s: '%s' is not an IPv4 address",
					   where, addr);
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*sl = sizeof(*in);
		return 0;
	}
	return log_set_err(-EINVAL, err, errlen, "%s: unix:PATH or tcp:ADDR:PORT", where);
}

static int migrate_connect(const char *where, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = migrate_addr(where, &ss, &sl, err, errlen), fd;

	if (rc)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return log_set_err(rc, err, errlen, "no destination at %s: %s", where,
				   strerror(-rc));
	}
	return fd;
}

/* The state sections captured now, sent after the memory, then the end. */
static int migrate_state(struct vm *vm, struct mig_out *o, char *err, size_t errlen)
{
	struct img_writer *w = NULL;
	int rc = img_sections_open(vm->ram.size, &w);
	const void *data;
	uint32_t type;
	size_t len;

	if (!rc && (rc = capture_vm_sections(vm, w)))
		log_set_err(rc, err, errlen, "capturing the VM's state: %s", strerror(-rc));
	for (int i = 0; !rc && img_section_get(w, i, &type, &data, &len) == 0; i++)
		rc = mig_send_section(o, type, data, len);
	if (!rc)
		rc = mig_send_end(o);
	img_forget(w);
	return rc;
}

/* READY, then RUNNING: 0, or why not in @err. */
static int migrate_answers(int fd, char *err, size_t errlen)
{
	char why[MIG_WHY_MAX];
	enum mig_ack_code code;
	int rc;

	for (;;) {
		rc = mig_read_ack(fd, &code, why);
		if (rc)
			return log_set_err(rc, err, errlen, "the destination did not answer (%s)",
					   strerror(-rc));
		if (code == MIG_ACK_REFUSED)
			return log_set_err(-EPROTO, err, errlen, "the destination refused: %s", why);
		if (code == MIG_ACK_RUNNING)
			return 0;
	}
}

int migrate_send(struct vm *vm, const char *where, enum img_codec codec,
		 struct migrate_figures *fig, char *err, size_t errlen)
{
	struct mig_out o = { .fd = -1 };
	uint64_t t0;
	int fd = migrate_connect(where, err, errlen), rc;

	memset(fig, 0, sizeof(*fig));
	if (fd < 0)
		return fd;
	t0 = mono_ns();
	rc = vm_pause(vm);
	if (rc) {
		close(fd);
		return log_set_err(rc, err, errlen, "the VM has stopped");
	}
	rc = mig_out_open(&o, fd, vm->ram.size, codec, codec_default_level(codec));
	if (!rc)
		rc = mig_send_memory(&o, vm->ram.host, 0, vm->ram.size);
	if (!rc)
		rc = migrate_state(vm, &o, err, errlen);
	if (rc && !err[0])
		log_set_err(rc, err, errlen, "sending to %s: %s", where, strerror(-rc));
	if (rc) {
		/* A destination that refused said why: its answer wins over a cut write. */
		char why[MIG_WHY_MAX] = "";

		if (migrate_answers(fd, why, sizeof(why)) == -EPROTO)
			snprintf(err, errlen, "%s", why);
	} else {
		rc = migrate_answers(fd, err, errlen);
	}
	fig->bytes_sent = o.bytes_sent;
	fig->pages = o.pages_sent;
	fig->holes = o.holes_sent;
	fig->downtime_ms = (mono_ns() - t0) / MIGRATE_NS_PER_MS;
	mig_out_close(&o);
	close(fd);
	if (rc)
		vm_resume(vm); /* the VM goes on here */
	return rc;
}

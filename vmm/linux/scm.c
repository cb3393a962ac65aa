/*
 * scm.c - control messages of sendmsg and recvmsg: descriptors passed over Unix
 * sockets (SCM_RIGHTS), between the processes of a VM or with a host program.
 *
 * A guest descriptor is a host descriptor in the guest's table, so passing one means
 * passing its host descriptor: on the way out each guest number in an SCM_RIGHTS
 * message becomes the host descriptor it names (held until the call returns), and on
 * the way in each host descriptor received joins the receiver's table and its guest
 * number replaces it. The guest's control buffer is copied in once and parsed from
 * that copy; what the kernel hands back is the host's own. Other control messages
 * going out (SCM_CREDENTIALS would carry host ids) are refused with EOPNOTSUPP; those
 * coming in besides SCM_RIGHTS (timestamps, credentials asked for with SO_PASSCRED)
 * pass as the host gives them.
 */
#include "scm.h"
#include "fdtable.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int lx_scm_out(struct lx_call *c, const struct msghdr *g, uint8_t *buf, size_t *len)
{
	struct msghdr h = { .msg_control = buf, .msg_controllen = g->msg_controllen };
	struct cmsghdr *m;

	*len = 0;
	if (!g->msg_controllen)
		return 0;
	if (g->msg_controllen > LX_CMSG_MAX)
		return -ENOBUFS;
	if (lx_copy_in(c, buf, (uint64_t)(uintptr_t)g->msg_control, g->msg_controllen))
		return -EFAULT;
	for (m = CMSG_FIRSTHDR(&h); m; m = CMSG_NXTHDR(&h, m)) {
		size_t room = g->msg_controllen - (size_t)((uint8_t *)m - buf);
		int *fds = (int *)CMSG_DATA(m);

		if (m->cmsg_len < CMSG_LEN(0) || m->cmsg_len > room)
			return -EINVAL;
		if (m->cmsg_level != SOL_SOCKET || m->cmsg_type != SCM_RIGHTS)
			return -EOPNOTSUPP;
		for (size_t i = 0; i < (m->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int host = lx_host_fd(c, (uint64_t)(uint32_t)fds[i]);

			if (host < 0)
				return host;
			fds[i] = host;
		}
	}
	*len = g->msg_controllen;
	return 0;
}

/* The host descriptors of one SCM_RIGHTS message into the guest's table, their guest
 * numbers in their place; past a full table the rest are closed, and the message says
 * fewer (MSG_CTRUNC, as Linux): true then, and it is the last the guest gets. */
static bool scm_install(struct lx_call *c, struct cmsghdr *m, bool cloexec, int *flags)
{
	int *fds = (int *)CMSG_DATA(m);
	size_t n = (m->cmsg_len - CMSG_LEN(0)) / sizeof(int), ok = 0;

	for (size_t i = 0; i < n; i++) {
		int fd = ok == i ? lx_install(c, fds[i], 0, cloexec) : (close(fds[i]), -1);

		if (fd < 0)
			continue;
		fds[ok++] = fd;
	}
	if (ok == n)
		return false;
	m->cmsg_len = CMSG_LEN(ok * sizeof(int));
	*flags |= MSG_CTRUNC;
	return true;
}

/* Every descriptor of an SCM_RIGHTS message the guest will not get closed. */
static void scm_close(struct cmsghdr *m)
{
	const int *fds = (const int *)CMSG_DATA(m);

	for (size_t i = 0; i < (m->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
		close(fds[i]);
}

int lx_scm_in(struct lx_call *c, struct msghdr *m, uint64_t ucontrol, uint64_t ulen_at,
	      bool cloexec, int *flags)
{
	uint64_t len = m->msg_controllen;
	struct cmsghdr *h = CMSG_FIRSTHDR(m), *next;
	bool cut = false;

	for (; h; h = next) {
		next = CMSG_NXTHDR(m, h); /* before scm_install shortens it */
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		if (cut) {
			scm_close(h);
		} else if (scm_install(c, h, cloexec, flags)) {
			cut = true; /* the guest gets what came before, and this much of it */
			len = (uint64_t)((uint8_t *)h - (uint8_t *)m->msg_control) + h->cmsg_len;
		}
	}
	if (len && lx_copy_out(c, ucontrol, m->msg_control, len))
		return -EFAULT;
	return lx_copy_out(c, ulen_at, &len, sizeof(len)) ? -EFAULT : 0;
}

/*
 * wp.c - userfaultfd write protection of guest RAM.
 *
 * Thin wrappers around the userfaultfd ioctls: open the descriptor, register guest RAM
 * in write-protect mode, protect or unprotect a range, read fault events. Writes by the
 * vCPU (through KVM), by the monitor, and by host system calls copying into guest RAM
 * all fault the same way. Which pages to copy and when is snapshot/engine.c's business.
 * UFFDIO_WRITEPROTECT skips pages never touched: callers treat those as zero.
 */
#include "wp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int wp_open(struct wp *wp, uint8_t *base, uint64_t size)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP };
	struct uffdio_register reg = {
		.range = { .start = (uint64_t)(uintptr_t)base, .len = size },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	int rc;

	wp->fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (wp->fd < 0)
		return -errno;
	wp->base = base;
	wp->size = size;
	if (ioctl(wp->fd, UFFDIO_API, &api) < 0 || ioctl(wp->fd, UFFDIO_REGISTER, &reg) < 0) {
		rc = -errno;
		close(wp->fd);
		wp->fd = -1;
		return rc;
	}
	return 0;
}

void wp_close(struct wp *wp)
{
	if (wp->fd >= 0)
		close(wp->fd); /* also unregisters and lifts any protection */
	wp->fd = -1;
}

int wp_protect(struct wp *wp, uint64_t gpa, uint64_t len, bool protect)
{
	struct uffdio_writeprotect arg = {
		.range = { .start = (uint64_t)(uintptr_t)(wp->base + gpa), .len = len },
		.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	if (ioctl(wp->fd, UFFDIO_WRITEPROTECT, &arg) < 0)
		return -errno;
	return 0;
}

bool wp_fault_pending(struct wp *wp)
{
	struct pollfd pfd = { .fd = wp->fd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

int wp_next_fault(struct wp *wp, int timeout_ms, uint64_t *gpa)
{
	struct pollfd pfd = { .fd = wp->fd, .events = POLLIN };
	struct uffd_msg msg;
	ssize_t n;
	int rc = poll(&pfd, 1, timeout_ms);

	if (rc <= 0)
		return rc < 0 && errno != EINTR ? -errno : 0;
	n = read(wp->fd, &msg, sizeof(msg));
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT ||
	    !(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP))
		return 0;
	*gpa = msg.arg.pagefault.address - (uint64_t)(uintptr_t)wp->base;
	return 1;
}

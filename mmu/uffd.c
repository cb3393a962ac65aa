/*
 * uffd.c - userfaultfd over guest RAM.
 *
 * Thin wrappers around the userfaultfd ioctls: open the descriptor and register guest
 * RAM in write-protect or missing mode (undone if any step fails), protect or unprotect
 * a range, fill absent pages, read fault events. Writes by the vCPU (through KVM), by
 * the monitor, and by host system calls copying into guest RAM all fault the same way.
 * Which pages to copy or load and when is snapshot/'s business. UFFDIO_WRITEPROTECT
 * skips pages never touched: callers treat those as zero.
 */
#include "uffd.h"
#include "../base/pages.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* /dev/userfaultfd (Linux 6.1), opened while the monitor is still root with all its
 * capabilities: a userfaultfd made from it (USERFAULTFD_IOC_NEW) handles faults from
 * the kernel too (KVM's), which the system call grants only to CAP_SYS_PTRACE when
 * vm.unprivileged_userfaultfd is 0. -1 when not open. */
static int uffd_dev = -1;

int uffd_dev_open(void)
{
	int fd;

	if (uffd_dev >= 0)
		return 0;
	fd = open(UFFD_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uffd_dev = fd;
	return 0;
}

bool uffd_dev_ready(void)
{
	return uffd_dev >= 0;
}

/* A new userfaultfd: through the device when it is open, else the system call. */
static int uffd_new(void)
{
	const int flags = O_CLOEXEC | O_NONBLOCK;
	int fd = uffd_dev >= 0 ? ioctl(uffd_dev, USERFAULTFD_IOC_NEW, flags) : -1;

	if (fd < 0)
		fd = (int)syscall(SYS_userfaultfd, flags);
	return fd;
}

/* Write protection of shared memory (the guest's shared mappings, gmem_alias): Linux
 * 5.19 on. Asked for when the kernel has it; without it a range holding shared
 * memory cannot be registered, and a snapshot says so. */
static uint64_t uffd_features(enum uffd_mode mode)
{
	struct uffdio_api probe = { .api = UFFD_API };
	uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	int other;

	if (mode != UFFD_MODE_WP)
		return 0;
	/* The API handshake is once per descriptor: probe on a second one. */
	other = uffd_new();
	if (other >= 0 && ioctl(other, UFFDIO_API, &probe) == 0)
		want |= probe.features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
	if (other >= 0)
		close(other);
	return want;
}

int uffd_register(struct uffd *u, uint64_t gpa, uint64_t len)
{
	struct uffdio_register reg = {
		.range = { .start = (uint64_t)(uintptr_t)(u->base + gpa), .len = len },
		.mode = u->mode == UFFD_MODE_WP ? UFFDIO_REGISTER_MODE_WP :
						  UFFDIO_REGISTER_MODE_MISSING,
	};

	if (ioctl(u->fd, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	return 0;
}

int uffd_open(struct uffd *u, uint8_t *base, uint64_t size, enum uffd_mode mode)
{
	struct uffdio_api api = { .api = UFFD_API };
	int rc;

	u->fd = uffd_new();
	if (u->fd < 0)
		return -errno;
	u->base = base;
	u->size = size;
	u->mode = mode;
	api.features = uffd_features(mode);
	rc = ioctl(u->fd, UFFDIO_API, &api) < 0 ? -errno : uffd_register(u, 0, size);
	if (rc) {
		close(u->fd);
		u->fd = -1;
		return rc;
	}
	return 0;
}

void uffd_close(struct uffd *u)
{
	if (u->fd >= 0)
		close(u->fd); /* also unregisters and lifts any protection */
	u->fd = -1;
}

int uffd_protect(struct uffd *u, uint64_t gpa, uint64_t len, bool protect)
{
	struct uffdio_writeprotect arg = {
		.range = { .start = (uint64_t)(uintptr_t)(u->base + gpa), .len = len },
		.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	if (ioctl(u->fd, UFFDIO_WRITEPROTECT, &arg) < 0)
		return -errno;
	return 0;
}

int uffd_next_fault(struct uffd *u, int timeout_ms, uint64_t *gpa)
{
	struct pollfd pfd = { .fd = u->fd, .events = POLLIN };
	struct uffd_msg msg;
	ssize_t n;
	int rc = poll(&pfd, 1, timeout_ms);
	bool wp;

	if (rc <= 0)
		return rc < 0 && errno != EINTR ? -errno : 0;
	n = read(u->fd, &msg, sizeof(msg));
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT)
		return 0;
	wp = msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP;
	if (wp != (u->mode == UFFD_MODE_WP) || msg.arg.pagefault.address < (uintptr_t)u->base)
		return 0;
	*gpa = msg.arg.pagefault.address - (uint64_t)(uintptr_t)u->base;
	return *gpa < u->size;
}

int uffd_fill(struct uffd *u, uint64_t gpa, const void *src, uint64_t len)
{
	uint64_t base = (uint64_t)(uintptr_t)u->base + gpa;

	/* All at once, or page by page past pages that exist (EEXIST) or a racing
	 * change of the range (EAGAIN). */
	for (uint64_t off = 0; off < len;) {
		struct uffdio_copy cp = { .dst = base + off,
					  .src = (uint64_t)(uintptr_t)src + off, .len = len - off };

		if (ioctl(u->fd, UFFDIO_COPY, &cp) == 0)
			off = len;
		else if (errno == EEXIST || errno == EAGAIN)
			off += cp.copy > 0 ? (uint64_t)cp.copy : PAGE_SIZE;
		else
			return -errno;
	}
	return 0;
}

int uffd_zero(struct uffd *u, uint64_t gpa, uint64_t len)
{
	struct uffdio_zeropage z = {
		.range = { .start = (uint64_t)(uintptr_t)u->base + gpa, .len = len },
	};

	if (ioctl(u->fd, UFFDIO_ZEROPAGE, &z) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

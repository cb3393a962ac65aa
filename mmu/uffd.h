/*
 * uffd.h - userfaultfd over guest RAM, the monitor's one way to it (no policy here).
 */
#ifndef CCVM_UFFD_H
#define CCVM_UFFD_H

#include <stdbool.h>
#include <stdint.h>

enum uffd_mode {
	UFFD_MODE_WP,       /* write protection: snapshots (snapshot/engine.c) */
	UFFD_MODE_MISSING,  /* first touch of absent pages: lazy restore (snapshot/lazy.c) */
};

struct uffd {
	int fd;
	uint8_t *base;   /* host address of guest-physical 0 */
	uint64_t size;
	enum uffd_mode mode;
};

#define UFFD_DEV_PATH "/dev/userfaultfd"

/* Open /dev/userfaultfd for every later uffd_open: called before the monitor gives up
 * its capabilities (vmm/confine_caps.c), so that its userfaultfds need none. 0, or
 * -errno (no such device before Linux 6.1, or not root): uffd_open then uses the
 * system call. */
int uffd_dev_open(void);
bool uffd_dev_ready(void);

/* Open a userfaultfd and register all of [base, base + size) in @mode; on failure
 * nothing stays open (u->fd is -1). Returns 0 or -errno (EPERM: an unprivileged user
 * with vm.unprivileged_userfaultfd=0 and no /dev/userfaultfd open). */
int uffd_open(struct uffd *u, uint8_t *base, uint64_t size, enum uffd_mode mode);
void uffd_close(struct uffd *u);
/* Register [gpa, gpa + len) again, in the descriptor's mode: a host range mapped anew
 * (gmem_alias) is a new mapping the descriptor does not cover yet. 0 or -errno. */
int uffd_register(struct uffd *u, uint64_t gpa, uint64_t len);

/* WP mode: protect or unprotect [gpa, gpa + len); unprotecting wakes threads waiting
 * there. */
int uffd_protect(struct uffd *u, uint64_t gpa, uint64_t len, bool protect);

/* Wait up to @timeout_ms for a fault of the registered mode; returns 1 with *gpa set,
 * 0 on timeout or another event, -errno on error. */
int uffd_next_fault(struct uffd *u, int timeout_ms, uint64_t *gpa);

/* MISSING mode: fill [gpa, gpa + len) from @src, waking whoever waits there. Pages
 * that exist already are skipped (page by page, so a racing fill costs nothing). */
int uffd_fill(struct uffd *u, uint64_t gpa, const void *src, uint64_t len);
/* The same with zeros. */
int uffd_zero(struct uffd *u, uint64_t gpa, uint64_t len);

#endif

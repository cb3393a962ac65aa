/*
 * wp.h - userfaultfd write protection of guest RAM (no policy here).
 */
#ifndef CCVM_WP_H
#define CCVM_WP_H

#include <stdbool.h>
#include <stdint.h>

struct wp {
	int fd;
	uint8_t *base;   /* host address of guest-physical 0 */
	uint64_t size;
};

/* Open a userfaultfd and register all of guest RAM in write-protect mode. */
int wp_open(struct wp *wp, uint8_t *base, uint64_t size);
void wp_close(struct wp *wp);

/* Protect or unprotect [gpa, gpa + len); unprotecting wakes threads waiting there. */
int wp_protect(struct wp *wp, uint64_t gpa, uint64_t len, bool protect);

/* Wait up to @timeout_ms for a write fault; returns 1 with *gpa set, 0 on timeout or
 * a non-WP event, -errno on error. */
int wp_next_fault(struct wp *wp, int timeout_ms, uint64_t *gpa);

/* A fault is waiting to be read (someone is stopped on a protected page). */
bool wp_fault_pending(struct wp *wp);

#endif

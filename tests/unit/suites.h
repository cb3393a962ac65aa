/*
 * suites.h - one Check suite per module; main.c runs them all.
 */
#ifndef CCVM_TEST_SUITES_H
#define CCVM_TEST_SUITES_H

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

Suite *elf_suite(void);
Suite *gmem_suite(void);
Suite *pagetable_suite(void);
Suite *aspace_suite(void);
Suite *stack_suite(void);
Suite *ctl_proto_suite(void);
Suite *vma_suite(void);
Suite *cli_suite(void);
Suite *cpu_tables_suite(void);
Suite *image_suite(void);
Suite *codec_auto_suite(void);
Suite *snapshot_suite(void);
Suite *coverage_suite(void);
Suite *net_suite(void);
Suite *fastio_suite(void);
Suite *hostile_suite(void);
Suite *control_suite(void);
Suite *restore_policy_suite(void);
Suite *oci_suite(void);
Suite *confine_suite(void);
Suite *engine_suite(void);
Suite *personality_suite(void);
Suite *tracker_suite(void);
Suite *cpufeat_suite(void);
Suite *sigfwd_suite(void);
Suite *stages_suite(void);
Suite *migstream_suite(void);
Suite *migsend_suite(void);
Suite *tls_suite(void);

#define CHILD_OUT_MAX 4096

/* In a child of run_child: report what went wrong on stderr and fail. */
#define CHILD_CHECK(cond)                                                               \
	do {                                                                            \
		if (!(cond)) {                                                          \
			dprintf(STDERR_FILENO, "%s:%d: %s failed (errno %d)\n", __FILE__, \
				__LINE__, #cond, errno);                                \
			_exit(1);                                                       \
		}                                                                       \
	} while (0)

struct child_result {
	int status;              /* from waitpid */
	char err[CHILD_OUT_MAX]; /* what the child wrote on stderr */
	long maxrss_kib;         /* the child's peak resident set (getrusage) */
};

/* Run @fn(@arg) in a child with stderr captured; the child exits 0 if @fn returns. */
void run_child(void (*fn)(void *), void *arg, struct child_result *r);

/* The zstd-compressed fixture @zst (of @size bytes unpacked) written to @to. */
void fixture_unpack(const char *zst, size_t size, const char *to);

#endif

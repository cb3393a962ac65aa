/*
 * suites.h - one Check suite per module; main.c runs them all.
 */
#ifndef CCVM_TEST_SUITES_H
#define CCVM_TEST_SUITES_H

#include <check.h>
#include <stdbool.h>

Suite *elf_suite(void);
Suite *gmem_suite(void);
Suite *pagetable_suite(void);
Suite *stack_suite(void);
Suite *ctl_proto_suite(void);
Suite *vma_suite(void);
Suite *cli_suite(void);
Suite *cpu_tables_suite(void);
Suite *image_suite(void);
Suite *snapshot_suite(void);
Suite *coverage_suite(void);
Suite *net_suite(void);
Suite *fastio_suite(void);
Suite *hostile_suite(void);
Suite *control_suite(void);
Suite *restore_policy_suite(void);

#endif

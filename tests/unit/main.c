/*
 * main.c - runs every unit-test suite; exits nonzero if any test fails.
 */
#include "suites.h"

#include <stdlib.h>

int main(void)
{
	SRunner *sr = srunner_create(elf_suite());
	int failed;

	srunner_add_suite(sr, gmem_suite());
	srunner_add_suite(sr, pagetable_suite());
	srunner_add_suite(sr, aspace_suite());
	srunner_add_suite(sr, stack_suite());
	srunner_add_suite(sr, ctl_proto_suite());
	srunner_add_suite(sr, vma_suite());
	srunner_add_suite(sr, cli_suite());
	srunner_add_suite(sr, cpu_tables_suite());
	srunner_add_suite(sr, image_suite());
	srunner_add_suite(sr, codec_auto_suite());
	srunner_add_suite(sr, snapshot_suite());
	srunner_add_suite(sr, coverage_suite());
	srunner_add_suite(sr, net_suite());
	srunner_add_suite(sr, fastio_suite());
	srunner_add_suite(sr, hostile_suite());
	srunner_add_suite(sr, control_suite());
	srunner_add_suite(sr, restore_policy_suite());
	srunner_add_suite(sr, oci_suite());
	srunner_add_suite(sr, confine_suite());
	srunner_add_suite(sr, engine_suite());
	srunner_add_suite(sr, personality_suite());
	srunner_add_suite(sr, tracker_suite());
	srunner_add_suite(sr, cpufeat_suite());
	srunner_add_suite(sr, sigfwd_suite());
	srunner_add_suite(sr, stages_suite());
	srunner_add_suite(sr, migstream_suite());
	srunner_add_suite(sr, migsend_suite());
	srunner_add_suite(sr, tls_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

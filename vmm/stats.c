/*
 * stats.c - names of the VM exit counters, as reported by `ccvm ctl PATH stats`.
 */
#include "stats.h"

const char *stats_exit_name(enum exit_kind kind)
{
	static const char *const names[EXIT_NR] = {
		[EXIT_SYSCALL] = "syscall",   [EXIT_EXCEPTION] = "exception",
		[EXIT_KICK] = "kick",         [EXIT_IO_OTHER] = "io_other",
		[EXIT_MMIO] = "mmio",         [EXIT_HLT] = "hlt",
		[EXIT_SHUTDOWN] = "shutdown", [EXIT_INTERNAL] = "internal_error",
		[EXIT_FAIL_ENTRY] = "fail_entry", [EXIT_OTHER] = "other",
	};

	return (unsigned)kind < EXIT_NR ? names[kind] : "?";
}

/*
 * syscost.c - cost of one system call round trip, and of one bare VM exit.
 * Usage: syscost getpid|cpuid N
 *   getpid: N getpid system calls (in ccvm: exit to the monitor, handler, return)
 *   cpuid:  N cpuid instructions (in a VM: an exit that KVM handles in the kernel,
 *           never reaching the monitor: the floor under any exit)
 *   stub:   N getpid calls made by jumping to ccvm's syscall stub directly, without
 *           the `syscall` instruction (ccvm only: isolates the cost of the one exit
 *           that reaches the monitor)
 * Prints "mode=M calls=N ns_per_call=X".
 */
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "getpid";
	long n = argc > 2 ? atol(argv[2]) : 10000;
	unsigned a, b, c, d, acc = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++) {
		if (strcmp(mode, "cpuid") == 0) {
			__cpuid(0, a, b, c, d);
			acc += a;
		} else if (strcmp(mode, "stub") == 0) {
			long ret;

			__asm__ volatile("lea 1f(%%rip), %%rcx\n\t"
					 "pushfq\n\tpop %%r11\n\t"
					 "movabs $0x200000, %%rdx\n\t"
					 "jmp *%%rdx\n"
					 "1:"
					 : "=a"(ret)
					 : "a"((long)SYS_getpid)
					 : "rcx", "r11", "rdx", "memory");
			acc += (unsigned)ret;
		} else {
			acc += (unsigned)syscall(SYS_getpid);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("mode=%s calls=%ld ns_per_call=%.1f (%u)\n", mode, n,
	       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)(n ? n : 1),
	       acc ? 1U : 0U);
	return 0;
}

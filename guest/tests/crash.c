/*
 * crash.c - ways a program dies: its exit status must match natively and in ccvm.
 * Usage: crash null|ud2|div0|abort|int3|exit N
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	volatile int zero = 0;

	if (argc < 2)
		return 2;
	fflush(stdout);
	if (!strcmp(argv[1], "null"))
		return *(volatile int *)(uintptr_t)zero;
	if (!strcmp(argv[1], "ud2"))
		__asm__ volatile("ud2");
	if (!strcmp(argv[1], "div0")) {
		unsigned q = 1, d = (unsigned)zero;
		__asm__ volatile("xor %%edx, %%edx\n\tdivl %1" : "+a"(q) : "r"(d) : "rdx");
		return (int)q;
	}
	if (!strcmp(argv[1], "abort"))
		abort();
	if (!strcmp(argv[1], "int3"))
		__asm__ volatile("int3");
	if (!strcmp(argv[1], "exit") && argc > 2)
		exit(atoi(argv[2]));
	return 3;
}

/*
 * stack.h - the initial stack of a Linux process: argc, argv, envp, auxv, strings.
 */
#ifndef CCVM_STACK_H
#define CCVM_STACK_H

#include <stddef.h>
#include <stdint.h>

#define STACK_MAX_AUXV 32

struct stack_auxv {
	uint64_t type, val;
};

struct stack_args {
	int argc;
	char *const *argv;
	int envc;
	char *const *envp;
	const char *execfn;      /* AT_EXECFN string */
	const char *platform;    /* AT_PLATFORM string */
	uint8_t random[16];      /* AT_RANDOM bytes */
	int n_auxv;              /* entries besides the three above and AT_NULL */
	struct stack_auxv auxv[STACK_MAX_AUXV];
};

/*
 * stack_build - lay out the initial process stack as the kernel does.
 * @host: host pointer that corresponds to guest address @top - @size
 * @top:  guest address just above the stack (16-byte aligned)
 * @size: bytes available for the initial stack contents
 * @rsp:  gets the guest stack pointer to start the program with (points at argc)
 *
 * From high to low: the strings (argv, envp, execfn, platform), the random bytes, then
 * 16-byte aligned: auxv (ending in AT_NULL), envp (NULL-terminated), argv
 * (NULL-terminated), argc. Returns 0 or -E2BIG when it does not fit in @size.
 */
int stack_build(uint8_t *host, uint64_t top, uint64_t size, const struct stack_args *a,
		uint64_t *rsp);

#endif

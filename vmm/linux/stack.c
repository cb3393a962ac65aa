/*
 * stack.c - build the initial stack a Linux program expects at its entry point.
 *
 * Both glibc and musl read argc at the stack pointer, then the argv and envp arrays,
 * then the auxiliary vector that tells them the page size, where their program
 * headers are (to set up TLS), where the vDSO is, and where 16 random bytes are (the
 * stack protector and pointer guard seeds). This is a pure function over a buffer so
 * the layout can be checked without a VM.
 */
#include "stack.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

struct stack_cursor {
	uint8_t *host;    /* host address of guest address base */
	uint64_t base;    /* lowest usable guest address */
	uint64_t sp;      /* current guest address, grows down */
};

static int cursor_push(struct stack_cursor *c, const void *data, size_t len, uint64_t *at)
{
	if (c->sp - c->base < len)
		return -E2BIG;
	c->sp -= len;
	memcpy(c->host + (c->sp - c->base), data, len);
	if (at)
		*at = c->sp;
	return 0;
}

static int cursor_push_str(struct stack_cursor *c, const char *s, uint64_t *at)
{
	return cursor_push(c, s, strlen(s) + 1, at);
}

static void cursor_put64(struct stack_cursor *c, uint64_t addr, uint64_t val)
{
	memcpy(c->host + (addr - c->base), &val, sizeof(val));
}

int stack_build(uint8_t *host, uint64_t top, uint64_t size, const struct stack_args *a,
		uint64_t *rsp)
{
	struct stack_cursor c = { .host = host, .base = top - size, .sp = top };
	uint64_t execfn_at, platform_at, random_at, words, p;
	uint64_t argv_at[a->argc + 1], envp_at[a->envc + 1];
	int n_auxv = a->n_auxv + 4; /* + EXECFN, PLATFORM, RANDOM, NULL */
	int rc;

	/* An 8-byte zero word at the very top, as Linux leaves there. */
	rc = cursor_push(&c, &(uint64_t){ 0 }, 8, NULL);
	if (!rc)
		rc = cursor_push_str(&c, a->execfn, &execfn_at);
	for (int i = a->envc - 1; !rc && i >= 0; i--)
		rc = cursor_push_str(&c, a->envp[i], &envp_at[i]);
	for (int i = a->argc - 1; !rc && i >= 0; i--)
		rc = cursor_push_str(&c, a->argv[i], &argv_at[i]);
	if (!rc)
		rc = cursor_push_str(&c, a->platform, &platform_at);
	if (!rc)
		rc = cursor_push(&c, a->random, sizeof(a->random), &random_at);
	if (rc)
		return rc;

	/* The pointer block: argc, argv[] NULL, envp[] NULL, auxv pairs. It must end
	 * with the stack pointer 16-byte aligned at argc (the ABI's process entry). */
	words = 1 + (uint64_t)a->argc + 1 + (uint64_t)a->envc + 1 + 2 * (uint64_t)n_auxv;
	c.sp &= ~15ULL;
	if (c.sp - c.base < words * 8)
		return -E2BIG;
	c.sp -= words * 8;
	c.sp &= ~15ULL;
	p = c.sp;
	cursor_put64(&c, p, (uint64_t)a->argc);
	p += 8;
	for (int i = 0; i < a->argc; i++, p += 8)
		cursor_put64(&c, p, argv_at[i]);
	cursor_put64(&c, p, 0);
	p += 8;
	for (int i = 0; i < a->envc; i++, p += 8)
		cursor_put64(&c, p, envp_at[i]);
	cursor_put64(&c, p, 0);
	p += 8;
	for (int i = 0; i < a->n_auxv; i++, p += 16) {
		cursor_put64(&c, p, a->auxv[i].type);
		cursor_put64(&c, p + 8, a->auxv[i].val);
	}
	const struct stack_auxv tail[4] = {
		{ AT_EXECFN, execfn_at },
		{ AT_PLATFORM, platform_at },
		{ AT_RANDOM, random_at },
		{ AT_NULL, 0 },
	};
	for (int i = 0; i < 4; i++, p += 16) {
		cursor_put64(&c, p, tail[i].type);
		cursor_put64(&c, p + 8, tail[i].val);
	}
	*rsp = c.sp;
	return 0;
}

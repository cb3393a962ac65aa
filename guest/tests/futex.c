/*
 * futex.c - futex(2) as a single-threaded program sees it: wakes wake nobody, a wait
 * on a changed word returns EAGAIN, a wait with a timeout times out, WAKE_OP applies
 * its operation, CMP_REQUEUE compares, bad words are refused. Prints one line per
 * call; the e2e tests compare ccvm's output with the host's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

/* The futex ABI (linux/futex.h, which musl's headers do not reach). */
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_WAIT_BITSET 9
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_WAKE_PRIVATE (FUTEX_WAKE | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAIT_PRIVATE (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)
#define FUTEX_CMP_REQUEUE_PRIVATE (FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_OP_PRIVATE (FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAIT_BITSET_PRIVATE (FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG)
#define FUTEX_BITSET_MATCH_ANY 0xffffffffU
#define FUTEX_OP_ADD 1
#define FUTEX_OP_OR 2
#define FUTEX_OP_OPARG_SHIFT 8
#define FUTEX_OP_CMP_EQ 0
#define FUTEX_OP(op, oparg, cmp, cmparg) \
	((((op) & 0xf) << 28) | (((cmp) & 0xf) << 24) | (((oparg) & 0xfff) << 12) | ((cmparg) & 0xfff))

static uint32_t word = 5, word2 = 0x10;

static long futex(void *uaddr, int op, uint32_t val, const struct timespec *ts, void *uaddr2,
		  uint32_t val3)
{
	return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}

int main(void)
{
	struct timespec rel = { .tv_nsec = 50 * 1000 * 1000 }, abs;
	double t0;
	long r;

	show("wake", futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));
	show("wake shared", futex(&word, FUTEX_WAKE, 10, NULL, NULL, 0));
	show("wait, word changed", futex(&word, FUTEX_WAIT_PRIVATE, 4, NULL, NULL, 0));
	t0 = mono();
	r = futex(&word, FUTEX_WAIT_PRIVATE, 5, &rel, NULL, 0);
	show("wait 50 ms", r);
	printf("waited at least 50 ms: %s\n", mono() - t0 >= 0.049 ? "yes" : "no");
	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_nsec += 20 * 1000 * 1000;
	if (abs.tv_nsec >= 1000000000L) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000L;
	}
	show("wait_bitset until +20 ms",
	     futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 5, &abs, NULL, FUTEX_BITSET_MATCH_ANY));
	show("wait_bitset, bitset 0", futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 5, &abs, NULL, 0));
	show("wake_op add 3", futex(&word, FUTEX_WAKE_OP_PRIVATE, 1, (void *)1, &word2,
				    FUTEX_OP(FUTEX_OP_ADD, 3, FUTEX_OP_CMP_EQ, 0)));
	printf("word2 after add: %#x\n", word2);
	show("wake_op or 1<<8", futex(&word, FUTEX_WAKE_OP_PRIVATE, 1, (void *)1, &word2,
				      FUTEX_OP((FUTEX_OP_OR | FUTEX_OP_OPARG_SHIFT), 8, FUTEX_OP_CMP_EQ, 0)));
	printf("word2 after or: %#x\n", word2);
	show("cmp_requeue, mismatch", futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)1, &word2, 9));
	show("cmp_requeue, match", futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)1, &word2, 5));
	show("unaligned word", futex((char *)&word + 1, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));
	show("word at address 8", futex((void *)8, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0));
	return 0;
}

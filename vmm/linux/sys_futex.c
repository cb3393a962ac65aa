/*
 * sys_futex.c - futex(2) for a guest with one thread.
 *
 * Until guest threads run as vCPUs, no other guest thread can wait on a futex word or
 * wake one, so the calls reduce to their checks and effects on the word: a wake wakes
 * nobody (0); a wait returns EAGAIN when the word no longer holds the expected value,
 * and otherwise sleeps until its timeout, as Linux would (nobody can wake it), or for
 * good without one; WAKE_OP still applies its operation to the second word; a
 * compare-requeue still compares. Dynamic glibc calls it for once-only initialisation
 * (locale data, say), where the word is never contended. Priority-inheritance and
 * other operations answer ENOSYS.
 */
#include "sys.h"
#include "../log.h"

#include <limits.h>
#include <linux/futex.h>
#include <time.h>

#define FUTEX_WORD_ALIGN 4

/* The guest's futex word at @gva into *@word: -EINVAL when unaligned, -EFAULT
 * outside user memory. */
static int futex_word(struct lx_call *c, uint64_t gva, uint32_t **word)
{
	if (gva % FUTEX_WORD_ALIGN)
		return -EINVAL;
	*word = lx_uptr(c, gva, sizeof(uint32_t));
	return *word ? 0 : -EFAULT;
}

/* Nobody will wake this wait: sleep until @deadline_ns on @clock, or for good. */
static int64_t futex_sleep(struct lx_call *c, int clock, bool timed, int64_t deadline_ns)
{
	if (timed) {
		lx_sleep_until(c, clock, deadline_ns, NULL);
		return -ETIMEDOUT;
	}
	lx_block_begin(c); /* for good: the VM ends around it (exit, quit) */
	for (;;) {
		struct timespec hour = { .tv_sec = 3600 };

		nanosleep(&hour, NULL);
	}
}

/* FUTEX_WAIT (relative timeout, monotonic) and FUTEX_WAIT_BITSET (absolute). */
static int64_t futex_wait(struct lx_call *c, int cmd, bool realtime)
{
	int clock = realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC;
	int64_t ns = 0, now;
	uint32_t *word;
	int rc = futex_word(c, c->a[0], &word);

	if (rc)
		return rc;
	if (cmd == FUTEX_WAIT_BITSET && (uint32_t)c->a[5] == 0)
		return -EINVAL;
	if (c->a[3]) {
		rc = lx_read_timespec(c, c->a[3], &ns);
		if (rc)
			return rc;
	}
	if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != (uint32_t)c->a[2])
		return -EAGAIN;
	if (c->a[3] && cmd == FUTEX_WAIT) {
		rc = lx_clock_now(c->p, CLOCK_MONOTONIC, &now);
		if (rc)
			return rc;
		ns += now;
	}
	return futex_sleep(c, clock, c->a[3] != 0, ns);
}

/* FUTEX_WAKE_OP: apply the operation encoded in val3 to the second word (then wake
 * waiters on either word, of which there are none). */
static int64_t futex_wake_op(struct lx_call *c)
{
	uint32_t *word, *word2, val3 = (uint32_t)c->a[5];
	uint32_t op = (val3 >> 28) & 7, oparg = (val3 >> 12) & 0xfff;
	int rc = futex_word(c, c->a[0], &word);

	if (!rc)
		rc = futex_word(c, c->a[4], &word2);
	if (rc)
		return rc;
	if (val3 >> 31) /* FUTEX_OP_OPARG_SHIFT */
		oparg = oparg < 32 ? 1U << oparg : 0;
	switch (op) {
	case FUTEX_OP_SET:
		__atomic_exchange_n(word2, oparg, __ATOMIC_ACQ_REL);
		break;
	case FUTEX_OP_ADD:
		__atomic_fetch_add(word2, oparg, __ATOMIC_ACQ_REL);
		break;
	case FUTEX_OP_OR:
		__atomic_fetch_or(word2, oparg, __ATOMIC_ACQ_REL);
		break;
	case FUTEX_OP_ANDN:
		__atomic_fetch_and(word2, ~oparg, __ATOMIC_ACQ_REL);
		break;
	case FUTEX_OP_XOR:
		__atomic_fetch_xor(word2, oparg, __ATOMIC_ACQ_REL);
		break;
	default:
		return -ENOSYS;
	}
	return 0;
}

int64_t sys_futex(struct lx_call *c)
{
	int op = (int)c->a[1], cmd = op & FUTEX_CMD_MASK, rc;
	bool realtime = op & FUTEX_CLOCK_REALTIME;
	uint32_t *word, *word2;

	switch (cmd) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
		return futex_wait(c, cmd, realtime);
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
		if (cmd == FUTEX_WAKE_BITSET && (uint32_t)c->a[5] == 0)
			return -EINVAL;
		return futex_word(c, c->a[0], &word);
	case FUTEX_REQUEUE:
	case FUTEX_CMP_REQUEUE:
		rc = futex_word(c, c->a[0], &word);
		if (!rc)
			rc = futex_word(c, c->a[4], &word2);
		if (rc)
			return rc;
		if (cmd == FUTEX_CMP_REQUEUE &&
		    __atomic_load_n(word, __ATOMIC_ACQUIRE) != (uint32_t)c->a[5])
			return -EAGAIN;
		return 0;
	case FUTEX_WAKE_OP:
		return futex_wake_op(c);
	default:
		return -ENOSYS;
	}
}

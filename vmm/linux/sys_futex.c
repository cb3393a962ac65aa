/*
 * sys_futex.c - futex(2): guest threads wait and wake on host futexes.
 *
 * Guest RAM is ordinary memory of the monitor process and every guest thread is a
 * host thread of that process (a vCPU), so a guest futex word *is* a host futex word:
 * each operation becomes the same host futex operation on the word's host address.
 * The host kernel then does the atomic compare-and-sleep, the wake-ups, requeueing
 * and WAKE_OP's atomic update, with all of Linux' ordering guarantees, and a guest
 * thread blocked in a wait blocks only its own vCPU. A guest's private futex is a
 * private host one; a shared one is shared on the host too, for in a shared mapping
 * (shm.c) each process reaches the word at its own host address, and only the host's
 * shared futexes key a word by the page it is in. Only timeouts need translating: the guest's clocks are not the host's (a
 * restored guest's monotonic clock continues from its snapshot), so an absolute guest
 * deadline becomes an absolute host CLOCK_MONOTONIC one. Priority-inheritance and
 * other operations answer ENOSYS.
 */
#include "sys.h"
#include "../../base/log.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FUTEX_WORD_ALIGN 4
#define NSEC_PER_SEC_F   1000000000LL
#define ROBUST_LIST_LIMIT 2048 /* as Linux: a longer (or circular) list is not walked on */

/* struct robust_list_head (linux/futex.h), in guest memory. */
struct lx_robust_head {
	uint64_t next;          /* first entry; the list ends where it points back here */
	int64_t futex_offset;   /* from an entry to its lock's futex word */
	uint64_t pending;       /* an entry being locked or unlocked right now */
};

/* The guest's futex word at @gva into *@word: -EINVAL when unaligned, -EFAULT
 * outside user memory. */
/* The host address of an aligned futex word in user memory, or NULL. */
static uint32_t *futex_host_word(struct gmem *mem, uint64_t gva)
{
	return gva % FUTEX_WORD_ALIGN ? NULL : gmem_user_ptr(mem, gva, sizeof(uint32_t));
}

static int futex_word(struct lx_call *c, uint64_t gva, uint32_t **word)
{
	if (gva % FUTEX_WORD_ALIGN)
		return -EINVAL;
	*word = futex_host_word(c->p->mem, gva);
	return *word ? 0 : -EFAULT;
}

/* The guest's own choice of a private or a shared futex, for the host call. */
static int futex_priv(const struct lx_call *c)
{
	return (int)(c->a[1] & FUTEX_PRIVATE_FLAG);
}

static long host_futex(uint32_t *word, int op, uint32_t val, const void *ts_or_val2,
		       uint32_t *word2, uint32_t val3)
{
	return syscall(SYS_futex, word, op, val, ts_or_val2, word2, val3);
}

/* Guest deadline @deadline_ns on guest clock @clock as a host CLOCK_MONOTONIC time. */
static int futex_host_deadline(struct lx_call *c, int clock, int64_t deadline_ns,
			       struct timespec *host)
{
	int64_t now, host_ns;
	int rc = lx_clock_now(c->p, clock, &now);

	if (rc)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, host);
	host_ns = (int64_t)host->tv_sec * NSEC_PER_SEC_F + host->tv_nsec;
	if (deadline_ns > now)
		host_ns += deadline_ns - now > INT64_MAX / 4 ? INT64_MAX / 4 : deadline_ns - now;
	host->tv_sec = host_ns / NSEC_PER_SEC_F;
	host->tv_nsec = host_ns % NSEC_PER_SEC_F;
	return 0;
}

/* FUTEX_WAIT (relative timeout on the monotonic clock) and FUTEX_WAIT_BITSET
 * (absolute, monotonic or realtime): both become a host WAIT_BITSET with an absolute
 * monotonic deadline, so a wait interrupted by a kick (pause, snapshot) resumes with
 * the deadline it had. */
static int64_t futex_wait(struct lx_call *c, int cmd, bool realtime)
{
	uint32_t bitset = cmd == FUTEX_WAIT_BITSET ? (uint32_t)c->a[5] : FUTEX_BITSET_MATCH_ANY;
	int clock = realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC;
	struct timespec host_deadline;
	int64_t ns = 0, now;
	uint32_t *word;
	long r;
	int rc = futex_word(c, c->a[0], &word);

	if (rc)
		return rc;
	if (bitset == 0)
		return -EINVAL;
	if (c->a[3]) {
		rc = lx_read_timespec(c, c->a[3], &ns);
		if (!rc && cmd == FUTEX_WAIT) {
			clock = CLOCK_MONOTONIC;
			rc = lx_clock_now(c->p, clock, &now);
			ns += now;
		}
		if (!rc)
			rc = futex_host_deadline(c, clock, ns, &host_deadline);
		if (rc)
			return rc;
	}
	lx_wait_begin(c);
	do {
		r = host_futex(word, FUTEX_WAIT_BITSET | futex_priv(c), (uint32_t)c->a[2],
			       c->a[3] ? &host_deadline : NULL, NULL, bitset);
		rc = r < 0 ? -errno : 0;
		/* A signal ends the wait: made again under SA_RESTART, as in Linux, unless
		 * it had a timeout (then EINTR). */
	} while (rc == -EINTR &&
		 !(rc = lx_sig_eintr(c, c->a[3] ? LX_ERESTART_RESTARTBLOCK : LX_ERESTARTSYS)));
	lx_wait_end(c);
	return rc ? rc : r;
}

int64_t sys_futex(struct lx_call *c)
{
	int op = (int)c->a[1], cmd = op & FUTEX_CMD_MASK, rc;
	bool realtime = op & FUTEX_CLOCK_REALTIME;
	uint32_t *word, *word2;

	if (realtime && cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET)
		return -ENOSYS; /* as Linux: the clock flag means nothing to the others */
	switch (cmd) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
		return futex_wait(c, cmd, realtime);
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
		rc = futex_word(c, c->a[0], &word);
		if (rc)
			return rc;
		return host_ret(host_futex(word, FUTEX_WAKE_BITSET | futex_priv(c), (uint32_t)c->a[2],
					   NULL, NULL,
					   cmd == FUTEX_WAKE ? FUTEX_BITSET_MATCH_ANY
							     : (uint32_t)c->a[5]));
	case FUTEX_REQUEUE:
	case FUTEX_CMP_REQUEUE:
	case FUTEX_WAKE_OP:
		rc = futex_word(c, c->a[0], &word);
		if (!rc)
			rc = futex_word(c, c->a[4], &word2);
		if (rc)
			return rc;
		/* The fourth argument is a count here, not a timeout. */
		return host_ret(host_futex(word, cmd | futex_priv(c), (uint32_t)c->a[2],
					   (const void *)(uintptr_t)(uint32_t)c->a[3], word2,
					   (uint32_t)c->a[5]));
	default:
		return -ENOSYS;
	}
}

/* The dying thread @tid held the robust lock whose entry is @entry: mark it
 * OWNER_DIED and wake a waiter, who then gets EOWNERDEAD (Linux' handle_futex_death). */
static void robust_release(struct lx_proc *p, uint64_t entry, int64_t offset, int tid)
{
	/* Bit 0 of an entry marks a priority-inheritance lock. */
	uint32_t *word = futex_host_word(p->mem, (entry & ~1ULL) + (uint64_t)offset), old;

	if (!word)
		return;
	old = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	do {
		if ((old & FUTEX_TID_MASK) != (uint32_t)tid)
			return;
	} while (!__atomic_compare_exchange_n(word, &old, (old & FUTEX_WAITERS) | FUTEX_OWNER_DIED,
					      false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	if (old & FUTEX_WAITERS)
		host_futex(word, FUTEX_WAKE, 1, NULL, NULL, 0); /* shared, as Linux wakes it */
}

void lx_futex_exit_robust(struct lx_proc *p, uint64_t head_gva, int tid)
{
	const struct lx_robust_head *head = gmem_user_ptr(p->mem, head_gva, sizeof(*head));
	uint64_t entry, pending;
	int64_t offset;

	if (!head_gva || !head)
		return;
	entry = head->next;
	offset = head->futex_offset;
	pending = head->pending;
	for (int n = 0; entry != head_gva && n < ROBUST_LIST_LIMIT; n++) {
		const uint64_t *next = gmem_user_ptr(p->mem, entry & ~1ULL, sizeof(*next));

		if (!next)
			break;
		if (entry != pending)
			robust_release(p, entry, offset, tid);
		entry = *next;
	}
	if (pending)
		robust_release(p, pending, offset, tid);
}

/* A thread's exit with CLONE_CHILD_CLEARTID / set_tid_address: zero the word and wake
 * one waiter (pthread_join sleeps on it), as Linux does in mm_release. */
void lx_futex_clear_tid(struct lx_proc *p, uint64_t gva)
{
	uint32_t *word = gva ? futex_host_word(p->mem, gva) : NULL;

	if (!word)
		return;
	__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	host_futex(word, FUTEX_WAKE, 1, NULL, NULL, 0); /* shared: glibc's join waits so */
}

/*
 * sys_misc.c - process, identity, time and resource system calls.
 *
 * Identity answers are the host's (the guest runs as the user who started ccvm);
 * resource limits are the guest's own, recorded here and never applied to the
 * monitor. Signals are signal.c's.
 */
#include "sys.h"
#include "../../base/log.h"

#include <asm/prctl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL
#define LX_TIMER_ABSTIME 1
#define LX_ROBUST_HEAD_SIZE 24 /* sizeof(struct robust_list_head) */
#define LX_GROUPS_MAX       256 /* supplementary groups compared by setgroups */

int64_t sys_arch_prctl(struct lx_call *c)
{
	uint64_t *out;

	switch (c->a[0]) {
	case ARCH_SET_FS:
	case ARCH_SET_GS:
		if (c->a[1] >> 47)
			return -EPERM; /* not a canonical user address */
		if (c->a[0] == ARCH_SET_FS)
			c->segs->fs_base = c->a[1];
		else
			c->segs->gs_base = c->a[1];
		c->segs_dirty = true;
		return 0;
	case ARCH_GET_FS:
	case ARCH_GET_GS:
		out = lx_uptr(c, c->a[1], sizeof(*out));
		if (!out)
			return -EFAULT;
		*out = c->a[0] == ARCH_GET_FS ? c->segs->fs_base : c->segs->gs_base;
		return 0;
	default:
		return -EINVAL;
	}
}

int64_t sys_set_robust_list(struct lx_call *c)
{
	if (c->a[1] != LX_ROBUST_HEAD_SIZE)
		return -EINVAL;
	c->t->robust_list = c->a[0];
	c->t->robust_len = c->a[1];
	return 0;
}

/* Only the caller's own list: another thread's is not the caller's business here. */
int64_t sys_get_robust_list(struct lx_call *c)
{
	uint64_t *head = lx_uptr(c, c->a[1], sizeof(*head));
	uint64_t *len = lx_uptr(c, c->a[2], sizeof(*len));

	if (c->a[0] && (int)c->a[0] != c->t->tid)
		return -ESRCH;
	if (!head || !len)
		return -EFAULT;
	*head = c->t->robust_list;
	*len = LX_ROBUST_HEAD_SIZE;
	return 0;
}

int64_t sys_rseq(struct lx_call *c)
{
	(void)c;
	return -ENOSYS; /* glibc and musl then simply do not use restartable sequences */
}

static int64_t lx_rlimit(struct lx_call *c, uint64_t resource, uint64_t unew, uint64_t uold)
{
	struct rlimit nl, ol;

	if (resource >= RLIM_NLIMITS)
		return -EINVAL;
	if (unew && lx_copy_in(c, &nl, unew, sizeof(nl)))
		return -EFAULT;
	if (uold && !gmem_user_range_ok(c->p->mem, uold, sizeof(ol)))
		return -EFAULT;
	if (unew && nl.rlim_cur > nl.rlim_max)
		return -EINVAL;
	pthread_mutex_lock(&c->p->lock);
	ol = c->p->rlim[resource];
	if (unew)
		c->p->rlim[resource] = nl;
	pthread_mutex_unlock(&c->p->lock);
	return uold ? lx_copy_out(c, uold, &ol, sizeof(ol)) : 0;
}

int64_t sys_prlimit64(struct lx_call *c)
{
	if (c->a[0] != 0 && c->a[0] != (uint64_t)c->p->pid)
		return -ESRCH;
	return lx_rlimit(c, c->a[1], c->a[2], c->a[3]);
}

int64_t sys_getrlimit(struct lx_call *c)
{
	return lx_rlimit(c, c->a[0], 0, c->a[1]);
}

int64_t sys_setrlimit(struct lx_call *c)
{
	return lx_rlimit(c, c->a[0], c->a[1], 0);
}

int64_t sys_uname(struct lx_call *c)
{
	struct utsname *u = lx_uptr(c, c->a[0], sizeof(*u));

	if (!u)
		return -EFAULT;
	return host_ret(uname(u));
}

int64_t sys_sysinfo(struct lx_call *c)
{
	struct sysinfo *si = lx_uptr(c, c->a[0], sizeof(*si));
	int64_t up;

	if (!si)
		return -EFAULT;
	if (sysinfo(si) < 0)
		return -errno;
	/* Memory figures are the VM's, not the host's. */
	si->mem_unit = 1;
	si->totalram = c->p->mem->size;
	si->freeram = c->p->mem->size / 2;
	si->sharedram = si->bufferram = 0;
	si->totalswap = si->freeswap = 0;
	si->procs = 1;
	if (lx_clock_now(c->p, CLOCK_BOOTTIME, &up) == 0)
		si->uptime = up / NSEC_PER_SEC;
	return 0;
}

int64_t sys_getpid(struct lx_call *c)
{
	return c->p->pid;
}

int64_t sys_gettid(struct lx_call *c)
{
	return c->t->tid;
}

int64_t sys_getuid(struct lx_call *c)
{
	(void)c;
	return getuid();
}

int64_t sys_geteuid(struct lx_call *c)
{
	(void)c;
	return geteuid();
}

int64_t sys_getgid(struct lx_call *c)
{
	(void)c;
	return getgid();
}

int64_t sys_getegid(struct lx_call *c)
{
	(void)c;
	return getegid();
}

int64_t sys_getgroups(struct lx_call *c)
{
	int n = (int)c->a[0];
	gid_t *list = NULL;

	if (n < 0)
		return -EINVAL;
	if (n && !(list = lx_uptr(c, c->a[1], (uint64_t)n * sizeof(gid_t))))
		return -EFAULT;
	return host_ret(getgroups(n, list));
}

/* The guest runs as the user who started ccvm and cannot become another: setting the
 * ids it has already succeeds (what a daemon told to run as that user does, such as
 * memcached -u root), any other is EPERM, as for an unprivileged process. */
static int64_t lx_same_id(uint64_t want, uint64_t have)
{
	/* uid_t and gid_t are 32 bits: "unchanged" is -1 in the low half (setresuid(-1, ...)
	 * as make calls it), whatever the upper half holds. */
	return (uint32_t)want == (uint32_t)-1 || (uint32_t)want == (uint32_t)have ? 0 : -EPERM;
}

int64_t sys_setuid(struct lx_call *c)
{
	return lx_same_id(c->a[0], getuid()) ?: lx_same_id(c->a[0], geteuid());
}

int64_t sys_setgid(struct lx_call *c)
{
	return lx_same_id(c->a[0], getgid()) ?: lx_same_id(c->a[0], getegid());
}

int64_t sys_setresuid(struct lx_call *c)
{
	return lx_same_id(c->a[0], getuid()) ?: lx_same_id(c->a[1], geteuid()) ?:
	       lx_same_id(c->a[2], geteuid());
}

int64_t sys_setresgid(struct lx_call *c)
{
	return lx_same_id(c->a[0], getgid()) ?: lx_same_id(c->a[1], getegid()) ?:
	       lx_same_id(c->a[2], getegid());
}

/* Supplementary groups the monitor has, or none beyond its own group: dropping them all
 * (setgroups(0, NULL), what daemons do before they change user) changes nothing the
 * guest could notice, so it succeeds, and so does asking for groups it has or its own
 * group (initgroups for the user ccvm runs as, as nginx's workers call it); any other
 * list is EPERM. */
int64_t sys_setgroups(struct lx_call *c)
{
	gid_t have[LX_GROUPS_MAX], want[LX_GROUPS_MAX];
	int n = getgroups(LX_GROUPS_MAX, have);
	uint64_t k = c->a[0];

	if (k > LX_GROUPS_MAX)
		return -EINVAL;
	if (k && lx_copy_in(c, want, c->a[1], k * sizeof(gid_t)))
		return -EFAULT;
	if (n < 0)
		return -EPERM;
	if (k == 0) {
		for (int i = 0; i < n; i++)
			if (have[i] != getgid())
				return -EPERM;
		return 0;
	}
	for (uint64_t i = 0; i < k; i++) {
		bool ok = want[i] == getgid();

		for (int j = 0; j < n && !ok; j++)
			ok = want[i] == have[j];
		if (!ok)
			return -EPERM;
	}
	return 0;
}

int64_t sys_sched_getaffinity(struct lx_call *c)
{
	uint64_t len = c->a[1];
	void *mask;
	long n;

	if (c->a[0] && c->a[0] != (uint64_t)c->p->pid && c->a[0] != (uint64_t)c->t->tid)
		return -ESRCH;
	if (len < sizeof(uint64_t) || len % sizeof(uint64_t))
		return -EINVAL;
	if (len > 1024)
		len = 1024;
	mask = lx_uptr(c, c->a[2], len);
	if (!mask)
		return -EFAULT;
	n = syscall(SYS_sched_getaffinity, 0, len, mask);
	return host_ret(n);
}

int64_t sys_sched_setaffinity(struct lx_call *c)
{
	(void)c;
	return 0; /* vCPUs are not pinned; accept and ignore */
}

int64_t sys_sched_yield(struct lx_call *c)
{
	(void)c;
	sched_yield();
	return 0;
}

int64_t sys_getcpu(struct lx_call *c)
{
	unsigned *cpu = c->a[0] ? lx_uptr(c, c->a[0], sizeof(unsigned)) : NULL;
	unsigned *node = c->a[1] ? lx_uptr(c, c->a[1], sizeof(unsigned)) : NULL;

	if ((c->a[0] && !cpu) || (c->a[1] && !node))
		return -EFAULT;
	if (cpu)
		*cpu = 0;
	if (node)
		*node = 0;
	return 0;
}

int64_t sys_clock_gettime(struct lx_call *c)
{
	struct timespec *ts = lx_uptr(c, c->a[1], sizeof(*ts));
	int64_t ns;
	int rc;

	if (!ts)
		return -EFAULT;
	rc = lx_clock_now(c->p, (int)c->a[0], &ns);
	if (rc)
		return rc;
	ts->tv_sec = ns / NSEC_PER_SEC;
	ts->tv_nsec = ns % NSEC_PER_SEC;
	return 0;
}

int64_t sys_gettimeofday(struct lx_call *c)
{
	struct timeval *tv = c->a[0] ? lx_uptr(c, c->a[0], sizeof(*tv)) : NULL;
	struct timezone *tz = c->a[1] ? lx_uptr(c, c->a[1], sizeof(*tz)) : NULL;
	int64_t ns;

	if ((c->a[0] && !tv) || (c->a[1] && !tz))
		return -EFAULT;
	if (tv) {
		lx_clock_now(c->p, CLOCK_REALTIME, &ns);
		tv->tv_sec = ns / NSEC_PER_SEC;
		tv->tv_usec = (ns % NSEC_PER_SEC) / 1000;
	}
	if (tz)
		memset(tz, 0, sizeof(*tz));
	return 0;
}

int64_t sys_time(struct lx_call *c)
{
	int64_t *t = c->a[0] ? lx_uptr(c, c->a[0], sizeof(*t)) : NULL;
	int64_t ns;

	if (c->a[0] && !t)
		return -EFAULT;
	lx_clock_now(c->p, CLOCK_REALTIME, &ns);
	if (t)
		*t = ns / NSEC_PER_SEC;
	return ns / NSEC_PER_SEC;
}

int64_t sys_clock_getres(struct lx_call *c)
{
	struct timespec *ts = c->a[1] ? lx_uptr(c, c->a[1], sizeof(*ts)) : NULL;
	int64_t ns;
	int rc;

	if (c->a[1] && !ts)
		return -EFAULT;
	rc = lx_clock_now(c->p, (int)c->a[0], &ns);
	if (rc)
		return rc;
	if (ts) {
		ts->tv_sec = 0;
		ts->tv_nsec = 1;
	}
	return 0;
}

/* Sleep until guest clock @clock reads @deadline_ns. Sleeping on the host's
 * CLOCK_MONOTONIC is right for every guest clock: they all advance with it. */
int lx_sleep_until(struct lx_call *c, int clock, int64_t deadline_ns, int64_t *left)
{
	struct timespec host_deadline, t;
	int64_t now, until;
	int rc;

	rc = lx_clock_now(c->p, clock, &now);
	if (rc)
		return rc;
	if (left)
		*left = 0;
	if (deadline_ns <= now)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t);
	until = (int64_t)t.tv_sec * NSEC_PER_SEC + t.tv_nsec + (deadline_ns - now);
	host_deadline.tv_sec = until / NSEC_PER_SEC;
	host_deadline.tv_nsec = until % NSEC_PER_SEC;
	lx_wait_begin(c);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &host_deadline, NULL) == EINTR &&
	       !(rc = lx_sig_eintr(c, LX_ERESTART_RESTARTBLOCK)))
		;
	lx_wait_end(c);
	if (rc && left) { /* a signal ended it: the time that was left */
		clock_gettime(CLOCK_MONOTONIC, &t);
		now = (int64_t)t.tv_sec * NSEC_PER_SEC + t.tv_nsec;
		*left = until > now ? until - now : 0;
	}
	return rc;
}

static int64_t lx_nanosleep(struct lx_call *c, int clock, uint64_t flags, uint64_t ureq,
			    uint64_t urem)
{
	int64_t req, now, left;
	int rc;

	rc = lx_read_timespec(c, ureq, &req);
	if (rc)
		return rc;
	if (urem && !(flags & LX_TIMER_ABSTIME)) {
		struct timespec *rem = lx_uptr(c, urem, sizeof(*rem));

		if (!rem)
			return -EFAULT;
		rem->tv_sec = rem->tv_nsec = 0;
	}
	if (!(flags & LX_TIMER_ABSTIME)) {
		rc = lx_clock_now(c->p, clock, &now);
		if (rc)
			return rc;
		req = now + req;
	}
	rc = lx_sleep_until(c, clock, req, &left);
	/* Interrupted by a signal: a relative sleep tells what was left. */
	if (rc && urem && !(flags & LX_TIMER_ABSTIME)) {
		struct timespec rem = { .tv_sec = left / NSEC_PER_SEC, .tv_nsec = left % NSEC_PER_SEC };

		if (lx_copy_out(c, urem, &rem, sizeof(rem)))
			return -EFAULT;
	}
	return rc;
}

int64_t sys_nanosleep(struct lx_call *c)
{
	return lx_nanosleep(c, CLOCK_MONOTONIC, 0, c->a[0], c->a[1]);
}

int64_t sys_clock_nanosleep(struct lx_call *c)
{
	int clock = (int)c->a[0];

	if (clock == CLOCK_THREAD_CPUTIME_ID)
		return -EINVAL;
	if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC && clock != CLOCK_BOOTTIME &&
	    clock != CLOCK_TAI && clock != CLOCK_PROCESS_CPUTIME_ID)
		return -EINVAL;
	if (clock == CLOCK_PROCESS_CPUTIME_ID)
		return -ENOTSUP;
	return lx_nanosleep(c, clock, c->a[1], c->a[2], c->a[3]);
}

int64_t sys_getrandom(struct lx_call *c)
{
	uint64_t len = c->a[1] > 33554431 ? 33554431 : c->a[1];
	void *buf = len ? lx_uptr(c, c->a[0], len) : NULL;

	if (c->a[2] & ~(uint64_t)(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE))
		return -EINVAL;
	if (len && !buf)
		return -EFAULT;
	return host_ret(getrandom(buf, len, (unsigned)c->a[2]));
}

int64_t sys_prctl(struct lx_call *c)
{
	char *name;

	switch (c->a[0]) {
	case PR_SET_NAME: {
		/* Up to 15 bytes are kept, whether or not the guest's string ends there. */
		char name[sizeof(c->p->comm)] = { 0 };
		int rc = gmem_copy_str(c->p->mem, name, c->a[1], sizeof(name) - 1, NULL);

		if (rc == -EFAULT)
			return rc;
		name[sizeof(name) - 1] = '\0';
		memcpy(c->p->comm, name, sizeof(name));
		return 0;
	}
	case PR_GET_NAME:
		name = lx_uptr(c, c->a[1], sizeof(c->p->comm));
		if (!name)
			return -EFAULT;
		memcpy(name, c->p->comm, sizeof(c->p->comm));
		return 0;
	case PR_SET_DUMPABLE:
		/* Whether a crash dumps core, which a guest's never does (ccvm reports it):
		 * nginx's workers ask for it again after changing user. */
		return c->a[1] <= 1 ? 0 : -EINVAL;
	case PR_GET_DUMPABLE:
		return 1;
	default:
		return -EINVAL;
	}
}

int64_t sys_times(struct lx_call *c)
{
	struct tms *t = c->a[0] ? lx_uptr(c, c->a[0], sizeof(*t)) : NULL;
	clock_t r;

	if (c->a[0] && !t)
		return -EFAULT;
	r = times(t ? t : &(struct tms){ 0 });
	return (int64_t)r;
}

int64_t sys_getrusage(struct lx_call *c)
{
	struct rusage *ru = lx_uptr(c, c->a[1], sizeof(*ru));
	int who = (int)c->a[0];

	if (!ru)
		return -EFAULT;
	if (who != RUSAGE_SELF && who != RUSAGE_THREAD && who != RUSAGE_CHILDREN)
		return -EINVAL;
	return host_ret(getrusage(who == RUSAGE_CHILDREN ? RUSAGE_CHILDREN : RUSAGE_SELF, ru));
}

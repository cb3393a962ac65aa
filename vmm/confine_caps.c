/*
 * confine_caps.c - root without --user gives up its capabilities: what each thread
 * role keeps, and nothing for the threads that run the guest.
 *
 * A monitor started as root and left as root (no --user) would make the guest's file
 * and socket calls with every capability: it would read any user's files, bind any
 * port, and, were it taken over, act as root on the host. Once the VM is built the
 * process locks its securebits (uid 0 grants nothing on exec or setuid, and nothing
 * can be regained), empties its bounding and ambient sets, and keeps in its permitted
 * and effective sets only what some thread still needs:
 *
 * - CAP_SYS_NICE, for the snapshot's fault threads (SCHED_FIFO, snapshot/cow.c);
 *   seccomp lets the priority calls name the calling thread only;
 * - CAP_SYS_PTRACE, only when /dev/userfaultfd could not be opened and the kernel
 *   allows the userfaultfd system call to privileged callers only;
 * - CAP_NET_BIND_SERVICE, only when a --publish rule names a host port below 1024.
 *
 * The vCPU and timer threads then drop all of these but the last (role_enter, through
 * the seccomp role hook): the threads that serve the guest hold no capability at all
 * unless it publishes a low port. The uid stays 0, so files root owns stay the
 * guest's; other users' files are reached only as their modes allow.
 */
#include "confine.h"
#include "../base/log.h"
#include "../mmu/uffd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#define CONFINE_SYSCTL_UFFD "/proc/sys/vm/unprivileged_userfaultfd"
#define CONFINE_CAPS_MAX    3

/* What the process kept, and of it what a guest-serving thread keeps. */
static cap_value_t confine_kept[CONFINE_CAPS_MAX], confine_kept_guest[CONFINE_CAPS_MAX];
static int confine_n_kept, confine_n_kept_guest;
static bool confine_caps_dropped;

/* Whether the userfaultfd system call needs CAP_SYS_PTRACE here. */
static bool confine_uffd_needs_ptrace(void)
{
	FILE *f = fopen(CONFINE_SYSCTL_UFFD, "r");
	int v = 0;

	if (!f)
		return true;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v == 0;
}

/* Set the calling thread's permitted and effective sets to @caps, inheritable empty. */
static int confine_caps_set(const cap_value_t *caps, int n)
{
	cap_t c = cap_init();
	int rc = c ? 0 : -ENOMEM;

	if (!rc && n && (cap_set_flag(c, CAP_PERMITTED, n, caps, CAP_SET) < 0 ||
			 cap_set_flag(c, CAP_EFFECTIVE, n, caps, CAP_SET) < 0))
		rc = -errno;
	if (!rc && cap_set_proc(c) < 0)
		rc = -errno;
	if (c)
		cap_free(c);
	return rc;
}

/* Securebits locked: uid 0 means no capabilities across exec or setuid, and no
 * capability can be raised into the ambient set, ever again. */
static int confine_caps_lock(char err[CONFINE_ERR_LEN])
{
	const unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			      SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			      SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

	if (cap_set_secbits(bits) < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "capabilities: locking the "
				   "securebits: %s", strerror(errno));
	if (cap_reset_ambient() < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "capabilities: clearing the "
				   "ambient set: %s", strerror(errno));
	for (cap_value_t v = 0; v < (cap_value_t)cap_max_bits(); v++)
		if (cap_drop_bound(v) < 0 && errno != EINVAL)
			return log_set_err(-errno, err, CONFINE_ERR_LEN, "capabilities: dropping "
					   "%d from the bounding set: %s", (int)v, strerror(errno));
	return 0;
}

int confine_caps_drop(bool low_ports, char err[CONFINE_ERR_LEN])
{
	int rc;

	if (geteuid() != 0)
		return 0;
	confine_n_kept = confine_n_kept_guest = 0;
	confine_kept[confine_n_kept++] = CAP_SYS_NICE;
	if (!uffd_dev_ready() && confine_uffd_needs_ptrace())
		confine_kept[confine_n_kept++] = CAP_SYS_PTRACE;
	if (low_ports) {
		confine_kept[confine_n_kept++] = CAP_NET_BIND_SERVICE;
		confine_kept_guest[confine_n_kept_guest++] = CAP_NET_BIND_SERVICE;
	}
	rc = confine_caps_lock(err);
	if (!rc && (rc = confine_caps_set(confine_kept, confine_n_kept)))
		log_set_err(rc, err, CONFINE_ERR_LEN, "capabilities: dropping them: %s",
			    strerror(-rc));
	if (!rc)
		confine_caps_dropped = true;
	return rc;
}

int confine_caps_role(enum role r)
{
	if (!confine_caps_dropped || (r != ROLE_VCPU && r != ROLE_TIMER))
		return 0;
	return confine_caps_set(confine_kept_guest, confine_n_kept_guest);
}

/*
 * confine.c - the monitor confined by the kernel.
 *
 * The personality already refuses what a guest may not do, but a bug in it, or in
 * anything it calls, runs with all of the monitor's rights. Three walls behind it
 * (issues 12 and 29), installed by confine_monitor once the VM is built and before any
 * other thread starts, from the command line alone:
 *
 * - Landlock on the whole process: the guest's root read-only, the --rw directories,
 *   the harmless devices, and for the monitor itself the image directories; where the
 *   kernel scopes them (ABI 6), no signal to and no abstract socket of a process
 *   outside the monitor. Landlock binds the calling thread and those it starts later,
 *   so it comes first, while the main thread is the only one.
 * - A drop from root to --user's identity, so the guest's files, sockets and snapshot
 *   images are that user's; root without --user gives up its capabilities instead
 *   (confine_caps.c).
 * - NO_NEW_PRIVS and seccomp allow lists, one per thread role (confine_seccomp.c).
 *
 * What the kernel lacks is a warning, or with --confine require an error.
 */
#include "confine.h"
#include "../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int confine_mode_parse(const char *s, enum confine_mode *mode)
{
	static const char *const names[] = { "auto", "require", "off" };

	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(s, names[i])) {
			*mode = (enum confine_mode)i;
			return 0;
		}
	return -EINVAL;
}

/* ---- Landlock ------------------------------------------------------------------ */

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3, Linux 6.2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5, Linux 6.10 */
#endif

#define CONFINE_LL_ABI_TRUNCATE  3
#define CONFINE_LL_ABI_NET       4
#define CONFINE_LL_ABI_IOCTL_DEV 5
#define CONFINE_LL_ABI_SCOPE     6 /* Linux 6.12 */
#define CONFINE_LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define CONFINE_LL_SCOPE_SIGNAL        (1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6 (our build headers predate its fields; the
 * layout is fixed): the kernel takes as much of it as the size given. */
struct confine_ll_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4: none handled, so connect and bind are free */
	uint64_t scoped;             /* ABI 6 */
};
#define CONFINE_LL_FILE                                                                  \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
	 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define CONFINE_LL_READ   (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define CONFINE_LL_SNAP                                                                  \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |                   \
	 LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                   \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_TRUNCATE)
#define CONFINE_LL_DEVICE                                                                \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |                   \
	 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* The devices path.c lets a guest write wherever they are (fs_harmless_chardev). */
static const char *const confine_devices[] = {
	"dev/null", "dev/zero", "dev/full", "dev/random", "dev/urandom", "dev/tty", "dev/pts",
};

/* Every file-system right this kernel's Landlock knows (so all of them are handled). */
static uint64_t confine_ll_handled(int abi)
{
	uint64_t all = (LANDLOCK_ACCESS_FS_REFER << 1) - 1; /* ABI 1 and 2 */

	if (abi < 2)
		all &= ~LANDLOCK_ACCESS_FS_REFER;
	if (abi >= CONFINE_LL_ABI_TRUNCATE)
		all |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= CONFINE_LL_ABI_IOCTL_DEV)
		all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return all;
}

/* Allow @access beneath @path (only file rights when it is not a directory). A path
 * that does not exist gets no rule: nothing beneath it can be reached either. */
static int confine_ll_rule(int ruleset, const char *path, uint64_t access, uint64_t handled,
			   char err[CONFINE_ERR_LEN])
{
	struct landlock_path_beneath_attr pb = { 0 };
	struct stat st;
	int rc = 0;

	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0)
		return errno == ENOENT ? 0 : log_set_err(-errno, err, CONFINE_ERR_LEN,
							  "Landlock: cannot open %s: %s", path,
							  strerror(errno));
	if (fstat(pb.parent_fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= CONFINE_LL_FILE;
	pb.allowed_access = access & handled;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		rc = log_set_err(-errno, err, CONFINE_ERR_LEN, "Landlock: rule for %s: %s", path,
				 strerror(errno));
	close(pb.parent_fd);
	return rc;
}

static int confine_ll_rules(int ruleset, const struct confine_fs *fs, uint64_t handled,
			    char err[CONFINE_ERR_LEN])
{
	char path[4096];
	int rc = confine_ll_rule(ruleset, fs->root, CONFINE_LL_READ, handled, err);

	for (size_t i = 0; !rc && i < sizeof(confine_devices) / sizeof(confine_devices[0]); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", fs->root, confine_devices[i]) >=
		    (int)sizeof(path))
			return log_set_err(-ENAMETOOLONG, err, CONFINE_ERR_LEN, "Landlock: %s: %s",
					   fs->root, strerror(ENAMETOOLONG));
		rc = confine_ll_rule(ruleset, path, CONFINE_LL_DEVICE | LANDLOCK_ACCESS_FS_READ_DIR,
				     handled, err);
	}
	for (int i = 0; !rc && i < fs->n_rw; i++)
		rc = confine_ll_rule(ruleset, fs->rw[i], handled, handled, err);
	for (int i = 0; !rc && i < fs->n_snap; i++)
		rc = confine_ll_rule(ruleset, fs->snap[i], CONFINE_LL_SNAP, handled, err);
	/* The monitor's own /proc/PID (its memory map, statm, the descriptors it reopens
	 * through /proc/self/fd), wherever --root puts the guest's /proc. */
	if (!rc)
		rc = confine_ll_rule(ruleset, "/proc/self", CONFINE_LL_READ, handled, err);
	return rc;
}

int confine_landlock(const struct confine_fs *fs, char err[CONFINE_ERR_LEN])
{
	struct confine_ll_attr attr = { 0 };
	size_t size = sizeof(attr.handled_access_fs);
	int abi, ruleset, rc;

	abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0)
		return log_set_err(-EOPNOTSUPP, err, CONFINE_ERR_LEN,
				   "this kernel has no Landlock (%s)", strerror(errno));
	attr.handled_access_fs = confine_ll_handled(abi);
	if (abi >= CONFINE_LL_ABI_NET)
		size = offsetof(struct confine_ll_attr, scoped);
	/* The monitor signals only its own threads and its fork policy's child, and
	 * connects to no abstract socket: the guest's are refused (sys_net.c). */
	if (abi >= CONFINE_LL_ABI_SCOPE) {
		attr.scoped = CONFINE_LL_SCOPE_ABSTRACT_UNIX | CONFINE_LL_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (ruleset < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "Landlock: creating a ruleset: %s",
				   strerror(errno));
	rc = confine_ll_rules(ruleset, fs, attr.handled_access_fs, err);
	if (!rc && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		rc = log_set_err(-errno, err, CONFINE_ERR_LEN, "prctl(PR_SET_NO_NEW_PRIVS): %s",
				 strerror(errno));
	if (!rc && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		rc = log_set_err(-errno, err, CONFINE_ERR_LEN, "Landlock: restricting the thread: %s",
				 strerror(errno));
	close(ruleset);
	return rc;
}

/* ---- all of it ------------------------------------------------------------------ */

/* Threads of this process: Landlock binds the calling thread and those it creates
 * later, so the whole process is covered only when called from its only thread. */
static int confine_threads(void)
{
	struct stat st;

	return stat("/proc/self/task", &st) == 0 ? (int)st.st_nlink - 2 : -1;
}

/* A part the kernel lacks: a warning, or with --confine require the error. */
static int confine_lacking(enum confine_mode mode, int rc, char err[CONFINE_ERR_LEN])
{
	if (mode == CONFINE_REQUIRE)
		return rc;
	log_warn("%s: ccvm runs less confined (--confine require refuses to)", err);
	err[0] = '\0';
	return 0;
}

int confine_monitor(const struct confine_policy *p, char err[CONFINE_ERR_LEN])
{
	struct confine_user u;
	int rc = 0, n = confine_threads();

	if (p->user && (rc = confine_user_parse(p->user, &u, err)))
		return rc;
	if (p->mode == CONFINE_OFF)
		return p->user ? confine_drop_user(&u, err) : 0;
	if (n != 1)
		return log_set_err(-EBUSY, err, CONFINE_ERR_LEN,
				   "confinement: %d threads already run (Landlock needs to come "
				   "before the first)", n);
	rc = confine_landlock(&p->fs, err);
	if (rc == -EOPNOTSUPP)
		rc = confine_lacking(p->mode, rc, err);
	if (!rc && p->user)
		rc = confine_drop_user(&u, err);
	else if (!rc)
		rc = confine_caps_drop(p->low_ports, err);
	if (rc)
		return rc;
	rc = confine_seccomp(err);
	if (rc == -EINVAL || rc == -EOPNOTSUPP || rc == -ENOSYS)
		rc = confine_lacking(p->mode, rc, err);
	return rc;
}

int confine_tool(const char *read_dir, const char *write_dir, char err[CONFINE_ERR_LEN])
{
	const char *snap[] = { write_dir };
	struct confine_fs fs = { .root = read_dir, .snap = snap, .n_snap = write_dir ? 1 : 0 };
	int n = confine_threads(), rc;

	if (n != 1)
		return log_set_err(-EBUSY, err, CONFINE_ERR_LEN, "confinement: %d threads already "
				   "run", n);
	rc = confine_landlock(&fs, err);
	if (rc == -EOPNOTSUPP)
		rc = confine_lacking(CONFINE_AUTO, rc, err);
	if (!rc)
		rc = confine_seccomp(err);
	if (rc == -EINVAL || rc == -EOPNOTSUPP || rc == -ENOSYS)
		rc = confine_lacking(CONFINE_AUTO, rc, err);
	return rc;
}

/* ---- the user ------------------------------------------------------------------ */

#define CONFINE_PW_BUF 16384

/* A decimal id of at most 9 digits (no sign, no spaces); -1 if @s is not one. */
static long confine_number(const char *s)
{
	long v = 0;

	if (!*s || strlen(s) > 9)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

static int confine_parse_user(const char *user, struct confine_user *u, bool *has_gid,
			      char err[CONFINE_ERR_LEN])
{
	static char buf[CONFINE_PW_BUF];
	struct passwd pw, *res = NULL;
	long id = confine_number(user);

	if (id >= 0)
		getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &res);
	else
		getpwnam_r(user, &pw, buf, sizeof(buf), &res);
	if (!res && id < 0)
		return log_set_err(-ENOENT, err, CONFINE_ERR_LEN, "--user: no user named '%s'", user);
	u->uid = res ? res->pw_uid : (uid_t)id;
	*has_gid = res != NULL;
	if (res) {
		u->gid = res->pw_gid;
		if (strlen(res->pw_name) >= sizeof(u->name))
			return log_set_err(-ENAMETOOLONG, err, CONFINE_ERR_LEN,
					   "--user: the name '%s' is too long", res->pw_name);
		strcpy(u->name, res->pw_name);
	}
	return 0;
}

static int confine_parse_group(const char *group, struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	static char buf[CONFINE_PW_BUF];
	struct group gr, *res = NULL;
	long id = confine_number(group);

	if (id >= 0) {
		u->gid = (gid_t)id;
		return 0;
	}
	getgrnam_r(group, &gr, buf, sizeof(buf), &res);
	if (!res)
		return log_set_err(-ENOENT, err, CONFINE_ERR_LEN, "--user: no group named '%s'", group);
	u->gid = res->gr_gid;
	return 0;
}

int confine_user_parse(const char *spec, struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	char copy[2 * CONFINE_NAME_MAX], *colon;
	bool has_gid = false;
	int rc;

	memset(u, 0, sizeof(*u));
	if (!*spec || strlen(spec) >= sizeof(copy))
		return log_set_err(-EINVAL, err, CONFINE_ERR_LEN,
				   "--user '%.64s': expected USER or USER:GROUP (names or numbers)",
				   spec);
	strcpy(copy, spec);
	colon = strchr(copy, ':');
	if (colon)
		*colon++ = '\0';
	if (!copy[0] || (colon && !*colon))
		return log_set_err(-EINVAL, err, CONFINE_ERR_LEN,
				   "--user '%s': expected USER or USER:GROUP (names or numbers)", spec);
	rc = confine_parse_user(copy, u, &has_gid, err);
	if (!rc && colon)
		rc = confine_parse_group(colon, u, err);
	else if (!rc && !has_gid)
		rc = log_set_err(-EINVAL, err, CONFINE_ERR_LEN,
				 "--user %s: uid %u has no passwd entry to take a group from; "
				 "give --user %s:GROUP",
				 spec, (unsigned)u->uid, spec);
	return rc;
}

static int confine_set_groups(const struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	int rc = u->name[0] ? initgroups(u->name, u->gid) : setgroups(1, &u->gid);

	if (rc < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "--user: setting groups: %s",
				   strerror(errno));
	return 0;
}

int confine_drop_user(const struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	int rc;

	if (geteuid() != 0)
		return log_set_err(-EPERM, err, CONFINE_ERR_LEN,
				   "--user needs a monitor started as root (this one runs as uid %u)",
				   (unsigned)geteuid());
	rc = confine_set_groups(u, err);
	if (rc)
		return rc;
	if (setresgid(u->gid, u->gid, u->gid) < 0 || setresuid(u->uid, u->uid, u->uid) < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "--user: becoming %u:%u: %s",
				   (unsigned)u->uid, (unsigned)u->gid, strerror(errno));
	/* Belt and braces: a drop that could be undone is no drop. */
	if (u->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
		return log_set_err(-EPERM, err, CONFINE_ERR_LEN, "--user: root could be regained");
	return 0;
}

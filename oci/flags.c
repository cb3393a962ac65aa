/*
 * flags.c - command flags as runc's callers pass them, and the record's loader.
 *
 * conmon, go-runc (containerd) and people write flags in the forms runc's Go flag
 * library takes: --name value, --name=value, -name value, a short alias, and flags
 * after the positional ID as well as before it. An unknown flag is an error naming it.
 */
#include "cmd.h"

#include "../base/log.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct oci_flag *flag_find(const struct oci_flag *flags, const char *name, size_t n)
{
	for (const struct oci_flag *f = flags; f && f->name; f++) {
		if (strlen(f->name) == n && strncmp(f->name, name, n) == 0)
			return f;
		if (f->alias && strlen(f->alias) == n && strncmp(f->alias, name, n) == 0)
			return f;
	}
	return NULL;
}

/* One flag at @argv[*i]; *@i moves past its value. */
static int flag_one(const char *cmd, int argc, char **argv, int *i, const struct oci_flag *flags)
{
	const char *a = argv[*i] + (argv[*i][1] == '-' ? 2 : 1);
	const char *eq = strchr(a, '=');
	size_t n = eq ? (size_t)(eq - a) : strlen(a);
	const struct oci_flag *f = flag_find(flags, a, n);

	if (!f) {
		log_err("%s: unknown flag %s", cmd, argv[*i]);
		return -EINVAL;
	}
	if (f->on) {
		if (eq && strcmp(eq + 1, "true") != 0 && strcmp(eq + 1, "false") != 0) {
			log_err("%s: %.*s takes no value", cmd, (int)n + 2, argv[*i]);
			return -EINVAL;
		}
		*f->on = !eq || strcmp(eq + 1, "true") == 0;
		return 0;
	}
	if (eq) {
		*f->val = eq + 1;
		return 0;
	}
	if (*i + 1 >= argc) {
		log_err("%s: %s needs a value", cmd, argv[*i]);
		return -EINVAL;
	}
	*f->val = argv[++*i];
	return 0;
}

int oci_flags_parse(const char *cmd, int argc, char **argv, const struct oci_flag *flags,
		    const char **pos)
{
	int n = 0;
	bool rest = false;

	for (int i = 0; i < argc; i++) {
		if (!rest && strcmp(argv[i], "--") == 0) {
			rest = true;
			continue;
		}
		if (!rest && argv[i][0] == '-' && argv[i][1]) {
			if (flag_one(cmd, argc, argv, &i, flags))
				return -EINVAL;
			continue;
		}
		if (n >= OCI_MAX_POS) {
			log_err("%s: too many arguments", cmd);
			return -EINVAL;
		}
		pos[n++] = argv[i];
	}
	return n;
}

int oci_flags_prefix(const char *cmd, int argc, char **argv, const struct oci_flag *flags)
{
	int i = 0;

	while (i < argc && argv[i][0] == '-' && argv[i][1]) {
		if (flag_one(cmd, argc, argv, &i, flags))
			return -EINVAL;
		i++;
	}
	return i;
}

int oci_load(const struct oci_global *g, const char *id, struct oci_state *st)
{
	char err[PATH_MAX + 128] = "";
	int rc = oci_state_load(g->root, id, st, err, sizeof(err));

	if (rc == -ENOENT) {
		log_err("container \"%s\" does not exist", id);
		return 1;
	}
	if (rc) {
		log_err("container %s: %s", id, err[0] ? err : strerror(-rc));
		return 1;
	}
	return 0;
}

void oci_remove(struct oci_state *st)
{
	DIR *d = opendir(st->dir);
	struct dirent *e;

	/* everything in it is ccvm's: the record, the FIFO, the socket, the profile, and
	 * what a monitor killed while writing a checkpoint left under a temporary name */
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) && errno != ENOENT)
			log_warn("cannot remove %s/%s: %s", st->dir, e->d_name, strerror(errno));
	}
	if (d)
		closedir(d);
	if (rmdir(st->dir) && errno != ENOENT)
		log_warn("cannot remove %s: %s", st->dir, strerror(errno));
}

int oci_write_file(const char *path, const char *text, size_t n, mode_t mode)
{
	char tmp[PATH_MAX + 16];
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n || fsync(fd))
		rc = -EIO;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

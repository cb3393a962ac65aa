/*
 * image_tmp.c - an image's temporary name, and the temporaries writers that died left:
 * "." BASE ".tmp." PID "." RANDOM, each locked by its live writer (image_write.c
 * creates and renames it; image.c has the layout).
 */
#include "image_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMG_TMP_RAND_DIGITS 16 /* hex digits of 64 random bits */
#define IMG_PID_DIGITS_MAX  9

/* "." BASE ".tmp." PID "." RANDOM: the pid tells a dead writer's leftover
 * (img_sweep_stale), the random part makes the name one nobody can know in advance,
 * so nothing a guest puts in the directory can stand in the writer's way. */
char *img_tmp_name_for(const char *final_name)
{
	uint64_t r;
	char *out = NULL;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return NULL;
	if (asprintf(&out, ".%s.tmp.%d.%0*llx", final_name, (int)getpid(), IMG_TMP_RAND_DIGITS,
		     (unsigned long long)r) < 0)
		out = NULL;
	return out;
}

/* @name is "." BASE ".tmp." PID, then "." and 16 hex digits (older writers had
 * none), with PID all digits; returns the pid or 0. */
static pid_t img_tmp_name_pid(const char *name, const char *base)
{
	size_t blen = strlen(base), n;
	long pid = 0;
	const char *d;

	if (name[0] != '.' || strncmp(name + 1, base, blen) || strncmp(name + 1 + blen, ".tmp.", 5))
		return 0;
	d = name + 1 + blen + 5;
	n = strspn(d, "0123456789");
	if (!n || n > IMG_PID_DIGITS_MAX)
		return 0;
	if (d[n] && (d[n] != '.' || strlen(d + n + 1) != IMG_TMP_RAND_DIGITS ||
		     strspn(d + n + 1, "0123456789abcdef") != IMG_TMP_RAND_DIGITS))
		return 0;
	for (size_t i = 0; i < n; i++)
		pid = pid * 10 + (d[i] - '0');
	return (pid_t)pid;
}

/* Remove @name in @dfd if it is a regular file nobody holds the writer's lock on. */
static void img_remove_if_unlocked(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
		unlinkat(dfd, name, 0);
	close(fd);
}

/*
 * Temporaries of this image's name left by writers that died (kill -9, a crash): each
 * is as large as the image and would stay forever, and enough of them fill the disk the
 * next snapshot needs. One is stale when its pid no longer exists (or is ours) and
 * nobody holds its lock; the lock keeps a live writer's file even when its pid is in another pid
 * namespace. Best effort: a directory that cannot be read is left as it is.
 */
void img_sweep_stale(const struct img_writer *w)
{
	int fd = openat(w->dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		pid_t pid = img_tmp_name_pid(de->d_name, w->final_name);

		if (pid <= 0 || (w->tmp_name && !strcmp(de->d_name, w->tmp_name)))
			continue;
		/* One of this pid's is a leftover of a process that had it before, or another
		 * snapshot of this one, which holds its lock. */
		if (pid != getpid() && (kill(pid, 0) == 0 || errno != ESRCH))
			continue;
		img_remove_if_unlocked(dirfd(d), de->d_name);
	}
	closedir(d);
}

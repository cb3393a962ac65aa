/*
 * control_janitor.c - the control socket's file removed when the monitor ends, by a
 * small process that is not confined, so that the monitor's Landlock domain needs no
 * right on the socket's directory.
 *
 * Removing a file needs LANDLOCK_ACCESS_FS_REMOVE_FILE beneath its directory, and a
 * rule that allows it for the socket allows it for every file next to it (~/.bashrc
 * with --control ~/vm.sock). So the monitor binds the socket before it confines
 * itself, and forks this janitor while it is still alone: the janitor keeps only the
 * read end of a pipe whose write end the monitor holds, and when that pipe ends (the
 * monitor exited, however: even by kill -9) it removes the socket file if it is still
 * the very socket that was bound (same device and inode), and nothing else.
 */
#include "control_impl.h"
#include "../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JANITOR_NAME  "ccvm-janitor"
#define JANITOR_FD    3 /* where the pipe's read end is kept; all above it closed */

/* The janitor's life: wait for the pipe to end, then remove @path if it is @st. */
static void janitor_run(int rd, const char *path, const struct stat *st)
{
	struct stat now;
	char buf[64];
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	(void)prctl(PR_SET_NAME, JANITOR_NAME, 0, 0, 0);
	signal(SIGINT, SIG_IGN); /* a terminal's ^C is the monitor's to handle */
	signal(SIGTERM, SIG_IGN);
	if (null >= 0) { /* hold none of the terminal or pipes the monitor's user waits on */
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
	}
	if (dup2(rd, JANITOR_FD) < 0)
		_exit(1);
	syscall(SYS_close_range, JANITOR_FD + 1, ~0U, 0);
	for (;;) { /* nothing is ever written: the pipe only ends */
		ssize_t n = read(JANITOR_FD, buf, sizeof(buf));

		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	if (lstat(path, &now) == 0 && S_ISSOCK(now.st_mode) && now.st_dev == st->st_dev &&
	    now.st_ino == st->st_ino)
		unlink(path);
	_exit(0);
}

int ctl_janitor_start(const char *path, int *keep)
{
	struct stat st;
	int pfd[2];
	pid_t pid;

	*keep = -1;
	if (lstat(path, &st) < 0)
		return -errno;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (pid == 0) {
		close(pfd[1]);
		janitor_run(pfd[0], path, &st);
	}
	close(pfd[0]);
	*keep = pfd[1];
	return 0;
}

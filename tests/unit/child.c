/*
 * child.c - run a check in a child process of its own, for what cannot be undone in
 * the test process (a seccomp filter, a Landlock domain, a change of user), with the
 * child's stderr captured for the failure message.
 */
#include "suites.h"

#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

void run_child(void (*fn)(void *), void *arg, struct child_result *r)
{
	struct rusage ru;
	int pfd[2];
	ssize_t n, got = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], STDERR_FILENO);
		fn(arg);
		_exit(0);
	}
	close(pfd[1]);
	while (got < CHILD_OUT_MAX - 1 &&
	       (n = read(pfd[0], r->err + got, CHILD_OUT_MAX - 1 - (size_t)got)) > 0)
		got += n;
	r->err[got] = '\0';
	close(pfd[0]);
	ck_assert_int_eq(wait4(pid, &r->status, 0, &ru), pid);
	r->maxrss_kib = ru.ru_maxrss;
}

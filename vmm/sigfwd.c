/*
 * sigfwd.c - the signals `ccvm run` and `ccvm restore` receive, passed on to the guest.
 *
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are blocked in every thread of
 * the monitor from the start (sigfwd_block, before any thread exists, so all inherit
 * it) and one thread takes them with sigtimedwait: each goes to the guest process as
 * from a process it cannot see (lx_sig_from_outside). A guest that dies of it makes
 * ccvm exit with 128 + the signal, as a shell reports it. A second SIGINT or SIGTERM
 * within 3 seconds of the first stops the VM whatever the guest does with them: the
 * user's way out of a guest that ignores or mishandles them.
 */
#include "sigfwd.h"
#include "../base/role.h"
#include "../base/log.h"
#include "vm.h"
#include "linux/lx.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIGFWD_AGAIN_S 3.0  /* a second SIGINT/SIGTERM within this stops the VM */
#define SIGFWD_POLL_NS 100000000L /* how often the thread looks at its stop flag */

static const int sigfwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

struct sigfwd {
	struct vm *vm;
	pthread_t thread;
	struct sigfwd_state st;
	volatile bool stop;
};

static void sigfwd_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(sigfwd_signals) / sizeof(sigfwd_signals[0]); i++)
		sigaddset(set, sigfwd_signals[i]);
}

int sigfwd_block(void)
{
	sigset_t set;

	sigfwd_set(&set);
	return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int sigfwd_decide(struct sigfwd_state *st, int sig, double now_s)
{
	if (sig != SIGINT && sig != SIGTERM)
		return 0;
	if (st->last_s > 0 && now_s - st->last_s < SIGFWD_AGAIN_S)
		return 128 + sig;
	st->last_s = now_s;
	return 0;
}

static double sigfwd_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sigfwd_one(struct sigfwd *f, int sig)
{
	int stop = sigfwd_decide(&f->st, sig, sigfwd_now()), rc;

	if (stop) {
		log_info("stopping the VM: SIG%s again within %.0f s", sigabbrev_np(sig),
			 SIGFWD_AGAIN_S);
		vm_stop(f->vm, stop);
		return;
	}
	rc = lx_sig_from_outside(f->vm->proc, sig);
	if (rc == 1) {
		log_info("stopping the VM: SIG%s ends the guest", sigabbrev_np(sig));
		vm_stop(f->vm, 128 + sig);
	} else if (rc < 0) {
		log_warn("SIG%s for the guest is lost: its signal queue is full", sigabbrev_np(sig));
	}
}

static void *sigfwd_thread(void *arg)
{
	struct sigfwd *f = arg;
	const struct timespec poll = { .tv_nsec = SIGFWD_POLL_NS };
	sigset_t set;

	role_enter(ROLE_HELPER);
	sigfwd_set(&set);
	while (!f->stop) {
		int sig = sigtimedwait(&set, NULL, &poll);

		if (sig > 0 && f->vm->proc)
			sigfwd_one(f, sig);
	}
	return NULL;
}

int sigfwd_start(struct vm *vm, struct sigfwd **out)
{
	struct sigfwd *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->vm = vm;
	if (pthread_create(&f->thread, NULL, sigfwd_thread, f)) {
		free(f);
		return -EAGAIN;
	}
	*out = f;
	return 0;
}

void sigfwd_stop(struct sigfwd *f)
{
	if (!f)
		return;
	f->stop = true;
	pthread_join(f->thread, NULL);
	free(f);
}

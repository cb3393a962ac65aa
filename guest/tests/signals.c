/*
 * signals.c - signals as a program sees them (issue 17's acceptance program): handlers
 * with SA_SIGINFO, SA_RESTART and SA_ONSTACK, masks and pending signals, sigaltstack,
 * kill and tgkill between threads, an alarm interrupting a blocking read, a SIGSEGV
 * handler that siglongjmps out of a NULL dereference, SIGPIPE ignored, a POSIX timer,
 * sigsuspend and sigtimedwait, a signalfd read, polled and woken by another thread; last, SIGPIPE at its default action ends the program
 * (exit status 128 + 13 as a shell reports it).
 *
 * Handlers only record what they saw; main prints it, so every line is independent of
 * scheduling and the same in all four builds run natively, and the e2e tests compare
 * ccvm's run with the host's line by line.
 *
 * Other modes:
 *   signals ignore-int   ignore SIGINT, say "ready", sleep 100 s (a second SIGINT to
 *                        ccvm within 3 s must stop it anyway)
 *   signals snapshot     a handler installed, SIGUSR2 blocked and pending, ITIMER_REAL
 *                        armed for SECONDS (default 6); says "armed", waits for the
 *                        alarm, then unblocks SIGUSR2: a VM snapshotted while it waits
 *                        must restore to the same lines
 *   signals timer-storm NS MS
 *                        a POSIX timer every NS ns (none for 0), its signal blocked,
 *                        while the program sleeps MS ms: what the timer costs the
 *                        monitor when its expiries pile up (issue 29, G6)
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define ALT_SIZE   (64 * 1024)
#define TIMER_VAL  4242
#define ALARM_USEC 50000
#define SFD_VAL    99

static volatile sig_atomic_t got_sig, got_code, got_same_pid, got_on_alt, got_in_thread;
static volatile sig_atomic_t got_value, handled;
static volatile pid_t handler_tid;
static char *alt_base;
static sigjmp_buf recover;
static int restart_pipe[2];

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
	char here;

	(void)uc;
	got_sig = sig;
	got_code = si->si_code;
	got_same_pid = si->si_pid == getpid();
	got_value = si->si_code == SI_TIMER || si->si_code == SI_QUEUE ? si->si_value.sival_int : 0;
	got_on_alt = alt_base && &here >= alt_base && &here < alt_base + ALT_SIZE;
	handler_tid = tid();
	handled++;
}

/* For SA_RESTART: the interrupted read is made again; this gives it a byte to end on. */
static void on_alarm_feed(int sig)
{
	(void)sig;
	handled++;
	if (write(restart_pipe[1], "x", 1) != 1)
		_exit(3);
}

static void on_alarm(int sig)
{
	(void)sig;
	handled++;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	got_sig = sig;
	got_code = si->si_code;
	got_value = si->si_addr == NULL;
	siglongjmp(recover, 1);
}

static void handle(int sig, void (*fn)(int, siginfo_t *, void *), int flags)
{
	struct sigaction sa = { .sa_sigaction = fn, .sa_flags = SA_SIGINFO | flags };

	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		perror("sigaction");
}

static void handle_plain(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa = { .sa_handler = fn, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		perror("sigaction");
}

static void block(int how, int sig)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(how, &set, NULL);
}

static void alarm_in(long usec)
{
	struct itimerval it = { .it_value = { .tv_sec = usec / 1000000, .tv_usec = usec % 1000000 } };

	setitimer(ITIMER_REAL, &it, NULL);
}

static void info_and_masks(void)
{
	sigset_t pending;

	handle(SIGUSR1, on_info, 0);
	kill(getpid(), SIGUSR1);
	printf("kill SIGUSR1: handled %d sig %d code SI_USER %d same pid %d\n", (int)handled,
	       (int)got_sig, got_code == SI_USER, (int)got_same_pid);

	handle(SIGUSR2, on_info, 0);
	block(SIG_BLOCK, SIGUSR2);
	raise(SIGUSR2);
	sigpending(&pending);
	printf("blocked SIGUSR2: handled %d pending %d\n", (int)handled,
	       sigismember(&pending, SIGUSR2));
	block(SIG_UNBLOCK, SIGUSR2);
	printf("unblocked SIGUSR2: handled %d sig %d code SI_TKILL %d\n", (int)handled,
	       (int)got_sig, got_code == SI_TKILL);
}

static void alternate_stack(void)
{
	stack_t ss = { .ss_size = ALT_SIZE }, cur;

	alt_base = malloc(ALT_SIZE);
	ss.ss_sp = alt_base;
	if (sigaltstack(&ss, NULL))
		perror("sigaltstack");
	handle(SIGUSR1, on_info, SA_ONSTACK);
	raise(SIGUSR1);
	printf("SA_ONSTACK: on the alternate stack %d\n", (int)got_on_alt);
	handle(SIGUSR1, on_info, 0);
	raise(SIGUSR1);
	printf("without SA_ONSTACK: on the alternate stack %d\n", (int)got_on_alt);
	sigaltstack(NULL, &cur);
	printf("sigaltstack: size %zu flags %d\n", cur.ss_size, cur.ss_flags);
}

static void *waiter(void *arg)
{
	sigset_t set;
	int sig = 0;

	*(volatile pid_t *)arg = tid();
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigwait(&set, &sig);
	return (void *)(intptr_t)sig;
}

static void *target(void *arg)
{
	*(volatile pid_t *)arg = tid();
	while (!got_in_thread)
		usleep(1000);
	return NULL;
}

static void between_threads(void)
{
	volatile pid_t t1 = 0, t2 = 0;
	pthread_t th;
	void *r;

	/* tgkill at another thread runs the handler in that thread. */
	handle(SIGUSR1, on_info, 0);
	handler_tid = 0;
	pthread_create(&th, NULL, target, (void *)&t1);
	while (!t1)
		usleep(1000);
	syscall(SYS_tgkill, getpid(), t1, SIGUSR1);
	while (!handler_tid)
		usleep(1000);
	printf("tgkill: handler ran in the target thread %d\n", handler_tid == t1);
	got_in_thread = 1;
	pthread_join(th, NULL);

	/* A thread waiting in sigwait takes a signal sent to it (blocked everywhere). */
	block(SIG_BLOCK, SIGUSR2);
	pthread_create(&th, NULL, waiter, (void *)&t2);
	while (!t2)
		usleep(1000);
	usleep(20000);
	syscall(SYS_tgkill, getpid(), t2, SIGUSR2);
	pthread_join(th, &r);
	printf("sigwait in a thread: got %d\n", (int)(intptr_t)r);
	block(SIG_UNBLOCK, SIGUSR2);
}

static void interrupted_read(void)
{
	char c;
	ssize_t n;
	int fds[2];

	if (pipe(fds) || pipe(restart_pipe))
		perror("pipe");
	handle_plain(SIGALRM, on_alarm, 0);
	alarm_in(ALARM_USEC);
	errno = 0;
	n = read(fds[0], &c, 1);
	printf("alarm during read: %zd %s handled %d\n", n, strerror(errno), (int)handled);

	handle_plain(SIGALRM, on_alarm_feed, SA_RESTART);
	alarm_in(ALARM_USEC);
	n = read(restart_pipe[0], &c, 1);
	printf("alarm during read with SA_RESTART: %zd '%c'\n", n, n == 1 ? c : '?');

	alarm(100);
	printf("alarm: %u seconds were left\n", alarm(0));
}

static void null_dereference(void)
{
	handle(SIGSEGV, on_segv, SA_NODEFER);
	got_sig = 0;
	if (sigsetjmp(recover, 1) == 0) {
		*(volatile int *)NULL = 1;
		printf("NULL store: no fault\n");
	} else {
		printf("NULL store: SIGSEGV %d code SEGV_MAPERR %d address NULL %d\n",
		       got_sig == SIGSEGV, got_code == SEGV_MAPERR, (int)got_value);
	}
}

static void timer_and_waits(void)
{
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 1,
			       .sigev_value.sival_int = TIMER_VAL };
	struct itimerspec its = { .it_value = { .tv_nsec = 10000000 } };
	struct timespec none = { 0 };
	siginfo_t si;
	sigset_t set, old;
	timer_t t;
	int r;

	handle(SIGRTMIN + 1, on_info, 0);
	block(SIG_BLOCK, SIGRTMIN + 1);
	sigprocmask(SIG_BLOCK, NULL, &old);
	if (timer_create(CLOCK_MONOTONIC, &ev, &t))
		perror("timer_create");
	timer_settime(t, 0, &its, NULL);
	set = old;
	sigdelset(&set, SIGRTMIN + 1);
	got_value = 0;
	sigsuspend(&set);
	printf("sigsuspend: sig RTMIN+1 %d code SI_TIMER %d value %d\n",
	       got_sig == SIGRTMIN + 1, got_code == SI_TIMER, (int)got_value);
	timer_delete(t);
	block(SIG_UNBLOCK, SIGRTMIN + 1);

	block(SIG_BLOCK, SIGUSR2);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	errno = 0;
	r = sigtimedwait(&set, &si, &none);
	printf("sigtimedwait, nothing pending: %d %s\n", r, strerror(errno));
	raise(SIGUSR2);
	/* The system call itself: glibc's wrapper folds SI_TKILL into SI_USER. */
	r = (int)syscall(SYS_rt_sigtimedwait, &set, &si, &none, sizeof(uint64_t));
	printf("sigtimedwait: %d code SI_TKILL %d\n", r, si.si_code == SI_TKILL);
	block(SIG_UNBLOCK, SIGUSR2);
}

static void *send_usr1_later(void *arg)
{
	struct timespec ts = { .tv_nsec = 20000000 };

	(void)arg;
	nanosleep(&ts, NULL);
	kill(getpid(), SIGUSR1);
	return NULL;
}

/* Blocked signals read from a signalfd: poll and epoll see it readable exactly while
 * one of its mask is pending; a blocking read waits for one another thread sends. */
static void signal_fd(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, got;
	struct signalfd_siginfo r[3];
	union sigval v = { .sival_int = SFD_VAL };
	sigset_t set;
	pthread_t th;
	ssize_t n;
	int fd, ep;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGRTMIN + 2);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	ep = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	errno = 0;
	n = read(fd, r, sizeof(r));
	printf("signalfd, nothing pending: %zd %s; poll %d epoll %d\n", n, strerror(errno),
	       poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 0),
	       epoll_wait(ep, &got, 1, 0));
	raise(SIGUSR1);
	sigqueue(getpid(), SIGRTMIN + 2, v);
	printf("signalfd, two pending: poll %d epoll %d\n",
	       poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 1000),
	       epoll_wait(ep, &got, 1, 1000));
	n = read(fd, r, sizeof(r));
	printf("signalfd read %zd records: USR1 %d SI_TKILL %d, RTMIN+2 %d SI_QUEUE %d value %d\n",
	       n / (ssize_t)sizeof(r[0]), r[0].ssi_signo == SIGUSR1, r[0].ssi_code == SI_TKILL,
	       (int)r[1].ssi_signo == SIGRTMIN + 2, r[1].ssi_code == SI_QUEUE, r[1].ssi_int);
	printf("signalfd, all read: poll %d epoll %d\n",
	       poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 0),
	       epoll_wait(ep, &got, 1, 0));
	close(ep);
	close(fd);

	fd = signalfd(-1, &set, SFD_CLOEXEC); /* blocking */
	pthread_create(&th, NULL, send_usr1_later, NULL);
	n = read(fd, r, sizeof(r));
	pthread_join(th, NULL);
	printf("signalfd blocking read: %zd bytes, USR1 %d SI_USER %d\n", n,
	       r[0].ssi_signo == SIGUSR1, r[0].ssi_code == SI_USER);
	close(fd);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

static void broken_pipe(void)
{
	int fds[2];
	ssize_t n;

	if (pipe(fds))
		perror("pipe");
	close(fds[0]);
	signal(SIGPIPE, SIG_IGN);
	errno = 0;
	n = write(fds[1], "x", 1);
	printf("SIGPIPE ignored: write %zd %s\n", n, strerror(errno));
	signal(SIGPIPE, SIG_DFL);
	printf("SIGPIPE default: the next write ends the program\n");
	fflush(stdout);
	n = write(fds[1], "x", 1);
	printf("still running after write %zd\n", n);
}

static int ignore_int(void)
{
	signal(SIGINT, SIG_IGN);
	printf("ready\n");
	sleep(100);
	printf("slept through\n");
	return 0;
}

static void on_usr2(int sig)
{
	(void)sig;
	got_sig = sig;
}

static int snapshot_mode(int seconds)
{
	struct itimerval it = { .it_value = { .tv_sec = seconds } };

	handle_plain(SIGALRM, on_alarm, 0);
	handle_plain(SIGUSR2, on_usr2, 0);
	block(SIG_BLOCK, SIGUSR2);
	raise(SIGUSR2);
	setitimer(ITIMER_REAL, &it, NULL);
	printf("armed\n");
	while (!handled)
		pause();
	printf("alarm: handled %d\n", (int)handled);
	got_sig = 0;
	block(SIG_UNBLOCK, SIGUSR2);
	printf("pending SIGUSR2 delivered on unblock: %d\n", got_sig == SIGUSR2);
	return 0;
}

static int timer_storm(long ns, long ms)
{
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 2 };
	struct itimerspec its = { .it_value = { .tv_nsec = 1000000 },
				  .it_interval = { .tv_sec = ns / 1000000000L,
						   .tv_nsec = ns % 1000000000L } };
	struct timespec nap = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	siginfo_t si = { 0 };
	sigset_t set;
	timer_t t;

	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 2);
	block(SIG_BLOCK, SIGRTMIN + 2);
	if (ns && (timer_create(CLOCK_MONOTONIC, &ev, &t) || timer_settime(t, 0, &its, NULL))) {
		perror("timer");
		return 1;
	}
	while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
		;
	/* The expiries that piled up while it slept arrive as one signal's overruns. */
	if (ns && sigwaitinfo(&set, &si) != SIGRTMIN + 2)
		perror("sigwaitinfo");
	printf("storm: slept, overruns counted %d\n", ns ? si.si_overrun > 0 : 1);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 3 && strcmp(argv[1], "timer-storm") == 0)
		return timer_storm(atol(argv[2]), atol(argv[3]));
	if (argc > 1 && strcmp(argv[1], "ignore-int") == 0)
		return ignore_int();
	if (argc > 1 && strcmp(argv[1], "snapshot") == 0)
		return snapshot_mode(argc > 2 ? atoi(argv[2]) : 6);
	info_and_masks();
	alternate_stack();
	between_threads();
	interrupted_read();
	null_dereference();
	timer_and_waits();
	signal_fd();
	broken_pipe();
	return 0;
}

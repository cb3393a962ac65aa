/*
 * test_sigfwd.c - the signals ccvm passes on to its guest (vmm/sigfwd.c): which ones
 * go to the guest and when a second SIGINT or SIGTERM stops the VM instead.
 */
#include "suites.h"
#include "../../vmm/sigfwd.h"

#include <signal.h>

/* SIGINT or SIGTERM again within 3 s stops the VM with 128 + the signal; later, or
 * another signal, goes to the guest. */
START_TEST(test_second_interrupt)
{
	struct sigfwd_state st = { 0 };

	ck_assert_int_eq(sigfwd_decide(&st, SIGINT, 100.0), 0);
	ck_assert_int_eq(sigfwd_decide(&st, SIGUSR1, 100.5), 0);
	ck_assert_int_eq(sigfwd_decide(&st, SIGHUP, 100.6), 0);
	ck_assert_int_eq(sigfwd_decide(&st, SIGTERM, 102.9), 128 + SIGTERM);
	st = (struct sigfwd_state){ 0 };
	ck_assert_int_eq(sigfwd_decide(&st, SIGTERM, 10.0), 0);
	ck_assert_int_eq(sigfwd_decide(&st, SIGINT, 13.5), 0); /* 3.5 s later: passed on */
	ck_assert_int_eq(sigfwd_decide(&st, SIGINT, 14.0), 128 + SIGINT);
}
END_TEST

/* The forwarded signals are blocked in the thread that asks (and those it starts). */
START_TEST(test_blocked)
{
	sigset_t cur;

	ck_assert_int_eq(sigfwd_block(), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	ck_assert(sigismember(&cur, SIGINT) && sigismember(&cur, SIGTERM) &&
		  sigismember(&cur, SIGHUP) && sigismember(&cur, SIGQUIT) &&
		  sigismember(&cur, SIGUSR1) && sigismember(&cur, SIGUSR2));
	ck_assert(!sigismember(&cur, SIGSEGV));
}
END_TEST

Suite *sigfwd_suite(void)
{
	Suite *s = suite_create("sigfwd");
	TCase *tc = tcase_create("decide");

	tcase_add_test(tc, test_second_interrupt);
	tcase_add_test(tc, test_blocked);
	suite_add_tcase(s, tc);
	return s;
}

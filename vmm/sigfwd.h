/*
 * sigfwd.h - signals ccvm receives, passed on to the guest (vmm/sigfwd.c).
 */
#ifndef CCVM_SIGFWD_H
#define CCVM_SIGFWD_H

#include <stdbool.h>

struct vm;
struct sigfwd;

/* When the last SIGINT or SIGTERM came (monotonic seconds; 0: none yet). */
struct sigfwd_state {
	double last_s;
};

/* Block the forwarded signals in the calling thread; call it before any other thread
 * starts, so that all of them inherit it. 0 or -errno. */
int sigfwd_block(void);

/* What to do with @sig received at @now_s: 0 to pass it on to the guest, or the exit
 * status to stop the VM with (a second SIGINT/SIGTERM within 3 s). */
int sigfwd_decide(struct sigfwd_state *st, int sig, double now_s);

/* The thread that passes them on, for @vm (whose proc may come later), and its end. */
int sigfwd_start(struct vm *vm, struct sigfwd **out);
void sigfwd_stop(struct sigfwd *f);

#endif

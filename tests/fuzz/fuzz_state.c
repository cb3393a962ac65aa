/*
 * fuzz_state.c - libFuzzer target: the saved process state loader (vmm/linux/state.c,
 * fdstate.c), on any JSON an image may carry. The checks run first (lx_state_check);
 * what passes is rebuilt into a process (lx_proc_restore) under a fixed policy: the
 * root is a scratch directory, nothing is published (so no saved rule binds a port),
 * and the process is destroyed again.
 */
#include "../../mmu/layout.h"
#include "../../vmm/linux/lx.h"
#include "../../base/log.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RAM       (16ULL << 20)
#define FUZZ_ROOT "/tmp/ccvm-fuzz-state-root" /* the seeds' saved root */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gmem mem;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const rw[] = { FUZZ_ROOT "/rw" };
	static const struct lx_net none;
	const struct lx_restore_policy pol = { .root = FUZZ_ROOT, .rw = rw, .n_rw = 1,
					       .net = &none, .publish_given = true };
	struct lx_proc *p = NULL;
	char err[512];
	json_t *st;

	log_set_level(LOG_ERR);
	if (!mem.host) {
		mkdir(FUZZ_ROOT, 0700);
		mkdir(FUZZ_ROOT "/rw", 0700);
		if (gmem_map(&mem, RAM))
			abort();
	}
	st = json_loadb((const char *)data, size, 0, NULL);
	if (!st)
		return 0;
	if (lx_state_check(st, RAM, err, sizeof(err)) == 0 &&
	    lx_proc_restore(&mem, st, &pol, &p, err, sizeof(err)) == 0)
		lx_proc_destroy(p);
	json_decref(st);
	return 0;
}

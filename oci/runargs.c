/*
 * runargs.c - the ccvm run command line a container's process becomes.
 *
 * ccvm-oci does not build VMs itself: its container process execs ccvm's own run
 * command, so that a container runs exactly what `ccvm run` runs, with the same
 * checks. This file turns a checked config into those options.
 *
 * Memory: the container's memory limit bounds the whole VM (the cgroup holds the
 * monitor), so the guest's RAM is the limit less a quarter kept for the monitor, of
 * which the snapshot pool (the copies a snapshot holds) takes all but 16 MiB.
 */
#include "init.h"

#include "state.h"
#include "../base/log.h"
#include "../vmm/linux/rlimit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_ALIGN        (2ull << 20)   /* the VM's RAM is whole 2 MiB regions */
#define RUN_MIN_RESERVE  (32ull << 20)  /* the monitor's share of a limit, at least */
#define RUN_OWN_HEAP     (16ull << 20)  /* of which the monitor itself uses */
#define RUN_MIN_RAM      (64ull << 20)  /* a guest smaller than this is refused */

struct argv_b {
	char **v;
	size_t n, cap;
	int rc;
};

static void push(struct argv_b *b, const char *s)
{
	if (b->rc)
		return;
	if (b->n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		char **v = realloc(b->v, cap * sizeof(*v));

		if (!v) {
			b->rc = -ENOMEM;
			return;
		}
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n] = strdup(s);
	if (!b->v[b->n]) {
		b->rc = -ENOMEM;
		return;
	}
	b->v[++b->n] = NULL;
}

static void push2(struct argv_b *b, const char *opt, const char *val)
{
	push(b, opt);
	push(b, val);
}

/* --mem and --snapshot-pool from the memory limit. */
static int run_memory(const struct oci_config *c, struct argv_b *b, char *err, size_t len)
{
	unsigned long long lim = (unsigned long long)c->mem_limit, reserve, ram;
	char v[32];

	if (!lim)
		return 0;
	reserve = lim / 4 > RUN_MIN_RESERVE ? lim / 4 : RUN_MIN_RESERVE;
	ram = lim > reserve ? (lim - reserve) / RUN_ALIGN * RUN_ALIGN : 0;
	if (ram < RUN_MIN_RAM)
		return log_set_err(-EINVAL, err, len, "config.json: linux.resources.memory.limit: "
				   "%llu bytes leave the guest less than %llu MiB (a quarter, at "
				   "least %llu MiB, is the monitor's)", lim, RUN_MIN_RAM >> 20,
				   RUN_MIN_RESERVE >> 20);
	snprintf(v, sizeof(v), "%lluK", ram >> 10);
	push2(b, "--mem", v);
	snprintf(v, sizeof(v), "%lluK", (reserve - RUN_OWN_HEAP) >> 10);
	push2(b, "--snapshot-pool", v);
	return 0;
}

static void run_rlimits(const struct oci_config *c, struct argv_b *b)
{
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		const struct rlimit *l = &c->rlimits.rlim[r];
		char v[96], soft[24], hard[24];

		if (!(c->rlimits.set & (1u << r)))
			continue;
		snprintf(soft, sizeof(soft), "%llu", (unsigned long long)l->rlim_cur);
		snprintf(hard, sizeof(hard), "%llu", (unsigned long long)l->rlim_max);
		snprintf(v, sizeof(v), "%s=%s:%s", lx_rlimit_name(r),
			 l->rlim_cur == RLIM_INFINITY ? "unlimited" : soft,
			 l->rlim_max == RLIM_INFINITY ? "unlimited" : hard);
		push2(b, "--rlimit", v);
	}
}

/* What run and restore take alike: root, writable directories, the control socket,
 * where its snapshots may go, the seccomp profile, the network, the user. */
static void run_common(const struct oci_config *c, const struct oci_rw *rw, const char *state_dir,
		       struct argv_b *b)
{
	char v[64], path[PATH_MAX + 32];

	push2(b, "--root", rw->root[0] ? rw->root : c->root);
	if (!rw->n)
		push2(b, "--rw", "none");
	for (int i = 0; i < rw->n; i++)
		push2(b, "--rw", rw->dirs[i]);
	snprintf(path, sizeof(path), "%s/%s", state_dir, OCI_CTL_FILE);
	push2(b, "--control", path);
	/* checkpoint's images are written here first, then moved where it is asked */
	push2(b, "--image-dir", state_dir);
	if (c->seccomp) {
		snprintf(path, sizeof(path), "%s/%s", state_dir, OCI_SECCOMP_FILE);
		push2(b, "--seccomp-profile", path);
	}
	/* The container's network is its namespace's: there the guest binds and connects
	 * as it asks. Without one (the host's network, as the config asks) binds stay
	 * ccvm's published ports only, and connections go anywhere. */
	push2(b, "--net", c->ns_net ? "container" : "host");
	if (c->uid || c->gid) {
		snprintf(v, sizeof(v), "%u:%u", c->uid, c->gid);
		push2(b, "--user", v);
	}
}

int oci_run_argv(const struct oci_config *c, const struct oci_rw *rw, const char *state_dir,
		 const char *image, bool debug, char ***out, char *err, size_t len)
{
	struct argv_b b = { 0 };
	int rc;

	push(&b, "ccvm");
	if (image) {
		/* the image brings the guest's RAM size, limits and program; the memory is
		 * loaded as the guest touches it */
		push2(&b, "restore", image);
		run_common(c, rw, state_dir, &b);
		push(&b, "--lazy");
		if (debug)
			push(&b, "--verbose");
		goto done;
	}
	push(&b, "run");
	run_common(c, rw, state_dir, &b);
	if ((rc = run_memory(c, &b, err, len)))
		goto fail;
	run_rlimits(c, &b);
	for (size_t i = 0; i < c->n_ccvm_opts; i++) {
		char opt[64];

		snprintf(opt, sizeof(opt), "--%s", c->ccvm_opts[i].name);
		push2(&b, opt, c->ccvm_opts[i].value);
	}
	if (debug)
		push(&b, "--verbose");
	push(&b, "--");
	for (size_t i = 0; i < c->n_args; i++)
		push(&b, c->args[i]);
done:
	if ((rc = b.rc))
		goto fail;
	*out = b.v;
	return 0;
fail:
	oci_argv_free(b.v);
	return rc;
}

void oci_argv_free(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

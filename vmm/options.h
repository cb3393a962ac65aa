/*
 * options.h - the command line of `ccvm run` and `ccvm restore`: one table of options
 * that the parser, `--help` and the man page's check all read (options.c).
 */
#ifndef CCVM_OPTIONS_H
#define CCVM_OPTIONS_H

#include "confine.h"
#include "linux/lx.h"
#include "linux/net.h"
#include "../snapshot/engine.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define OPT_MAX_RW_DIRS  64
#define OPT_MAX_IMAGE_DIRS 64
#define OPT_DEFAULT_MEM  (1ULL << 30)

/* Which commands take an option. */
enum opt_cmd { OPT_RUN = 1u << 0, OPT_RESTORE = 1u << 1 };

/* How snapshots are taken: CCoW's knobs. */
struct ccow_opts {
	uint64_t region_size;
	unsigned window_ms;  /* 0: adaptive */
	bool tracker;        /* coverage tracking asked for (--coverage-window or ccow) */
	bool window_off;     /* --coverage-window off */
	double budget_pct;   /* --coverage-budget: share of a vCPU's run time per second */
	double stall_ms;     /* --coverage-stall-ms: the most it loses within 10 ms */
	bool audit;          /* --coverage-audit */
	uint64_t pool_bytes; /* 0: default */
	bool held_compress;  /* --snapshot-held-compress */
};

/* What the options of run and restore say. */
struct cli_opts {
	uint64_t mem;               /* 0 with restore: the image's */
	uint64_t mem_total;         /* --mem-total; 0: twice the RAM (vm_create's default) */
	const char *control;
	struct snap_schedule sched;
	struct ccow_opts ccow;
	const char *root;
	const char *incoming;       /* restore --incoming: where a migration stream comes */
	unsigned peer_timeout_s;    /* restore --incoming --peer-timeout; 0: not given */
	bool insecure;              /* restore --incoming tcp: without TLS, loopback only */
	const char *tls_creds;      /* restore --incoming --tls-creds DIR */
	const char *tls_authz;      /* --tls-authz NAME[,NAME...]: the sources accepted */
	const char *rw[OPT_MAX_RW_DIRS];
	int n_rw;
	bool rw_none;               /* --rw none: no directory is writable */
	/* where images may be written: --image-dir (default: the current directory), and
	 * --snapshot-dir */
	const char *image_dir[OPT_MAX_IMAGE_DIRS + 1];
	int n_image_dir;
	enum confine_mode confine; /* --confine */
	const char *user;           /* --user, or NULL */
	struct lx_net net;
	bool publish_given;         /* restore: else the saved loopback rules are reused */
	int vcpus;                  /* restore: 0 for the default */
	int max_procs;              /* --max-procs: processes at once, zombies included */
	bool full_every_given;      /* --snapshot-full-every was given */
	bool fastio;
	struct lx_rlimits rlimits;  /* --rlimit: the guest's limits at start */
	const char *seccomp_profile; /* --seccomp-profile FILE, or NULL */
	bool lazy;                  /* restore: memory on first touch */
	int verbose;
	bool help;                  /* --help: print opt_usage and stop */
	int argc;                   /* what follows the options */
	char **argv;
};

/*
 * opt_parse - parse the options of @cmd (argv[0] is the command's name) into @o, with
 * run's or restore's defaults. Returns 0 (o->help set for --help), or -EINVAL with a
 * message for the user logged.
 */
int opt_parse(enum opt_cmd cmd, int argc, char **argv, struct cli_opts *o);

/* After opt_parse: what the whole command line means together (--snapshot-every needs
 * --snapshot-dir, RAM within bounds, ...). Returns 0 or -EINVAL with a message. */
int opt_finish(enum opt_cmd cmd, struct cli_opts *o);

/* The options of @cmd, one line each with its help, as `--help` prints them. */
void opt_usage(enum opt_cmd cmd, FILE *out);

/* For checks that the man page and the table agree: the long name of option @i of
 * the table (NULL past the end) and the commands that take it. */
const char *opt_name(int i, unsigned *cmds);

#endif

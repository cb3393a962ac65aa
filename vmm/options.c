/*
 * options.c - the options of `ccvm run` and `ccvm restore`, from one table.
 *
 * Each entry names an option, the commands that take it, its help and the function
 * that checks and stores its argument. getopt's table, `--help` and the unit test that
 * holds the man page (ccvm.1) to it are all built from here, so they cannot disagree.
 * Restore takes what still means something once a VM exists (where it may run, what it
 * may reach, RAM, threads, the control socket) and none of what only shapes a new
 * process; the snapshot policy options are run's until a restore has been seen to
 * honour them in a VM.
 */
#include "options.h"
#include "cli.h"
#include "../base/log.h"
#include "migrate.h"
#include "tls.h"
#include "vm.h"
#include "linux/rlimit.h"
#include "../mmu/layout.h"
#include "../mmu/tracker.h"
#include "../snapshot/image.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPT_BOTH (OPT_RUN | OPT_RESTORE)
#define OPT_VAL_BASE 256          /* getopt values: past every character */
#define OPT_MAX_WINDOW_MS 600000
#define OPT_MIN_POOL (1ULL << 20)
#define OPT_MAX_STALL_MS 1000
#define OPT_HELP_COLUMN 20
#define OPT_SNAP_PREFIX "snapshot-" /* run's spelling of a snapshot request's field */
#define OPT_STR_(x) #x
#define OPT_STR(x) OPT_STR_(x)

/* The codec of a VM's snapshots: auto, which compresses more while the writing threads
 * wait on the disk and less while they wait on compressing (snapshot/codec_auto.c).
 * The end-to-end suite passes with it in VMs (every snapshot, restore, incremental,
 * merge and damage test). The engine's own default is zstd (SNAP_DEFAULT_CODEC,
 * measured on plain memory). */
#define OPT_DEFAULT_CODEC IMG_CODEC_AUTO
#define OPT_DEFAULT_CODEC_NAME "auto"

/* Measured (bench/restore-modes.sh): see docs. */
#define OPT_RESTORE_LAZY_DEFAULT false

struct opt_def {
	const char *name;
	const char *arg;          /* its argument's name; NULL: none */
	unsigned cmds;
	const char *help;
	/* NULL: a field of the snapshot request (snapshot/request.c), set by opt_snap */
	int (*set)(struct cli_opts *o, const char *arg);
};

/* A field of the snapshot request that periodic and ctl snapshots start from, through
 * the one table the control socket reads too: the same values, the same messages. */
static int opt_snap(struct cli_opts *o, const char *name, const char *arg)
{
	const struct snap_field *f = snap_field_find(name);
	const char *prefix = strncmp(name, OPT_SNAP_PREFIX, strlen(OPT_SNAP_PREFIX)) ? "" :
			     OPT_SNAP_PREFIX;
	char err[256];

	if (!f || snap_field_set(&o->sched.req, f, prefix, arg, err, sizeof(err))) {
		log_err("%s", f ? err : "unknown snapshot option");
		return -EINVAL;
	}
	return 0;
}

static int set_mem(struct cli_opts *o, const char *arg)
{
	if (cli_parse_size(arg, &o->mem)) {
		log_err("--mem %s: not a size (examples: 512M, 2G)", arg);
		return -EINVAL;
	}
	return 0;
}

static int set_mem_total(struct cli_opts *o, const char *arg)
{
	if (cli_parse_size(arg, &o->mem_total) || !o->mem_total) {
		log_err("--mem-total %s: not a size (examples: 2G, 8G)", arg);
		return -EINVAL;
	}
	return 0;
}

static int set_control(struct cli_opts *o, const char *arg)
{
	o->control = arg;
	return 0;
}

static int set_root(struct cli_opts *o, const char *arg)
{
	o->root = arg;
	return 0;
}

/* One more directory of a repeatable option (--rw, --image-dir), at most @max. */
static int opt_push_dir(const char **list, int *n, int max, const char *opt, const char *arg)
{
	if (*n == max) {
		log_err("too many --%s directories (at most %d)", opt, max);
		return -EINVAL;
	}
	list[(*n)++] = arg;
	return 0;
}

static int set_rw(struct cli_opts *o, const char *arg)
{
	if (strcmp(arg, "none") == 0) {
		o->rw_none = true;
		return 0;
	}
	return opt_push_dir(o->rw, &o->n_rw, OPT_MAX_RW_DIRS, "rw", arg);
}

static int set_image_dir(struct cli_opts *o, const char *arg)
{
	return opt_push_dir(o->image_dir, &o->n_image_dir, OPT_MAX_IMAGE_DIRS, "image-dir", arg);
}

static int set_confine(struct cli_opts *o, const char *arg)
{
	if (confine_mode_parse(arg, &o->confine)) {
		log_err("--confine %s: expected auto, require or off", arg);
		return -EINVAL;
	}
	return 0;
}

static int set_user(struct cli_opts *o, const char *arg)
{
	o->user = arg;
	return 0;
}

static int set_rlimit(struct cli_opts *o, const char *arg)
{
	char err[128];

	if (lx_rlimit_parse(arg, &o->rlimits, err, sizeof(err))) {
		log_err("--rlimit %s: %s", arg, err);
		return -EINVAL;
	}
	return 0;
}

static int set_seccomp_profile(struct cli_opts *o, const char *arg)
{
	o->seccomp_profile = arg;
	return 0;
}

/* One --publish rule, with a message for the user when it cannot be. */
static int set_publish(struct cli_opts *o, const char *arg)
{
	struct lx_publish rule;
	char err[LX_NET_ERR_LEN];
	int rc = lx_net_parse_publish(arg, &rule, err, sizeof(err));

	if (rc) {
		log_err("%s", err);
		return rc;
	}
	rc = lx_net_add(&o->net, &rule);
	if (rc == -EEXIST)
		log_err("--publish %s: that guest port or host address is already published", arg);
	else if (rc)
		log_err("--publish %s: at most %d ports can be published", arg, LX_MAX_PUBLISH);
	o->publish_given = true;
	return rc;
}

/* The inode number of the initial network namespace on kernels that fix it (6.x);
 * others number it as any. */
#define NET_INIT_INO 0xEFFFFFF9u

/* Is ccvm in a network namespace other than the host's: that of process 1, or where
 * process 1 may not be looked at (a container manager's init), the initial one? */
static bool net_namespaced(void)
{
	struct stat self, init;

	if (stat("/proc/self/ns/net", &self))
		return false;
	if (stat("/proc/1/ns/net", &init) == 0)
		return self.st_ino != init.st_ino || self.st_dev != init.st_dev;
	return self.st_ino != NET_INIT_INO;
}

static int set_net(struct cli_opts *o, const char *arg)
{
	if (strcmp(arg, "container") == 0) {
		if (!net_namespaced()) {
			log_err("--net container: ccvm is in the host's network namespace, which "
				"would be the guest's (give it one: ip netns exec NAME ccvm ...)");
			return -EINVAL;
		}
		o->net.host = o->net.own_ns = true;
		return 0;
	}
	if (strcmp(arg, "host") != 0) {
		log_err("--net %s: 'host' (connections beyond loopback) or 'container' (the "
			"network namespace ccvm runs in is the guest's own)", arg);
		return -EINVAL;
	}
	o->net.host = true;
	return 0;
}

static int set_allow_port(struct cli_opts *o, const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || end == arg || v < 1 || v > 65535) {
		log_err("--allow-port %s: a port number, 1 to 65535", arg);
		return -EINVAL;
	}
	if (lx_net_allow_port(&o->net, (uint16_t)v)) {
		log_err("--allow-port %s: at most %d ports", arg, LX_MAX_ALLOW);
		return -E2BIG;
	}
	return 0;
}

/* A socket file the guest may reach, resolved like --rw (it must exist); kept for the
 * life of the process. */
static int set_allow_unix(struct cli_opts *o, const char *arg)
{
	char *real;

	if (o->net.n_allow_unix == LX_MAX_ALLOW) {
		log_err("--allow-unix %s: at most %d sockets", arg, LX_MAX_ALLOW);
		return -E2BIG;
	}
	real = realpath(arg, NULL);
	if (!real) {
		int rc = -errno;

		log_err("--allow-unix %s: %s", arg, strerror(errno));
		return rc;
	}
	o->net.allow_unix[o->net.n_allow_unix++] = real;
	return 0;
}

/* @arg as a whole decimal integer from @lo to @hi into *@v; -EINVAL otherwise. */
static int set_max_procs(struct cli_opts *o, const char *arg)
{
	long v;

	if (num_parse_long(arg, 1, LX_MAX_PROCS, &v)) {
		log_err("--max-procs %s: the most processes at once, 1 to %d", arg, LX_MAX_PROCS);
		return -EINVAL;
	}
	o->max_procs = (int)v;
	return 0;
}

static int set_vcpus(struct cli_opts *o, const char *arg)
{
	long v;

	if (num_parse_long(arg, 1, VM_MAX_VCPUS, &v)) {
		log_err("--vcpus %s: the most guest threads at once, 1 to %d", arg, VM_MAX_VCPUS);
		return -EINVAL;
	}
	o->vcpus = (int)v;
	return 0;
}

static int set_fastio(struct cli_opts *o, const char *arg)
{
	if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
		log_err("--fastio %s: on or off", arg);
		return -EINVAL;
	}
	o->fastio = strcmp(arg, "on") == 0;
	return 0;
}

static int set_held_compress(struct cli_opts *o, const char *arg)
{
	if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
		log_err("--snapshot-held-compress %s: on or off", arg);
		return -EINVAL;
	}
	o->ccow.held_compress = strcmp(arg, "on") == 0;
	return 0;
}

static int set_incoming(struct cli_opts *o, const char *arg)
{
	if (strncmp(arg, "unix:", 5) && strncmp(arg, "tcp:", 4)) {
		log_err("--incoming %s: unix:PATH or tcp:ADDR:PORT", arg);
		return -EINVAL;
	}
	o->incoming = arg;
	return 0;
}

static int set_insecure(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->insecure = true;
	return 0;
}

static int set_tls_creds(struct cli_opts *o, const char *arg)
{
	o->tls_creds = arg;
	return 0;
}

static int set_tls_authz(struct cli_opts *o, const char *arg)
{
	if (!tls_authz_ok(arg)) {
		log_err("--tls-authz %s: NAME[,NAME...], each 1 to %d bytes", arg,
			TLS_NAME_MAX - 1);
		return -EINVAL;
	}
	o->tls_authz = arg;
	return 0;
}

static int set_peer_timeout(struct cli_opts *o, const char *arg)
{
	long v;

	if (num_parse_long(arg, 1, MIGRATE_PEER_TIMEOUT_S_MAX, &v)) {
		log_err("--peer-timeout %s: seconds the source may stay silent, 1 to %d", arg,
			MIGRATE_PEER_TIMEOUT_S_MAX);
		return -EINVAL;
	}
	o->peer_timeout_s = (unsigned)v;
	return 0;
}

static int set_lazy(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->lazy = true;
	return 0;
}

static int set_eager(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->lazy = false;
	return 0;
}

static int set_every(struct cli_opts *o, const char *arg)
{
	if (cli_parse_real(arg, 0, CLI_MAX_EVERY_S, &o->sched.every_s) || !(o->sched.every_s > 0)) {
		log_err("--snapshot-every %s: a positive number of seconds, at most %.0f", arg,
			CLI_MAX_EVERY_S);
		return -EINVAL;
	}
	return 0;
}

static int set_gap(struct cli_opts *o, const char *arg)
{
	if (cli_parse_real(arg, 0, CLI_MAX_EVERY_S, &o->sched.gap_s) || !(o->sched.gap_s > 0)) {
		log_err("--snapshot-gap %s: a positive number of seconds, at most %.0f", arg,
			CLI_MAX_EVERY_S);
		return -EINVAL;
	}
	return 0;
}

static int set_dir(struct cli_opts *o, const char *arg)
{
	o->sched.dir = arg;
	return 0;
}

static int set_keep(struct cli_opts *o, const char *arg)
{
	long v;

	if (num_parse_long(arg, 1, INT32_MAX, &v)) {
		log_err("--snapshot-keep %s: a count of at least 1", arg);
		return -EINVAL;
	}
	o->sched.keep = (int)v;
	return 0;
}

static int set_incremental(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->sched.incremental = true;
	return 0;
}

static int set_full_every(struct cli_opts *o, const char *arg)
{
	long v;

	if (num_parse_long(arg, 1, IMG_MAX_CHAIN, &v)) {
		log_err("--snapshot-full-every %s: from 1 (every snapshot full) to %d", arg,
			IMG_MAX_CHAIN);
		return -EINVAL;
	}
	o->sched.full_every = (int)v;
	o->full_every_given = true;
	return 0;
}

static int set_log(struct cli_opts *o, const char *arg)
{
	o->sched.log = arg;
	return 0;
}

static int set_region(struct cli_opts *o, const char *arg)
{
	uint64_t r;

	if (cli_parse_size(arg, &r) || r < COV_MIN_REGION || (r & (r - 1))) {
		log_err("--region-size %s: a power of two, at least 32K (e.g. 2M)", arg);
		return -EINVAL;
	}
	o->ccow.region_size = r;
	return 0;
}

static int set_window(struct cli_opts *o, const char *arg)
{
	char *end;
	long ms;

	if (strcmp(arg, "off") == 0) {
		o->ccow.tracker = false;
		o->ccow.window_off = true;
		return 0;
	}
	ms = strtol(arg, &end, 10);
	if (*end || end == arg || ms < 0 || ms > OPT_MAX_WINDOW_MS) {
		log_err("--coverage-window %s: milliseconds (0 = adapt to the last snapshot), or off",
			arg);
		return -EINVAL;
	}
	o->ccow.window_ms = (unsigned)ms;
	o->ccow.window_off = false;
	o->ccow.tracker = true;
	return 0;
}

static int set_coverage_budget(struct cli_opts *o, const char *arg)
{
	if (cli_parse_real(arg, 0, 100, &o->ccow.budget_pct)) {
		log_err("--coverage-budget %s: a percentage from 0 (no windows) to 100", arg);
		return -EINVAL;
	}
	return 0;
}

static int set_coverage_stall(struct cli_opts *o, const char *arg)
{
	if (cli_parse_real(arg, 0, OPT_MAX_STALL_MS, &o->ccow.stall_ms)) {
		log_err("--coverage-stall-ms %s: milliseconds, 0 (no windows) to %d", arg,
			OPT_MAX_STALL_MS);
		return -EINVAL;
	}
	return 0;
}

static int set_coverage_audit(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->ccow.audit = true;
	return 0;
}

static int set_pool(struct cli_opts *o, const char *arg)
{
	if (cli_parse_size(arg, &o->ccow.pool_bytes) || o->ccow.pool_bytes < OPT_MIN_POOL) {
		log_err("--snapshot-pool %s: a size of at least 1M", arg);
		return -EINVAL;
	}
	return 0;
}

static int set_verbose(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->verbose++;
	return 0;
}

static int set_help(struct cli_opts *o, const char *arg)
{
	(void)arg;
	o->help = true;
	return 0;
}

static const struct opt_def opt_table[] = {
	{ "mem", "SIZE", OPT_BOTH, "guest RAM (run: default 1G, suffixes K, M, G; restore: the "
	  "image's, which --mem must equal)", set_mem },
	{ "mem-total", "SIZE", OPT_BOTH, "the most memory all the guest's processes hold "
	  "together, 2 MiB at a time (default: twice the RAM; at least the RAM); a fork past "
	  "it fails with ENOMEM, a first touch gets SIGBUS; restore: at least what the saved "
	  "processes hold, or it is refused", set_mem_total },
	{ "control", "PATH", OPT_BOTH, "serve the control socket at PATH", set_control },
	{ "root", "DIR", OPT_BOTH, "the guest's / (default /)", set_root },
	{ "rw", "DIR|none", OPT_BOTH, "a directory the guest may write under (repeatable; "
	  "default: the current directory; none: no directory; restore --incoming needs one "
	  "of them given)", set_rw },
	{ "image-dir", "DIR", OPT_BOTH, "a directory ctl snapshot may write images to "
	  "(repeatable; default: the current directory; --snapshot-dir always)", set_image_dir },
	{ "confine", "auto|require|off", OPT_BOTH, "seccomp, Landlock and no new privileges "
	  "once the VM is set up (default auto: warn where the kernel lacks one; require: "
	  "refuse to run then; off: none, for debugging)", set_confine },
	{ "user", "USER[:GROUP]", OPT_BOTH, "become this user (and group) once the VM is set "
	  "up; needs root", set_user },
	{ "publish", "[HOSTIP:]HOSTPORT:GUESTPORT", OPT_BOTH, "a guest bind to GUESTPORT binds "
	  "HOSTIP:HOSTPORT (default HOSTIP 127.0.0.1; repeatable); binds to other ports are "
	  "refused. restore: replaces the saved rules, of which only loopback ones are reused "
	  "without it", set_publish },
	{ "net", "host|container", OPT_BOTH, "host: guest connections may go beyond loopback, "
	  "to any port; container: the network namespace ccvm runs in (not the host's) is the "
	  "guest's own, where it binds, listens and connects as it asks (ccvm-oci)", set_net },
	{ "allow-port", "PORT", OPT_BOTH, "a host loopback port the guest may connect or send to "
	  "(TCP and UDP; repeatable; its own ports are always allowed)", set_allow_port },
	{ "allow-unix", "PATH", OPT_BOTH, "a host Unix socket the guest may connect to outside "
	  "--rw (repeatable; ccvm's own control socket never)", set_allow_unix },
	{ "vcpus", "N", OPT_BOTH, "most guest threads at once, each a vCPU (run: default "
	  OPT_STR(VM_DEFAULT_VCPUS) "; restore: the saved threads at least; 1.."
	  OPT_STR(VM_MAX_VCPUS) ")", set_vcpus },
	{ "max-procs", "N", OPT_BOTH, "most processes at once, those not yet waited for "
	  "included; fork and vfork fail with EAGAIN beyond (default and most "
	  OPT_STR(LX_MAX_PROCS) ")", set_max_procs },
	{ "rlimit", "NAME=SOFT[:HARD]", OPT_RUN, "a resource limit the guest starts with "
	  "instead of ccvm's own (repeatable; NAME as nofile or RLIMIT_NOFILE; a number or "
	  "unlimited): the guest's alone, ccvm's own are never raised; descriptors stay "
	  "within the personality's table", set_rlimit },
	{ "seccomp-profile", "FILE", OPT_BOTH, "a seccomp profile for the guest's own system "
	  "calls, applied by ccvm before each call (the JSON of an OCI config's linux.seccomp: "
	  "defaultAction, syscalls with names, action, errnoRet and args); restore: the "
	  "image never brings one", set_seccomp_profile },
	{ "fastio", "on|off", OPT_RUN, "exitless socket reads and writes for dynamic glibc "
	  "programs (default on; off: every system call exits to the monitor)", set_fastio },
	{ "incoming", "unix:PATH|tcp:ADDR:PORT", OPT_RESTORE, "no FILE: listen there for one "
	  "live migration (ccvm ctl migrate: docs/migration.md) and run the VM it brings",
	  set_incoming },
	{ "tls-creds", "DIR", OPT_RESTORE, "with --incoming: take the stream over TLS only, "
	  "with DIR's x509 files (ca-cert.pem, server-cert.pem, server-key.pem; the source "
	  "shows a certificate that CA signed) or keys.psk (NAME:HEXKEY lines)",
	  set_tls_creds },
	{ "tls-authz", "NAME[,NAME...]", OPT_RESTORE, "with --tls-creds: only sources whose "
	  "certificate's CN or DNS name, or PSK user, is listed", set_tls_authz },
	{ "insecure", NULL, OPT_RESTORE, "with --incoming tcp: and no --tls-creds: accept a "
	  "stream neither authenticated nor encrypted, on a loopback address only (without "
	  "either, tcp: is refused)", set_insecure },
	{ "peer-timeout", "SECONDS", OPT_RESTORE, "with --incoming: give up, refusing the "
	  "migration, when the source sends nothing for this long once connected (default "
	  OPT_STR(MIGRATE_PEER_TIMEOUT_S_DEFAULT) ", 1.." OPT_STR(MIGRATE_PEER_TIMEOUT_S_MAX)
	  "; the wait for it to connect has none: SIGTERM ends it)", set_peer_timeout },
	{ "lazy", NULL, OPT_RESTORE, "load memory on first touch, the rest in the background",
	  set_lazy },
	{ "eager", NULL, OPT_RESTORE, "load all memory before the guest runs (the default)",
	  set_eager },
	{ "snapshot-every", "SECONDS", OPT_RUN, "take a live snapshot this often (needs "
	  "--snapshot-dir)", set_every },
	{ "snapshot-gap", "SECONDS", OPT_RUN, "or: take the next one this long after the "
	  "previous one ended (needs --snapshot-dir)", set_gap },
	{ "snapshot-dir", "DIR", OPT_RUN, "where periodic snapshots go (outside --rw, or the "
	  "guest can replace them)", set_dir },
	{ "snapshot-keep", "N", OPT_RUN, "newest periodic snapshots kept (default 2)", set_keep },
	{ "snapshot-policy", "ccow|cow|stop|fork", OPT_RUN, "the periodic snapshots' policy, "
	  "also ctl snapshot's default (default ccow)", NULL },
	{ "snapshot-rate", "MB/s", OPT_RUN, "the snapshot writer's bandwidth limit (default 0: "
	  "none)", NULL },
	{ "snapshot-compress", "auto|zstd|lz4|none", OPT_RUN, "compress each 2 MiB chunk of "
	  "snapshots that shrinks; auto: a codec and level per chunk, more while the threads "
	  "wait on the disk than on compressing (default " OPT_DEFAULT_CODEC_NAME "); ctl snapshot's "
	  "default too", NULL },
	{ "snapshot-compress-level", "N", OPT_RUN, "the codec's level (default: zstd 1, lz4 1; "
	  "zstd -7..19, lz4 -64..12: 2 and up its high-compression mode, below 0 faster)",
	  NULL },
	{ "snapshot-compact", "idle|off", OPT_RUN, "idle: once a snapshot ended, rewrite its "
	  "image smaller (zstd, patches folded in) in a SCHED_IDLE thread that holds still "
	  "while a snapshot or migration runs (default idle; not for --parent or --track "
	  "images); ctl snapshot's default too", NULL },
	{ "snapshot-threads", "N", OPT_RUN, "threads that compress and write a snapshot "
	  "(default " OPT_STR(SNAP_DEFAULT_THREADS) ", 1.." OPT_STR(SNAP_THREADS_MAX) ")",
	  NULL },
	{ "snapshot-incremental", NULL, OPT_RUN, "track the guest's writes after each snapshot; "
	  "periodic snapshots are incremental on the last one, ctl snapshots may name it as "
	  "--parent (needs the cow or ccow policy)", set_incremental },
	{ "snapshot-full-every", "N", OPT_RUN, "with --snapshot-incremental: every Nth periodic "
	  "snapshot is full (default " OPT_STR(SNAP_DEFAULT_FULL_EVERY) ", 1.."
	  OPT_STR(IMG_MAX_CHAIN) ")", set_full_every },
	{ "snapshot-log", "FILE", OPT_RUN, "append each finished snapshot's figures (JSON lines)",
	  set_log },
	{ "region-size", "SIZE", OPT_RUN, "CCoW region (power of two >= 32K, default 2M)",
	  set_region },
	{ "snapshot-threshold", "T", OPT_RUN, "coverage at which a region is hot (default "
	  "0.80; 0 = CCoW-All)", NULL },
	{ "threshold", "T", OPT_RUN, "the same as --snapshot-threshold", NULL },
	{ "snapshot-save-order", "hot-first|linear", OPT_RUN, "writer order under ccow "
	  "(default hot-first)", NULL },
	{ "save-order", "hot-first|linear", OPT_RUN, "the same as --snapshot-save-order", NULL },
	{ "snapshot-precopy", "lazy|eager|rounds|auto", OPT_RUN, "ccow: copy hot regions on "
	  "their first fault (lazy); or in the pause hot regions, then recently written pages, "
	  "then all if it fits, never protecting them (eager); or write memory to the image "
	  "before the pause while the guest runs, again for what it rewrites, until the rest "
	  "fits the pause (rounds: no fault, the image raw); auto, the default: rounds unless "
	  "hot regions hold three quarters of the memory in use, or after rounds that did not "
	  "converge while more than a quarter is hot: then eager", NULL },
	{ "precopy", "lazy|eager|rounds|auto", OPT_RUN, "the same as --snapshot-precopy", NULL },
	{ "snapshot-pause-budget-ms", "MS", OPT_RUN, "eager, rounds: the longest the pause may "
	  "last (default " OPT_STR(SNAP_DEFAULT_PAUSE_BUDGET_MS_INT) ")", NULL },
	{ "pause-budget-ms", "MS", OPT_RUN, "the same as --snapshot-pause-budget-ms", NULL },
	{ "coverage-window", "MS|off", OPT_RUN, "track coverage with the KVM dirty log in "
	  "windows of MS of guest run time (default: the last snapshot's duration); on under "
	  "ccow when snapshots are possible, off otherwise", set_window },
	{ "coverage-budget", "PCT", OPT_BOTH, "the most of each vCPU's run time coverage "
	  "tracking may take in any second (default " OPT_STR(TRACKER_BUDGET_PCT_DEFAULT_INT)
	  "; 0: no windows, snapshots' own observations only)", set_coverage_budget },
	{ "coverage-stall-ms", "MS", OPT_BOTH, "the most a vCPU may lose to coverage tracking "
	  "within any 10 ms of its run (default " OPT_STR(TRACKER_STALL_MS_DEFAULT_INT) ")",
	  set_coverage_stall },
	{ "coverage-audit", NULL, OPT_BOTH, "now and then, one unbudgeted full window to "
	  "compare the hot regions learnt within the budget with (stats regions: audit); a "
	  "measuring aid that costs the guest, off by default", set_coverage_audit },
	{ "snapshot-pool", "SIZE", OPT_RUN, "the most memory a snapshot takes besides the "
	  "guest's: copies and the writer's buffers (default: half of RAM, 32M..16G)", set_pool },
	{ "snapshot-held-compress", "on|off", OPT_RUN, "compress the copies a snapshot holds "
	  "once they fill half of the pool (default off: measured to cost more than it saves "
	  "on 2 cores)", set_held_compress },
	{ "verbose", NULL, OPT_BOTH, "more messages (-v; twice: trace every system call)",
	  set_verbose },
	{ "help", NULL, OPT_BOTH, "print these options (-h)", set_help },
};

#define OPT_N ((int)(sizeof(opt_table) / sizeof(opt_table[0])))

const char *opt_name(int i, unsigned *cmds)
{
	if (i < 0 || i >= OPT_N)
		return NULL;
	if (cmds)
		*cmds = opt_table[i].cmds;
	return opt_table[i].name;
}

/* Help text wrapped at @width columns, each line indented to OPT_HELP_COLUMN. */
static void opt_print_help(FILE *out, const char *text, int col)
{
	const int width = 88;

	while (*text) {
		int room = width - OPT_HELP_COLUMN, n = (int)strlen(text);

		if (col > OPT_HELP_COLUMN - 2) {
			fprintf(out, "\n%*s", OPT_HELP_COLUMN, "");
		} else {
			fprintf(out, "%*s", OPT_HELP_COLUMN - col, "");
		}
		if (n > room) {
			n = room;
			while (n > 0 && text[n] != ' ')
				n--;
			if (n == 0)
				n = room;
		}
		fprintf(out, "%.*s", n, text);
		text += n;
		while (*text == ' ')
			text++;
		col = width;
	}
	fputc('\n', out);
}

void opt_usage(enum opt_cmd cmd, FILE *out)
{
	fprintf(out, "%s", cmd == OPT_RUN ? "usage: ccvm run [OPTIONS] [--] PROGRAM [ARGS...]\n" :
					    "usage: ccvm restore FILE [OPTIONS]\n");
	for (int i = 0; i < OPT_N; i++) {
		const struct opt_def *d = &opt_table[i];
		int col;

		if (!(d->cmds & cmd))
			continue;
		col = fprintf(out, "  --%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
		opt_print_help(out, d->help, col);
	}
}

static void opt_defaults(enum opt_cmd cmd, struct cli_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mem = cmd == OPT_RUN ? OPT_DEFAULT_MEM : 0;
	o->sched = (struct snap_schedule){
		.keep = 2, .full_every = SNAP_DEFAULT_FULL_EVERY,
		.req = { .policy = SNAP_CCOW, .threshold = SNAP_DEFAULT_THRESHOLD,
			 .precopy = SNAP_DEFAULT_PRECOPY,
			 .pause_budget_ms = SNAP_DEFAULT_PAUSE_BUDGET_MS,
			 .codec = OPT_DEFAULT_CODEC, .compact = SNAP_COMPACT_IDLE } };
	o->ccow = (struct ccow_opts){ .held_compress = SNAP_DEFAULT_HELD_COMPRESS,
				      .region_size = 2ULL << 20,
				      .budget_pct = TRACKER_BUDGET_PCT_DEFAULT,
				      .stall_ms = TRACKER_STALL_MS_DEFAULT };
	o->root = "/";
	o->vcpus = cmd == OPT_RUN ? VM_DEFAULT_VCPUS : 0;
	o->max_procs = LX_MAX_PROCS;
	o->fastio = true;
	o->lazy = OPT_RESTORE_LAZY_DEFAULT;
}

/* getopt's table for @cmd: each option's value is OPT_VAL_BASE + its index. */
static void opt_getopt_table(enum opt_cmd cmd, struct option *lo)
{
	int n = 0;

	for (int i = 0; i < OPT_N; i++)
		if (opt_table[i].cmds & cmd)
			lo[n++] = (struct option){ .name = opt_table[i].name,
						   .has_arg = opt_table[i].arg ? required_argument :
										 no_argument,
						   .val = OPT_VAL_BASE + i };
	lo[n] = (struct option){ 0 };
}

static int opt_index(int ch)
{
	for (int i = 0; i < OPT_N; i++)
		if ((ch == 'v' && strcmp(opt_table[i].name, "verbose") == 0) ||
		    (ch == 'h' && strcmp(opt_table[i].name, "help") == 0))
			return i;
	return ch >= OPT_VAL_BASE && ch < OPT_VAL_BASE + OPT_N ? ch - OPT_VAL_BASE : -1;
}

int opt_parse(enum opt_cmd cmd, int argc, char **argv, struct cli_opts *o)
{
	struct option lo[OPT_N + 1];
	int ch;

	opt_defaults(cmd, o);
	opt_getopt_table(cmd, lo);
	optind = 0; /* 0, not 1: glibc then starts afresh, ordering mode included */
	/* run stops at the program's name (its own options follow); restore's FILE may
	 * stand anywhere. */
	while ((ch = getopt_long(argc, argv, cmd == OPT_RUN ? "+vh" : "vh", lo, NULL)) != -1) {
		int i = opt_index(ch);

		if (i < 0 || (opt_table[i].set ? opt_table[i].set(o, optarg) :
						  opt_snap(o, opt_table[i].name, optarg)))
			return -EINVAL;
		if (o->help)
			return 0;
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	return 0;
}

/* The tracker runs where coverage is wanted: dirty logging costs the guest a fault per
 * first write after each clear. */
static void opt_snapshot_defaults(struct cli_opts *o)
{
	if (o->sched.req.policy == SNAP_CCOW && !o->ccow.window_off)
		o->ccow.tracker = true;
}

/* Physical memory of the host, 0 if unknown. */
static uint64_t opt_host_ram(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

static int opt_check_run(struct cli_opts *o)
{
	uint64_t host = opt_host_ram();

	if (o->argc < 1) {
		log_err("run: no PROGRAM given");
		return -EINVAL;
	}
	if (o->sched.every_s > 0 && o->sched.gap_s > 0) {
		log_err("--snapshot-every and --snapshot-gap: one or the other (start to start, "
			"or end to start)");
		return -EINVAL;
	}
	if ((o->sched.every_s > 0 || o->sched.gap_s > 0) && !o->sched.dir) {
		log_err("--snapshot-%s needs --snapshot-dir DIR", o->sched.gap_s > 0 ? "gap" : "every");
		return -EINVAL;
	}
	if (o->sched.req.level && codec_level_check(o->sched.req.codec, o->sched.req.level)) {
		log_err("--snapshot-compress-level %d does not suit %s (" CODEC_LEVEL_RANGES ", "
			"none and auto take no level)", o->sched.req.level, codec_name(o->sched.req.codec));
		return -EINVAL;
	}
	if (o->full_every_given && !o->sched.incremental) {
		log_err("--snapshot-full-every needs --snapshot-incremental");
		return -EINVAL;
	}
	if (o->sched.incremental && o->sched.req.policy != SNAP_COW &&
	    o->sched.req.policy != SNAP_CCOW) {
		log_err("--snapshot-incremental needs --snapshot-policy cow or ccow (writes are "
			"tracked with userfaultfd write protection)");
		return -EINVAL;
	}
	if (o->sched.dir && access(o->sched.dir, W_OK) != 0) {
		log_err("--snapshot-dir %s: %s (it must be a writable directory)", o->sched.dir,
			strerror(errno));
		return -EINVAL;
	}
	if (o->mem < LAYOUT_MIN_RAM || o->mem > LAYOUT_MAX_RAM) {
		log_err("--mem %llu bytes: guest RAM must be between %llu MiB and %llu GiB",
			(unsigned long long)o->mem, (unsigned long long)(LAYOUT_MIN_RAM >> 20),
			(unsigned long long)(LAYOUT_MAX_RAM >> 30));
		return -EINVAL;
	}
	/* Guest RAM is reserved lazily, but a VM larger than the machine could only end in
	 * the OOM killer. */
	if (host && o->mem > host) {
		log_err("--mem %llu MiB: more than this host's memory (%llu MiB)",
			(unsigned long long)(o->mem >> 20), (unsigned long long)(host >> 20));
		return -EINVAL;
	}
	return 0;
}

/* The image directories: --image-dir's, or the current directory, and --snapshot-dir;
 * each must be a directory now. */
static int opt_image_dirs(struct cli_opts *o)
{
	struct stat st;

	if (o->n_image_dir == 0)
		o->image_dir[o->n_image_dir++] = ".";
	if (o->sched.dir)
		o->image_dir[o->n_image_dir++] = o->sched.dir;
	for (int i = 0; i < o->n_image_dir; i++) {
		if (stat(o->image_dir[i], &st) < 0) {
			log_err("--image-dir %s: %s", o->image_dir[i], strerror(errno));
			return -EINVAL;
		}
		if (!S_ISDIR(st.st_mode)) {
			log_err("--image-dir %s: not a directory", o->image_dir[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/* restore --incoming: a VM whoever connects may send, so nothing of this host is its by
 * default. Its RAM is bounded by --mem (a sender would choose it, up to the layout's
 * most), its writable directories named (the default "." is wherever the destination
 * was started, root's home in the audit's case), and tcp: is the network's: refused
 * without TLS (--tls-creds), unless --insecure asks for it on a loopback address. */
static int opt_check_incoming(const struct cli_opts *o)
{
	char err[256];

	if (!o->mem) {
		log_err("restore --incoming: give --mem SIZE, the most RAM the sender's VM may "
			"have");
		return -EINVAL;
	}
	if (!o->n_rw && !o->rw_none) {
		log_err("restore --incoming: give --rw DIR or --rw none, what the sender's VM may "
			"write here (there is no default for a VM from elsewhere)");
		return -EINVAL;
	}
	if (o->tls_authz && !o->tls_creds) {
		log_err("restore: --tls-authz goes with --tls-creds");
		return -EINVAL;
	}
	if (migrate_channel_check(o->incoming, o->insecure, o->tls_creds != NULL, err,
				  sizeof(err))) {
		log_err("restore --incoming %s", err);
		return -EINVAL;
	}
	return 0;
}

int opt_finish(enum opt_cmd cmd, struct cli_opts *o)
{
	if (cmd == OPT_RUN && opt_check_run(o))
		return -EINVAL;
	if (cmd == OPT_RESTORE && o->incoming && (o->argc || o->lazy)) {
		log_err(o->argc ? "restore: a FILE or --incoming, not both" :
				  "restore: --lazy is for images (a stream's memory comes whole)");
		return -EINVAL;
	}
	if (cmd == OPT_RESTORE && o->incoming && opt_check_incoming(o))
		return -EINVAL;
	if (cmd == OPT_RESTORE && !o->incoming && (o->insecure || o->tls_creds || o->tls_authz)) {
		log_err("restore: --%s goes with --incoming", o->insecure ? "insecure" :
			o->tls_creds ? "tls-creds" : "tls-authz");
		return -EINVAL;
	}
	if (o->rw_none && o->n_rw) {
		log_err("--rw none and --rw DIR: one or the other");
		return -EINVAL;
	}
	if (cmd == OPT_RESTORE && !o->incoming && o->peer_timeout_s) {
		log_err("restore: --peer-timeout goes with --incoming (an image has no peer)");
		return -EINVAL;
	}
	if (cmd == OPT_RESTORE && !o->incoming && o->argc != 1) {
		log_err(o->argc ? "restore: one FILE only" : "restore: no FILE given");
		return -EINVAL;
	}
	opt_snapshot_defaults(o);
	/* Whole 2 MiB pages: the guest page tables map RAM with them. */
	o->mem = (o->mem + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	o->mem_total = (o->mem_total + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	if (o->mem_total && o->mem && o->mem_total < o->mem) {
		log_err("--mem-total %llu MiB: less than --mem %llu MiB (the first process "
			"holds all of its RAM)", (unsigned long long)(o->mem_total >> 20),
			(unsigned long long)(o->mem >> 20));
		return -EINVAL;
	}
	if (o->n_rw == 0 && !o->rw_none)
		o->rw[o->n_rw++] = ".";
	if (o->user) { /* the name must exist now; the drop itself comes after setup */
		char err[CONFINE_ERR_LEN];
		struct confine_user u;

		if (confine_user_parse(o->user, &u, err)) {
			log_err("%s", err);
			return -EINVAL;
		}
	}
	return opt_image_dirs(o);
}

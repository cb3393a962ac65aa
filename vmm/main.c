/*
 * main.c - the ccvm command line: `run` and `ctl`.
 *
 * `ccvm run [OPTIONS] -- PROGRAM [ARGS...]` builds a VM, loads the program through the
 * Linux personality, and runs it; ccvm exits with the program's exit status (or
 * 128 + signal when it crashes). Exit statuses of ccvm itself follow the shell's
 * conventions: 127 when the program does not exist, 126 when it cannot be run, 2 for
 * a usage error, 1 when the VM cannot be built.
 */
#include "../oci/oci.h"
#include "cli.h"
#include "confine.h"
#include "control.h"
#include "../base/hostcpu.h"
#include "../base/log.h"
#include "sigfwd.h"
#include "options.h"
#include "version.h"
#include "vcpu.h"
#include "vcpu_loop.h"
#include "vm.h"
#include "../snapshot/merge.h"
#include "../snapshot/compact.h"
#include "../base/num.h"
#include "persist_capture.h"
#include "../snapshot/engine.h"
#include "../snapshot/image.h"
#include "persist_restore.h"
#include "persist_incoming.h"
#include "tls.h"
#include "migrate.h"
#include "linux/lx.h"
#include "linux/sysfilter.h"
#include "../mmu/layout.h"
#include "../mmu/uffd.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <time.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define EXIT_USAGE        2
#define EXIT_CANNOT_EXEC  126
#define EXIT_NOT_FOUND    127
#define MAIN_LOW_PORTS    1024 /* ports below it need CAP_NET_BIND_SERVICE to bind */
#define USAGE_WIDTH       88   /* help lines wrap before this column */
#define USAGE_INDENT      14   /* a wrapped command line goes on one column further */
#define USAGE_SNAPSHOT_COL 31  /* after "          snapshot FILE [--wait]" */

extern char **environ;

/* What ccvm's caller ignored, before ccvm ignores anything itself: the guest starts
 * with it, as a program exec'd by that caller would. */
static uint64_t main_ignored_signals;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ccvm run [OPTIONS] [--] PROGRAM [ARGS...]   run a program in a new VM\n"
		"       ccvm restore FILE [OPTIONS]                 run a VM from a snapshot image\n"
		"       ccvm restore --incoming WHERE [OPTIONS]     run a VM a live migration brings\n"
		"       ccvm inspect FILE                           check an image, show what it holds\n"
		"       ccvm merge CHILD OUT                        one full image from a chain\n"
		"       ccvm compact IMAGE [--level N]              rewrite an image smaller, in place\n"
		"       ccvm ctl PATH COMMAND [ARGS...]             talk to a VM's control socket\n"
		"       ccvm help [COMMAND]                         a command's options (or this)\n"
		"       ccvm --version\n"
		"\n"
		"'ccvm help run', 'ccvm run --help' and 'man ccvm' say more.\n");
}

/* ctl snapshot's options, from the request's one table (snapshot/request.c), wrapped. */
static void usage_snapshot_fields(FILE *out)
{
	const struct snap_field *f;
	int col = USAGE_SNAPSHOT_COL;

	for (int i = 0; (f = snap_field_at(i)); i++) {
		char item[96];
		int n = snap_field_usage(f, item, sizeof(item));

		if (col + n > USAGE_WIDTH) {
			fprintf(out, "\n%*s", USAGE_INDENT, "");
			col = USAGE_INDENT;
		}
		fputs(item, out);
		col += n;
	}
	fputc('\n', out);
}

static void usage_ctl(FILE *out)
{
	fprintf(out,
		"usage: ccvm ctl PATH COMMAND [ARGS...]\n"
		"commands: status, pause, resume, stats, stats regions, quit, events,\n"
		"          kill SIGNAL (TERM, SIGINT, RTMIN+1 or a number: for the guest)\n"
		"          exec [--cwd DIR] [--env NAME=VALUE]... [--] PROGRAM [ARG...]\n"
		"               (a new process in the VM with these stdin, stdout, stderr;\n"
		"               ctl exits with its status)\n"
		"          migrate unix:PATH|tcp:ADDR:PORT [--downtime-ms N] [--max-rounds N]\n"
		"               [--postcopy never|auto|now] [--compress auto|zstd|lz4|none]\n"
		"               [--bandwidth MB/s] [--order coverage|address]\n"
		"               [--peer-timeout SECONDS] [--wait]\n"
		"               [--tls-creds DIR [--tls-authz NAME[,NAME...]] | --insecure]\n"
		"          snapshot FILE [--wait]");
	usage_snapshot_fields(out);
}

/* `ccvm help [COMMAND]`: 0, or EXIT_USAGE for a command that does not exist. */
static int cmd_help(const char *cmd, FILE *out)
{
	if (!cmd)
		usage(out);
	else if (strcmp(cmd, "run") == 0)
		opt_usage(OPT_RUN, out);
	else if (strcmp(cmd, "restore") == 0)
		opt_usage(OPT_RESTORE, out);
	else if (strcmp(cmd, "inspect") == 0)
		fprintf(out, "usage: ccvm inspect FILE\n");
	else if (strcmp(cmd, "merge") == 0)
		fprintf(out, "usage: ccvm merge CHILD OUT\n"
			"Write OUT, a full image equal to the incremental image CHILD and its "
			"parents.\n");
	else if (strcmp(cmd, "compact") == 0)
		fprintf(out, "usage: ccvm compact IMAGE [--level N]\n"
			"Rewrite IMAGE in place: its raw and LZ4 chunks as zstd frames (level N, "
			"default %d;\nwith --level, its zstd frames too), its patch area folded in. "
			"The old image stands\nuntil the new one is whole.\n", COMPACT_LEVEL);
	else if (strcmp(cmd, "ctl") == 0)
		usage_ctl(out);
	else {
		log_err("help: no command '%s' (run, restore, inspect, merge, compact, ctl)", cmd);
		return EXIT_USAGE;
	}
	return 0;
}

static int cmd_version(void)
{
	printf("ccvm %s\nsnapshot image format: reads versions %u to %u, writes version %u\n",
	       CCVM_VERSION, IMG_VERSION_OLDEST, IMG_VERSION, IMG_VERSION);
	return 0;
}

/* Snapshot images are trusted as far as their checks go (an image is data), but a
 * guest that can write where they are kept can delete them or plant its own: say so
 * once when --snapshot-dir lies under an --rw directory. */
static void warn_snapshot_dir(const char *dir, const char *const *rw, int n_rw)
{
	char *real = dir ? realpath(dir, NULL) : NULL;

	for (int i = 0; real && i < n_rw; i++) {
		char *r = realpath(rw[i], NULL);
		size_t n = r ? strlen(r) : 0;
		bool under = r && strncmp(real, r, n) == 0 &&
			     (real[n] == '\0' || real[n] == '/' || strcmp(r, "/") == 0);

		free(r);
		if (under) {
			log_warn("--snapshot-dir %s lies under --rw %s: the guest can delete or "
				 "replace its snapshot images (give --snapshot-dir outside --rw)", dir,
				 rw[i]);
			break;
		}
	}
	free(real);
}

/* --seccomp-profile, read and checked with the options: for the VM's whole life. */
static struct lx_filter main_filter;
static bool main_filter_set;

static int load_filter(const char *path)
{
	char err[512];

	if (!path)
		return 0;
	if (lx_filter_load(path, &main_filter, err, sizeof(err))) {
		log_err("--seccomp-profile %s: %s", path, err);
		return -EINVAL;
	}
	main_filter_set = true;
	if (main_filter.n_unknown)
		log_debug("--seccomp-profile: %u call names x86-64 has not, skipped",
			  main_filter.n_unknown);
	return 0;
}

/* Options of @cmd; EXIT_USAGE, 0 to go on, or -1 after --help (exit 0). */
static int parse_cmd(enum opt_cmd cmd, int argc, char **argv, struct cli_opts *o)
{
	const char *hint = cmd == OPT_RUN ?
		"usage: ccvm run [OPTIONS] [--] PROGRAM [ARGS...] ('ccvm help run' lists them)" :
		"usage: ccvm restore FILE [OPTIONS] ('ccvm help restore' lists them)";

	if (opt_parse(cmd, argc, argv, o)) {
		fprintf(stderr, "%s\n", hint);
		return EXIT_USAGE;
	}
	if (o->help) {
		opt_usage(cmd, stdout);
		return -1;
	}
	log_set_level(o->verbose >= 2 ? LOG_DEBUG : o->verbose ? LOG_INFO : LOG_WARN);
	if (opt_finish(cmd, o) || load_filter(o->seccomp_profile)) {
		fprintf(stderr, "%s\n", hint);
		return EXIT_USAGE;
	}
	if (cmd == OPT_RUN)
		warn_snapshot_dir(o->sched.dir, o->rw, o->n_rw);
	return 0;
}

static struct snap_engine *hook_engine;

static void hook_before_discard(void *ctx, uint64_t gpa, uint64_t len)
{
	(void)ctx;
	if (hook_engine)
		snap_before_discard(hook_engine, gpa, len);
}

static struct lx_hooks run_hooks = {
	.wait_begin = (void (*)(void *))vcpu_wait_begin,
	.wait_end = (void (*)(void *))vcpu_wait_end,
	.thread_create = vm_thread_create,
	.process_create = vm_process_create,
	.process_space = vm_process_space,
	.process_fork = vm_process_fork,
	.process_reset = vm_process_reset,
	.before_discard = hook_before_discard,
	.fpu_save = vcpu_fpu_save,
	.fpu_load = vcpu_fpu_load,
	.signal_kick = vcpu_signal_kick,
};

static int exit_status_for(int rc)
{
	if (rc == -ENOENT)
		return EXIT_NOT_FOUND;
	if (rc == -ENOEXEC || rc == -EACCES || rc == -EISDIR)
		return EXIT_CANNOT_EXEC;
	return 1;
}

/* Start the guest clock: fresh (mono_ns 0 = now) or where a snapshot left it. */
static int start_clock(struct vm *vm, struct vcpu *vcpu, uint64_t mono_ns)
{
	int64_t offset;
	uint32_t khz;

	if (kvm_cpu_tsc(vcpu->cpu, &khz, &offset)) {
		log_err("cannot read the vCPU's TSC (its rate and MSR_IA32_TSC)");
		return -EIO;
	}
	vm->tsc_khz = khz;
	if (mono_ns) {
		lx_clock_resume(vm->proc, offset, khz, mono_ns);
		/* Timers the restore brought back count on this clock: they run from now. */
		lx_timer_start(vm->proc);
	} else {
		lx_clock_init(vm->proc, offset, khz);
	}
	return 0;
}

/* Copy-on-write copies: as much as guest RAM, 16 MiB .. 16 GiB. CCoW copies whole
 * regions: with half of RAM the pool ran dry on a guest rewriting 2/3 of its RAM and
 * hot regions fell back to a trap per page. Address space only: the engine faults in
 * what snapshots need (snapshot/cow.c). When it runs out the fault path saves pages
 * synchronously instead (slower, still exact). */
static size_t pool_bytes_for(uint64_t mem, uint64_t asked)
{
	uint64_t b = (uint64_t)((double)mem * SNAP_DEFAULT_POOL_SHARE);

	if (asked)
		return (size_t)asked;
	return (size_t)(b < SNAP_POOL_MIN ? SNAP_POOL_MIN : b > SNAP_POOL_MAX ? SNAP_POOL_MAX : b);
}

/* The coverage tracker's measure of the guest's work (mmu/tracker.c). */
static uint64_t guest_clock_reads(const void *proc)
{
	return lx_clock_reads(proc);
}

/* Run a VM that is fully built: monitor thread, snapshots if a control socket is
 * served, vCPUs; then tear down. Returns ccvm's exit status. */
/* The guest never reaches ccvm's own control socket, wherever it lies (the current
 * directory is the guest's by default): its identity is refused by the personality.
 * Set before the guest's first instruction. */
static void deny_control_socket(struct vm *vm, const char *control)
{
	struct stat st;

	if (!control || !vm->proc || stat(control, &st) < 0)
		return;
	pthread_mutex_lock(&vm->proc->lock);
	vm->proc->net.deny_dev = st.st_dev;
	vm->proc->net.deny_ino = st.st_ino;
	pthread_mutex_unlock(&vm->proc->lock);
}

/* The engine writes images beneath the image directories only (--image-dir): into
 * @dirs, how many. */
static int engine_image_dirs(const struct cli_opts *o, struct snap_image_dir *dirs)
{
	struct stat st;
	int n = 0;

	for (int i = 0; i < o->n_image_dir && n < SNAP_MAX_IMAGE_DIRS; i++)
		if (stat(o->image_dir[i], &st) == 0)
			dirs[n++] = (struct snap_image_dir){ .dev = st.st_dev, .ino = st.st_ino,
							     .name = o->image_dir[i] };
	return n;
}

/* The snapshot engine as the command line sets it up. */
static int engine_new(struct vm *vm, const struct cli_opts *o, const struct snap_schedule *sched,
		      struct tracker *tracker, struct snap_engine **out)
{
	const struct ccow_opts *ccow = &o->ccow;
	struct snap_image_dir dirs[SNAP_MAX_IMAGE_DIRS];
	struct snap_target target;
	struct snap_config cfg;

	capture_vm_target(vm, &target);
	snap_config_defaults(&cfg);
	cfg.pool_bytes = pool_bytes_for(vm->ram.size, ccow->pool_bytes);
	cfg.tracker = tracker;
	cfg.region_size = ccow->region_size;
	cfg.tune.held_compress = ccow->held_compress;
	cfg.dirs = dirs;
	cfg.n_dirs = engine_image_dirs(o, dirs);
	/* run's and restore's command lines alike: restore takes no snapshot option, so
	 * a restored VM snapshots with the defaults. */
	cfg.def = o->sched.req;
	cfg.def.track = sched && sched->incremental;
	return snap_engine_new(&target, &cfg, out);
}

/* What main_confine made before confinement for run_vm's control thread. */
static struct ctl_prep main_prep = CTL_PREP_NONE;

/* Whether a --publish rule binds a host port below 1024 (which needs a capability). */
static bool main_low_ports(const struct lx_net *net)
{
	for (int i = 0; i < net->n_rules; i++)
		if (lx_net_port((const struct sockaddr *)&net->rules[i].host_addr) < MAIN_LOW_PORTS)
			return true;
	return false;
}

/* Confine the monitor (vmm/confine.c) from the command line alone: the guest's root
 * read-only, --rw, the image directories; the control socket and the snapshot log
 * made first (ctl_prepare), so nothing is granted on their directories. Called once
 * the VM is built, before any other thread. */
static int main_confine(const struct cli_opts *o)
{
	char err[CONFINE_ERR_LEN] = "";
	const char *snap[OPT_MAX_IMAGE_DIRS];
	int n = 0, rc;

	for (int i = 0; i < o->n_image_dir; i++)
		snap[n++] = o->image_dir[i];
	struct confine_policy p = {
		.mode = o->confine, .user = o->user, .low_ports = main_low_ports(&o->net),
		.fs = { .root = o->root, .rw = o->rw, .n_rw = o->n_rw, .snap = snap, .n_snap = n },
	};
	/* The control socket bound and the snapshot log opened first, so that Landlock
	 * grants nothing on their directories. */
	rc = ctl_prepare(o->control, o->sched.log, &main_prep);
	if (rc)
		return rc;
	/* While still root: snapshots' userfaultfds then need no capability. Without the
	 * device (before Linux 6.1, or not root) the system call is used. */
	(void)uffd_dev_open();
	/* And /proc/stat, which Landlock would deny: `--compress auto` reads the host's
	 * idle CPU from it (codec_auto.c; without it auto weighs its threads alone). */
	if (hostcpu_open())
		log_debug("cannot open /proc/stat: --compress auto will not see the host's idle CPU");
	rc = confine_monitor(&p, err);
	if (rc) {
		log_err("%s", err);
		ctl_prep_release(&main_prep);
	}
	return rc;
}

static int restore_confine(void *ctx)
{
	return main_confine(ctx);
}

static int run_vm(struct vm *vm, const struct cli_opts *o, const struct snap_schedule *sched)
{
	const char *control = o->control;
	const struct ccow_opts *ccow = &o->ccow;
	struct ctl_server *ctl = NULL;
	struct sigfwd *fwd = NULL;
	struct snap_engine *engine = NULL;
	struct tracker tracker;
	bool snaps = control != NULL || snap_schedule_on(sched);
	bool track = snaps && ccow->tracker;
	int status = 1, rc;

	memset(&tracker, 0, sizeof(tracker)); /* tracker_fini is safe on it whatever fails */
	if (track) {
		struct tracker_log log;
		struct tracker_budget budget = { .pct = ccow->budget_pct,
						 .stall_ms = ccow->stall_ms,
						 .audit = ccow->audit,
						 .threshold = o->sched.req.threshold };

		rc = vm_dirty_log(vm, &log);
		if (!rc)
			rc = tracker_init(&tracker, &log, vm->ram.host, vm->ram.size,
					  ccow->region_size, ccow->window_ms,
					  (struct tracker_progress){ .read = guest_clock_reads,
								     .ctx = vm->proc },
					  &budget);
		if (rc) {
			log_err("cannot start the coverage tracker (KVM dirty logging): %s; "
				"--coverage-window off runs without it", strerror(-rc));
			goto out_tracker;
		}
	}
	if (snaps) {
		if (engine_new(vm, o, sched, track ? &tracker : NULL, &engine))
			goto out_engine;
		hook_engine = engine;
	}
	if (ctl_start(vm, control, engine, sched, &main_prep, &ctl))
		goto out_engine;
	deny_control_socket(vm, control);
	if (sigfwd_start(vm, &fwd))
		log_warn("signals sent to ccvm will not reach the guest (no thread for them)");
	status = vm_run(vm);
	sigfwd_stop(fwd);
out_engine:
	/* A snapshot still running is abandoned cleanly, and no engine thread calls the
	 * control thread back any more; the control thread may still read the engine and
	 * the tracker until it stops, so they are freed after it. */
	snap_engine_stop(engine);
	hook_engine = NULL;
	if (ctl)
		ctl_stop(ctl);
	snap_engine_free(engine);
out_tracker:
	if (track)
		tracker_fini(&tracker);
	if (ctl && !vm_all_done(vm)) {
		/* A vCPU is still inside a blocking host call for the guest (a read from
		 * a terminal, say). Nothing of the guest matters any more; tearing the VM
		 * down under that thread would not be safe, so leave it to exit(). */
		fflush(NULL);
		_exit(status);
	}
	return status;
}

static int cmd_run(int argc, char **argv)
{
	struct lx_entry entry;
	struct cli_opts o;
	struct vcpu *vcpu;
	struct vm vm;
	int rc, status = parse_cmd(OPT_RUN, argc, argv, &o);

	if (status)
		return status < 0 ? 0 : status;
	if (vm_create(&vm, o.mem, o.mem_total))
		return 1;
	if (main_confine(&o)) {
		status = 1;
		goto out_vm;
	}
	vm.max_vcpus = o.vcpus;
	vm.max_procs = o.max_procs;
	struct lx_config cfg = { .program = o.argv[0], .argc = o.argc, .argv = o.argv,
				 .envp = environ, .root = o.root, .rw = o.rw, .n_rw = o.n_rw,
				 .net = &o.net, .hooks = &run_hooks, .fastio = o.fastio,
				 .rlimits = &o.rlimits, .filter = main_filter_set ? &main_filter : NULL,
				 .ignored_signals = main_ignored_signals };
	rc = lx_proc_create(vm_first_view(&vm), &cfg, &vm.proc, &entry);
	if (rc) {
		status = exit_status_for(rc);
		goto out_vm;
	}
	if (vm_tree(&vm)) {
		status = 1;
		goto out_proc;
	}
	rc = vcpu_create(&vm, vm.kvm, 0, &(struct cpu_entry){ .rip = entry.rip, .rsp = entry.rsp },
			 &vcpu);
	if (rc) {
		status = 1;
		goto out_proc;
	}
	vm.vcpus[vm.n_vcpus++] = vcpu;
	lx_thread_init(vm.proc, vcpu->lx, vcpu);
	status = start_clock(&vm, vcpu, 0) ? 1 : run_vm(&vm, &o, &o.sched);
out_proc:
	lx_proc_destroy(vm.proc);
	vm.proc = NULL;
out_vm:
	vm_destroy(&vm);
	return status;
}

/* Tear down a VM that restore_vm may have built only in part. */
static void restore_abandon(struct vm *vm)
{
	if (!vm->kvm)
		return;
	lx_proc_destroy(vm->proc);
	vm->proc = NULL;
	vm_destroy(vm);
}

/* --tls-creds DIR read (before anything is confined) and checked: 0, or -errno said. */
static int restore_tls_creds(const char *dir, struct tls_creds *c)
{
	char err[MIG_ERR_LEN];
	int rc = tls_creds_read(dir, TLS_SERVER, c, err, sizeof(err));

	if (!rc && (rc = tls_creds_check(c, TLS_SERVER, err, sizeof(err))))
		tls_creds_free(c);
	if (rc)
		log_err("restore: %s", err);
	return rc;
}

static int cmd_restore(int argc, char **argv)
{
	struct cli_opts o;
	/* Confinement and network rules as for run, with run's defaults: the image's own
	 * are not policy. */
	struct restore_opts ro;
	uint64_t mono_ns = 0;
	struct vm vm = { .kvm = NULL };
	struct tls_creds tls = { .psk = NULL };
	int status = parse_cmd(OPT_RESTORE, argc, argv, &o), conn = -1;

	if (status)
		return status < 0 ? 0 : status;
	if (o.tls_creds && restore_tls_creds(o.tls_creds, &tls))
		return EXIT_USAGE;
	ro = (struct restore_opts){ .mem = o.mem, .mem_total = o.mem_total, .lazy = o.lazy,
				    .vcpus = o.vcpus,
				    .max_procs = o.max_procs, .root = o.root,
				    .peer_timeout_s = o.peer_timeout_s ?
							      o.peer_timeout_s :
							      MIGRATE_PEER_TIMEOUT_S_DEFAULT,
				    .rw = o.rw, .n_rw = o.n_rw, .net = &o.net,
				    /* A stream's saved rules are its sender's word: an
				     * incoming VM publishes what this command line says. */
				    .publish_given = o.publish_given || o.incoming,
				    .tls = o.tls_creds ? &tls : NULL, .tls_authz = o.tls_authz,
				    .hooks = &run_hooks,
				    .filter = main_filter_set ? &main_filter : NULL,
				    .confine = restore_confine, .confine_ctx = &o };
	if ((o.incoming ? restore_vm_incoming(o.incoming, &ro, &vm, &mono_ns, &conn) :
			  restore_vm(o.argv[0], &ro, &vm, &mono_ns)) ||
	    restore_lazy_begin(&vm)) {
		restore_abandon(&vm);
		tls_creds_free(&tls);
		return 1;
	}
	/* A restored VM snapshots like a new one: ccow, its coverage measured afresh. */
	status = start_clock(&vm, vm.vcpus[0], mono_ns ? mono_ns : 1) ? 1 : 0;
	incoming_running(conn, !status);
	if (!status)
		status = run_vm(&vm, &o, NULL);
	incoming_end();
	tls_creds_free(&tls);
	restore_lazy_end(&vm);
	lx_proc_destroy(vm.proc);
	vm.proc = NULL;
	vm_destroy(&vm);
	return status;
}

/* Confine `ccvm inspect` and `ccvm merge` (confine_tool) to reading the directory of
 * @image and writing in that of @out (NULL: none), before any image is parsed. */
static int main_confine_tool(const char *image, const char *out)
{
	char err[CONFINE_ERR_LEN] = "", rd[PATH_MAX], wd[PATH_MAX];
	int rc;

	snprintf(rd, sizeof(rd), "%s", image);
	if (out)
		snprintf(wd, sizeof(wd), "%s", out);
	tzset(); /* the time zone read now: /etc is not readable after */
	rc = confine_tool(dirname(rd), out ? dirname(wd) : NULL, err);
	if (rc)
		log_err("%s", err);
	return rc;
}

static int cmd_inspect(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return cmd_help("inspect", stdout);
	if (argc != 2) {
		log_err("usage: ccvm inspect FILE");
		return EXIT_USAGE;
	}
	if (main_confine_tool(argv[1], NULL))
		return 1;
	return inspect_image(argv[1], stdout);
}

static int cmd_merge(int argc, char **argv)
{
	char err[IMG_ERR_LEN];

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return cmd_help("merge", stdout);
	if (argc != 3) {
		log_err("usage: ccvm merge CHILD OUT");
		return EXIT_USAGE;
	}
	if (main_confine_tool(argv[1], argv[2]))
		return 1;
	if (img_merge(argv[1], argv[2], err)) {
		log_err("cannot merge %s: %s", argv[1], err);
		return 1;
	}
	printf("merged %s and its parents into %s\n", argv[1], argv[2]);
	return 0;
}

/* `ccvm compact IMAGE [--level N]`, its arguments into @job: 0, or EXIT_USAGE. */
static int compact_args(int argc, char **argv, const char **image, struct compact_job *job)
{
	long level;

	*job = (struct compact_job){ .level = COMPACT_LEVEL };
	*image = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--level") == 0 && i + 1 < argc) {
			if (num_parse_long(argv[++i], INT_MIN, INT_MAX, &level) ||
			    codec_level_check(IMG_CODEC_ZSTD, (int)level)) {
				log_err("compact: --level takes a zstd level (%s; not 0), not '%s'",
					CODEC_LEVEL_RANGES, argv[i]);
				return EXIT_USAGE;
			}
			job->level = (int)level;
			job->relevel = true;
		} else if (argv[i][0] == '-' || *image) {
			log_err("usage: ccvm compact IMAGE [--level N]");
			return EXIT_USAGE;
		} else {
			*image = argv[i];
		}
	}
	if (!*image) {
		log_err("usage: ccvm compact IMAGE [--level N]");
		return EXIT_USAGE;
	}
	return 0;
}

static int cmd_compact(int argc, char **argv)
{
	struct compact_job job;
	char err[IMG_ERR_LEN] = "";
	const char *image;
	int rc;

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return cmd_help("compact", stdout);
	rc = compact_args(argc, argv, &image, &job);
	if (rc)
		return rc;
	if (main_confine_tool(image, image))
		return 1;
	if (img_compact(image, &job, err)) {
		log_err("cannot compact %s: %s", image, err);
		return 1;
	}
	printf("compacted %s: %llu bytes on disk, %llu before (%.2fx)\n", image,
	       (unsigned long long)job.bytes_out, (unsigned long long)job.bytes_in,
	       job.bytes_in ? (double)job.bytes_out / (double)job.bytes_in : 1.0);
	return 0;
}

int main(int argc, char **argv)
{
	/* The same binary is the OCI runtime under that name (make install's link). */
	if (argc > 0 && oci_invoked(argv[0]))
		return oci_main(argc, argv);
	main_ignored_signals = lx_sig_inherited();
	/* A control client that went away must not kill the monitor with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* The signals a VM's guest gets from ccvm's are blocked before any thread
	 * exists, so that every thread inherits it and only sigfwd.c takes them. */
	if ((strcmp(argv[1], "run") == 0 || strcmp(argv[1], "restore") == 0) && sigfwd_block())
		log_warn("cannot block the signals for the guest: they will end ccvm");
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "restore") == 0)
		return cmd_restore(argc - 1, argv + 1);
	if (strcmp(argv[1], "inspect") == 0)
		return cmd_inspect(argc - 1, argv + 1);
	if (strcmp(argv[1], "merge") == 0)
		return cmd_merge(argc - 1, argv + 1);
	if (strcmp(argv[1], "compact") == 0)
		return cmd_compact(argc - 1, argv + 1);
	if (strcmp(argv[1], "ctl") == 0) {
		if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))
			return cmd_help("ctl", stdout);
		if (argc < 4) {
			log_err("usage: ccvm ctl PATH COMMAND [ARGS...]");
			return EXIT_USAGE;
		}
		return ctl_client(argv[2], argv[3], argc - 4, argv + 4);
	}
	if (strcmp(argv[1], "help") == 0)
		return cmd_help(argc > 2 ? argv[2] : NULL, stdout);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
		return cmd_version();
	log_err("unknown command '%s'", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}

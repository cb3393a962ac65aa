/*
 * main.c - the ccvm command line: `run` and `ctl`.
 *
 * `ccvm run [OPTIONS] -- PROGRAM [ARGS...]` builds a VM, loads the program through the
 * Linux personality, and runs it; ccvm exits with the program's exit status (or
 * 128 + signal when it crashes). Exit statuses of ccvm itself follow the shell's
 * conventions: 127 when the program does not exist, 126 when it cannot be run, 2 for
 * a usage error, 1 when the VM cannot be built.
 */
#include "cli.h"
#include "control.h"
#include "log.h"
#include "vcpu.h"
#include "vm.h"
#include "../snapshot/capture.h"
#include "../snapshot/engine.h"
#include "../snapshot/restore.h"
#include "linux/lx.h"
#include "../mmu/layout.h"

#include <errno.h>
#include <getopt.h>
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
#define DEFAULT_MEM       (1ULL << 30)
#define MAX_RW_DIRS       64
/* Measured (bench/restore-modes.sh): see README. */
#define RESTORE_LAZY_DEFAULT false

extern char **environ;

/* How snapshots are taken: CCoW's knobs. */
struct ccow_opts {
	uint64_t region_size;
	double threshold;
	enum snap_order order;
	enum snap_precopy precopy;
	double pause_budget_ms;
	unsigned window_ms;  /* 0: adaptive */
	bool tracker;        /* coverage tracking asked for (--coverage-window or ccow) */
	uint64_t pool_bytes; /* 0: default */
};

static const struct ccow_opts ccow_defaults = {
	.region_size = 2ULL << 20, .threshold = SNAP_DEFAULT_THRESHOLD,
	.precopy = SNAP_DEFAULT_PRECOPY, .pause_budget_ms = SNAP_DEFAULT_PAUSE_BUDGET_MS,
};

struct run_opts {
	uint64_t mem;
	const char *control;
	struct snap_schedule sched;
	struct ccow_opts ccow;
	const char *root;
	const char *rw[MAX_RW_DIRS];
	int n_rw;
	struct lx_net net;
	int vcpus;
	bool fastio;
	int argc;
	char **argv;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ccvm run [OPTIONS] [--] PROGRAM [ARGS...]\n"
		"       ccvm restore FILE [--control PATH] [--mem SIZE] [--lazy|--eager]\n"
		"                    [--root DIR] [--rw DIR]... [--publish SPEC]... [--net host]\n"
		"                    [--allow-port PORT]... [--allow-unix PATH]... [--vcpus N]\n"
		"       ccvm inspect FILE\n"
		"       ccvm ctl PATH COMMAND [ARGS...]\n"
		"\n"
		"run options:\n"
		"  --mem SIZE        guest RAM (default 1G; suffixes K, M, G; %llu MiB .. %llu GiB)\n"
		"  --control PATH    serve the control socket at PATH\n"
		"  --root DIR        the guest's / (default /)\n"
		"  --rw DIR          a directory the guest may write under (repeatable;\n"
		"                    default: the current directory)\n"
		"  --publish [HOSTIP:]HOSTPORT:GUESTPORT   a guest bind to GUESTPORT binds\n"
		"                    HOSTIP:HOSTPORT (default HOSTIP 127.0.0.1; repeatable); binds\n"
		"                    to other ports are refused\n"
		"  --net host        guest connections may go beyond loopback, to any port\n"
		"  --allow-port PORT  a host loopback port the guest may connect or send to\n"
		"                    (TCP and UDP; repeatable; its own ports are always allowed)\n"
		"  --allow-unix PATH  a host Unix socket the guest may connect to outside --rw\n"
		"                    (repeatable; ccvm's own control socket never)\n"
		"  --vcpus N         most guest threads at once, each a vCPU (default %d, 1..%d)\n"
		"  --fastio on|off   exitless socket reads and writes for dynamic glibc programs\n"
		"                    (default on; off: every system call exits to the monitor)\n"
		"  --snapshot-every SECONDS --snapshot-dir DIR [--snapshot-keep N]\n"
		"  [--snapshot-policy ccow|cow|stop] [--snapshot-rate MB/s]\n"
		"                    periodic live snapshots, keeping the newest N (default 2);\n"
		"                    the policy (default ccow) is also ctl snapshot's default\n"
		"  --region-size SIZE  CCoW region (power of two >= 32K, default 2M)\n"
		"  --threshold T     coverage at which a region is hot (default 0.80; 0 = CCoW-All)\n"
		"  --save-order hot-first|linear   writer order under ccow (default hot-first)\n"
		"  --precopy lazy|eager   ccow: copy hot regions on their first fault (lazy, the\n"
		"                    default) or during the pause, never protecting them (eager)\n"
		"  --pause-budget-ms MS   eager: how long the pause may grow to copy (default 10)\n"
		"  --coverage-window MS|off   track coverage with the KVM dirty log in windows of MS\n"
		"                    of guest run time (default: the last snapshot's duration);\n"
		"                    on under ccow when snapshots are possible, off otherwise\n"
		"  --snapshot-pool SIZE   copy buffers (default: RAM, 16M..16G)\n"
		"  --snapshot-log FILE    append each finished snapshot's figures (JSON lines)\n"
		"  -v, --verbose     more messages (twice: trace every system call)\n"
		"\n"
		"ctl commands: status, pause, resume, stats, quit, events,\n"
		"              snapshot FILE [--policy ccow|cow|stop] [--threshold T]\n"
		"                   [--save-order hot-first|linear] [--precopy lazy|eager]\n"
		"                   [--pause-budget-ms MS] [--wait] [--rate MB/s]\n"
		"              stats regions\n",
		(unsigned long long)(LAYOUT_MIN_RAM >> 20), (unsigned long long)(LAYOUT_MAX_RAM >> 30),
		VM_DEFAULT_VCPUS, VM_MAX_VCPUS);
}

/* Physical memory of the host: guest RAM is reserved lazily, but a VM larger than
 * the machine could only end in the OOM killer. */
static uint64_t host_ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : LAYOUT_MAX_RAM;
}

/* One --publish rule into @net, with a message for the user when it cannot be. */
static int parse_publish(const char *spec, struct lx_net *net)
{
	struct lx_publish rule;
	char err[LX_NET_ERR_LEN];
	int rc = lx_net_parse_publish(spec, &rule, err, sizeof(err));

	if (rc) {
		log_err("%s", err);
		return rc;
	}
	rc = lx_net_add(net, &rule);
	if (rc == -EEXIST)
		log_err("--publish %s: that guest port or host address is already published", spec);
	else if (rc)
		log_err("--publish %s: at most %d ports can be published", spec, LX_MAX_PUBLISH);
	return rc;
}

static int parse_net(const char *mode, struct lx_net *net)
{
	if (strcmp(mode, "host") != 0) {
		log_err("--net %s: the only network mode is 'host' (connections beyond loopback)",
			mode);
		return -EINVAL;
	}
	net->host = true;
	return 0;
}

static int parse_allow_port(const char *arg, struct lx_net *net)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || end == arg || v < 1 || v > 65535) {
		log_err("--allow-port %s: a port number, 1 to 65535", arg);
		return -EINVAL;
	}
	if (lx_net_allow_port(net, (uint16_t)v)) {
		log_err("--allow-port %s: at most %d ports", arg, LX_MAX_ALLOW);
		return -E2BIG;
	}
	return 0;
}

/* A socket file the guest may reach, resolved like --rw (it must exist); kept for the
 * life of the process. */
static int parse_allow_unix(const char *arg, struct lx_net *net)
{
	char *real;

	if (net->n_allow_unix == LX_MAX_ALLOW) {
		log_err("--allow-unix %s: at most %d sockets", arg, LX_MAX_ALLOW);
		return -E2BIG;
	}
	real = realpath(arg, NULL);
	if (!real) {
		log_err("--allow-unix %s: %s", arg, strerror(errno));
		return -errno;
	}
	net->allow_unix[net->n_allow_unix++] = real;
	return 0;
}

static int parse_vcpus(const char *arg, int *n)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || end == arg || v < 1 || v > VM_MAX_VCPUS) {
		log_err("--vcpus %s: the most guest threads at once, 1 to %d", arg, VM_MAX_VCPUS);
		return -EINVAL;
	}
	*n = (int)v;
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

static int parse_run(int argc, char **argv, struct run_opts *o)
{
	static const struct option longopts[] = {
		{ "mem", required_argument, NULL, 'm' },  { "control", required_argument, NULL, 'c' },
		{ "root", required_argument, NULL, 'r' }, { "rw", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },    { "help", no_argument, NULL, 'h' },
		{ "snapshot-every", required_argument, NULL, 'E' },
		{ "snapshot-dir", required_argument, NULL, 'D' },
		{ "snapshot-keep", required_argument, NULL, 'K' },
		{ "snapshot-policy", required_argument, NULL, 'P' },
		{ "snapshot-rate", required_argument, NULL, 'R' },
		{ "region-size", required_argument, NULL, 'G' },
		{ "threshold", required_argument, NULL, 'T' },
		{ "save-order", required_argument, NULL, 'O' },
		{ "precopy", required_argument, NULL, 'C' },
		{ "pause-budget-ms", required_argument, NULL, 'B' },
		{ "coverage-window", required_argument, NULL, 'W' },
		{ "snapshot-pool", required_argument, NULL, 'L' },
		{ "snapshot-log", required_argument, NULL, 'J' },
		{ "publish", required_argument, NULL, 'p' },
		{ "net", required_argument, NULL, 'N' },
		{ "allow-port", required_argument, NULL, 'A' },
		{ "allow-unix", required_argument, NULL, 'X' },
		{ "vcpus", required_argument, NULL, 'U' },
		{ "fastio", required_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, verbose = 0;
	char *end;

	memset(o, 0, sizeof(*o));
	o->mem = DEFAULT_MEM;
	o->sched = (struct snap_schedule){ .keep = 2, .policy = SNAP_CCOW,
					   .threshold = SNAP_DEFAULT_THRESHOLD };
	o->ccow = ccow_defaults;
	o->root = "/";
	o->vcpus = VM_DEFAULT_VCPUS;
	o->fastio = true;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "+vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'm':
			if (cli_parse_size(optarg, &o->mem)) {
				log_err("--mem %s: not a size (examples: 512M, 2G)", optarg);
				return -EINVAL;
			}
			break;
		case 'c':
			o->control = optarg;
			break;
		case 'r':
			o->root = optarg;
			break;
		case 'w':
			if (o->n_rw == MAX_RW_DIRS) {
				log_err("too many --rw directories (at most %d)", MAX_RW_DIRS);
				return -EINVAL;
			}
			o->rw[o->n_rw++] = optarg;
			break;
		case 'p':
			if (parse_publish(optarg, &o->net))
				return -EINVAL;
			break;
		case 'N':
			if (parse_net(optarg, &o->net))
				return -EINVAL;
			break;
		case 'A':
			if (parse_allow_port(optarg, &o->net))
				return -EINVAL;
			break;
		case 'X':
			if (parse_allow_unix(optarg, &o->net))
				return -EINVAL;
			break;
		case 'U':
			if (parse_vcpus(optarg, &o->vcpus))
				return -EINVAL;
			break;
		case 'F':
			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
				log_err("--fastio %s: on or off", optarg);
				return -EINVAL;
			}
			o->fastio = strcmp(optarg, "on") == 0;
			break;
		case 'v':
			verbose++;
			break;
		case 'E':
			if (cli_parse_real(optarg, 0, CLI_MAX_EVERY_S, &o->sched.every_s) ||
			    !(o->sched.every_s > 0)) {
				log_err("--snapshot-every %s: a positive number of seconds, at most %.0f",
					optarg, CLI_MAX_EVERY_S);
				return -EINVAL;
			}
			break;
		case 'D':
			o->sched.dir = optarg;
			break;
		case 'K':
			o->sched.keep = (int)strtol(optarg, &end, 10);
			if (*end || o->sched.keep < 1) {
				log_err("--snapshot-keep %s: a count of at least 1", optarg);
				return -EINVAL;
			}
			break;
		case 'P':
			if (snap_policy_parse(optarg, &o->sched.policy)) {
				log_err("--snapshot-policy %s: known policies are ccow, cow and stop", optarg);
				return -EINVAL;
			}
			break;
		case 'R': {
			double mbs;

			if (cli_parse_real(optarg, 0, CLI_MAX_RATE_MBS, &mbs)) {
				log_err("--snapshot-rate %s: MB/s, a number from 0 (unlimited) to %.0f",
					optarg, CLI_MAX_RATE_MBS);
				return -EINVAL;
			}
			o->sched.rate = (uint64_t)(mbs * 1e6);
			break;
		}
		case 'G':
			if (cli_parse_size(optarg, &o->ccow.region_size) || o->ccow.region_size < (32 << 10) ||
			    (o->ccow.region_size & (o->ccow.region_size - 1))) {
				log_err("--region-size %s: a power of two, at least 32K (e.g. 2M)", optarg);
				return -EINVAL;
			}
			break;
		case 'T':
			if (cli_parse_real(optarg, 0, 1, &o->ccow.threshold)) {
				log_err("--threshold %s: a coverage from 0 (CCoW-All) to 1", optarg);
				return -EINVAL;
			}
			break;
		case 'O':
			if (snap_order_parse(optarg, &o->ccow.order)) {
				log_err("--save-order %s: hot-first or linear", optarg);
				return -EINVAL;
			}
			break;
		case 'C':
			if (snap_precopy_parse(optarg, &o->ccow.precopy)) {
				log_err("--precopy %s: lazy or eager", optarg);
				return -EINVAL;
			}
			break;
		case 'B':
			if (cli_parse_real(optarg, 0, 10000, &o->ccow.pause_budget_ms)) {
				log_err("--pause-budget-ms %s: milliseconds, 0 to 10000", optarg);
				return -EINVAL;
			}
			break;
		case 'J':
			o->sched.log = optarg;
			break;
		case 'L':
			if (cli_parse_size(optarg, &o->ccow.pool_bytes) || o->ccow.pool_bytes < (1 << 20)) {
				log_err("--snapshot-pool %s: a size of at least 1M", optarg);
				return -EINVAL;
			}
			break;
		case 'W':
			if (strcmp(optarg, "off") == 0) {
				o->ccow.tracker = false;
				o->ccow.window_ms = UINT32_MAX;
			} else {
				long ms = strtol(optarg, &end, 10);

				if (*end || ms < 0 || ms > 600000) {
					log_err("--coverage-window %s: milliseconds (0 = adapt to the last "
						"snapshot), or off", optarg);
					return -EINVAL;
				}
				o->ccow.window_ms = (unsigned)ms;
				o->ccow.tracker = true;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	log_set_level(verbose >= 2 ? LOG_DEBUG : verbose ? LOG_INFO : LOG_WARN);
	if (optind >= argc) {
		log_err("run: no PROGRAM given");
		usage(stderr);
		return -EINVAL;
	}
	if (o->sched.every_s > 0 && !o->sched.dir) {
		log_err("--snapshot-every needs --snapshot-dir DIR");
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
	if (o->mem > host_ram_bytes()) {
		log_err("--mem %llu MiB: more than this host's memory (%llu MiB)",
			(unsigned long long)(o->mem >> 20), (unsigned long long)(host_ram_bytes() >> 20));
		return -EINVAL;
	}
	o->sched.threshold = o->ccow.threshold;
	o->sched.order = o->ccow.order;
	o->sched.precopy = o->ccow.precopy;
	o->sched.pause_budget_ms = o->ccow.pause_budget_ms;
	/* Dirty logging costs the guest a fault per first write after each clear; it
	 * runs only where coverage is wanted. */
	if (o->sched.policy == SNAP_CCOW && o->ccow.window_ms != UINT32_MAX)
		o->ccow.tracker = true;
	if (o->ccow.window_ms == UINT32_MAX)
		o->ccow.window_ms = 0;
	/* Whole 2 MiB pages: the guest page tables map RAM with them. */
	o->mem = (o->mem + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	if (o->n_rw == 0)
		o->rw[o->n_rw++] = ".";
	warn_snapshot_dir(o->sched.dir, o->rw, o->n_rw);
	o->argc = argc - optind;
	o->argv = argv + optind;
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
	.block_begin = (void (*)(void *))vcpu_block_begin,
	.block_end = (void (*)(void *))vcpu_block_end,
	.thread_create = vm_thread_create,
	.before_discard = hook_before_discard,
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
	int khz = ioctl(vcpu->fd, KVM_GET_TSC_KHZ, 0);

	if (khz <= 0 || vcpu_tsc_offset(vcpu, &offset)) {
		log_err("cannot read the vCPU's TSC (KVM_GET_TSC_KHZ / MSR_IA32_TSC)");
		return -EIO;
	}
	vm->tsc_khz = (uint32_t)khz;
	if (mono_ns)
		lx_clock_resume(vm->proc, offset, (uint32_t)khz, mono_ns);
	else
		lx_clock_init(vm->proc, offset, (uint32_t)khz);
	return 0;
}

/* Copy-on-write copies: as much as guest RAM, 16 MiB .. 16 GiB. CCoW copies whole
 * regions: with half of RAM the pool ran dry on a guest rewriting 2/3 of its RAM and
 * hot regions fell back to a trap per page. Address space only until copies need it
 * (the host RSS shows what they took). When it runs out the fault path saves pages
 * synchronously instead (slower, still exact). */
static size_t pool_bytes_for(uint64_t mem, uint64_t asked)
{
	uint64_t b = mem;

	if (asked)
		return (size_t)asked;
	return (size_t)(b < (16ULL << 20) ? (16ULL << 20) : b > (16ULL << 30) ? (16ULL << 30) : b);
}

/* The coverage tracker's measure of the guest's work (mmu/dirty.c). */
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

static int run_vm(struct vm *vm, const char *control, const struct snap_schedule *sched,
		  const struct ccow_opts *ccow)
{
	struct ctl_server *ctl = NULL;
	struct snap_engine engine;
	struct dirty_tracker tracker;
	bool snaps = control != NULL || (sched && sched->every_s > 0);
	bool track = snaps && ccow->tracker;
	int status = 1, rc;

	if (track) {
		rc = dirty_init(&tracker, vm->fd, vm->mem.host, vm->mem.size, ccow->region_size,
				ccow->window_ms,
				(struct dirty_progress){ .read = guest_clock_reads, .ctx = vm->proc });
		if (rc) {
			log_err("cannot start the coverage tracker (KVM dirty logging): %s; "
				"--coverage-window off runs without it", strerror(-rc));
			goto out_tracker;
		}
	}
	if (snaps) {
		struct snap_target target;

		capture_vm_target(vm, &target);
		if (snap_engine_init(&engine, &target, pool_bytes_for(vm->mem.size, ccow->pool_bytes),
				     track ? &tracker : NULL, ccow->region_size))
			goto out_engine;
		engine.def = (struct snap_request){ .policy = sched ? sched->policy : SNAP_CCOW,
						    .threshold = ccow->threshold, .order = ccow->order,
						    .precopy = ccow->precopy,
						    .pause_budget_ms = ccow->pause_budget_ms };
		hook_engine = &engine;
	}
	if (ctl_start(vm, control, snaps ? &engine : NULL, sched, &ctl))
		goto out_engine;
	deny_control_socket(vm, control);
	status = vm_run(vm);
out_engine:
	if (snaps)
		snap_engine_fini(&engine); /* a snapshot still running is abandoned cleanly */
	hook_engine = NULL;
out_tracker:
	if (track)
		dirty_fini(&tracker);
	if (!ctl)
		return status;
	ctl_stop(ctl);
	if (!vm_all_done(vm)) {
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
	struct run_opts o;
	struct vcpu *vcpu;
	struct vm vm;
	int rc, status;

	if (parse_run(argc, argv, &o))
		return EXIT_USAGE;
	if (vm_create(&vm, o.mem))
		return 1;
	vm.max_vcpus = o.vcpus;
	struct lx_config cfg = { .program = o.argv[0], .argc = o.argc, .argv = o.argv,
				 .envp = environ, .root = o.root, .rw = o.rw, .n_rw = o.n_rw,
				 .net = &o.net, .hooks = &run_hooks, .fastio = o.fastio };
	rc = lx_proc_create(&vm.mem, &cfg, &vm.proc, &entry);
	if (rc) {
		status = exit_status_for(rc);
		goto out_vm;
	}
	rc = vcpu_create(&vm, 0, &(struct vcpu_entry){ .rip = entry.rip, .rsp = entry.rsp }, &vcpu);
	if (rc) {
		status = 1;
		goto out_proc;
	}
	vm.vcpus[vm.n_vcpus++] = vcpu;
	lx_thread_init(vm.proc, vcpu->lx, vcpu);
	status = start_clock(&vm, vcpu, 0) ? 1 : run_vm(&vm, o.control, &o.sched, &o.ccow);
out_proc:
	lx_proc_destroy(vm.proc);
	vm.proc = NULL;
out_vm:
	vm_destroy(&vm);
	return status;
}

static int cmd_restore(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mem", required_argument, NULL, 'm' }, { "control", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },   { "lazy", no_argument, NULL, 'l' },
		{ "eager", no_argument, NULL, 'e' },     { "publish", required_argument, NULL, 'p' },
		{ "net", required_argument, NULL, 'N' }, { "vcpus", required_argument, NULL, 'U' },
		{ "root", required_argument, NULL, 'r' }, { "rw", required_argument, NULL, 'w' },
		{ "allow-port", required_argument, NULL, 'A' },
		{ "allow-unix", required_argument, NULL, 'X' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const use =
		"usage: ccvm restore FILE [--control PATH] [--mem SIZE] [--lazy|--eager] "
		"[--root DIR] [--rw DIR]... [--publish [HOSTIP:]HOSTPORT:GUESTPORT]... "
		"[--net host] [--allow-port PORT]... [--allow-unix PATH]... [--vcpus N]";
	/* Confinement and network rules as for run, with run's defaults: the image's own
	 * are not policy. */
	struct restore_opts ro = { .lazy = RESTORE_LAZY_DEFAULT, .hooks = &run_hooks, .root = "/" };
	const char *control = NULL, *rw[MAX_RW_DIRS];
	struct lx_net net = { 0 };
	uint64_t mono_ns = 0;
	int ch, verbose = 0, status;
	struct vm vm = { .fd = -1, .kvm_fd = -1 };

	optind = 1;
	while ((ch = getopt_long(argc, argv, "v", longopts, NULL)) != -1) {
		switch (ch) {
		case 'm':
			if (cli_parse_size(optarg, &ro.mem)) {
				log_err("--mem %s: not a size (examples: 512M, 2G)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'c':
			control = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 'l':
		case 'e':
			ro.lazy = ch == 'l';
			break;
		case 'p':
			if (parse_publish(optarg, &net))
				return EXIT_USAGE;
			ro.publish_given = true;
			break;
		case 'N':
			if (parse_net(optarg, &net))
				return EXIT_USAGE;
			break;
		case 'A':
			if (parse_allow_port(optarg, &net))
				return EXIT_USAGE;
			break;
		case 'X':
			if (parse_allow_unix(optarg, &net))
				return EXIT_USAGE;
			break;
		case 'r':
			ro.root = optarg;
			break;
		case 'w':
			if (ro.n_rw == MAX_RW_DIRS) {
				log_err("too many --rw directories (at most %d)", MAX_RW_DIRS);
				return EXIT_USAGE;
			}
			rw[ro.n_rw++] = optarg;
			break;
		case 'U':
			if (parse_vcpus(optarg, &ro.vcpus))
				return EXIT_USAGE;
			break;
		default:
			log_err("%s", use);
			return EXIT_USAGE;
		}
	}
	log_set_level(verbose >= 2 ? LOG_DEBUG : verbose ? LOG_INFO : LOG_WARN);
	if (optind != argc - 1) {
		log_err("%s", use);
		return EXIT_USAGE;
	}
	ro.mem = (ro.mem + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	if (ro.n_rw == 0)
		rw[ro.n_rw++] = ".";
	ro.rw = rw;
	ro.net = &net;
	if (restore_vm(argv[optind], &ro, &vm, &mono_ns) || restore_lazy_begin(&vm)) {
		if (vm.fd >= 0 || vm.kvm_fd >= 0) {
			lx_proc_destroy(vm.proc);
			vm.proc = NULL;
			vm_destroy(&vm);
		}
		return 1;
	}
	/* A restored VM snapshots like a new one: ccow, its coverage measured afresh. */
	struct ccow_opts ccow = ccow_defaults;

	ccow.tracker = true;

	status = start_clock(&vm, vm.vcpus[0], mono_ns ? mono_ns : 1) ? 1 :
		 run_vm(&vm, control, NULL, &ccow);
	restore_lazy_end(&vm);
	lx_proc_destroy(vm.proc);
	vm.proc = NULL;
	vm_destroy(&vm);
	return status;
}

static int cmd_inspect(int argc, char **argv)
{
	if (argc != 2) {
		log_err("usage: ccvm inspect FILE");
		return EXIT_USAGE;
	}
	return inspect_image(argv[1], stdout);
}

int main(int argc, char **argv)
{
	/* A control client that went away must not kill the monitor with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "restore") == 0)
		return cmd_restore(argc - 1, argv + 1);
	if (strcmp(argv[1], "inspect") == 0)
		return cmd_inspect(argc - 1, argv + 1);
	if (strcmp(argv[1], "ctl") == 0) {
		if (argc < 4) {
			log_err("usage: ccvm ctl PATH COMMAND [ARGS...]");
			return EXIT_USAGE;
		}
		return ctl_client(argv[2], argv[3], argc - 4, argv + 4);
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	log_err("unknown command '%s'", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}

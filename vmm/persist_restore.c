/*
 * persist_restore.c - bring a snapshot back to life, and inspect images.
 *
 * Restore is eager: each 2 MiB chunk of the image is read into guest RAM and checked
 * against its checksum before the VM starts; chunks that are holes in the image (all
 * zero) are skipped, so untouched guest memory stays unallocated. Guest RAM is plain
 * anonymous memory as in any VM, so a restored VM can itself be snapshotted with
 * userfaultfd write protection. The page tables and CPU tables in the image's system
 * area are rebuilt too, so an image can only ever describe a user-mode guest.
 *
 * An image is data, never policy: before any VM exists its vCPU and process state are
 * checked field by field against what ccvm itself saves (restore_check_state, which
 * inspect uses too), and the confinement and network policy come from the restoring
 * command line.
 */
#include "persist_cpu.h"
#include "persist_restore.h"
#include "persist_tree.h"
#include "../base/role.h"
#include "../snapshot/image.h"
#include "../snapshot/engine.h"
#include "../snapshot/lazy.h"
#include "../snapshot/memrestore.h"
#include "../base/log.h"
#include "vcpu.h"
#include "vm.h"
#include "linux/lx.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <time.h>

/* The system area is ours, not the guest's: rebuild it rather than trust it (it was
 * built for this very memory by vm_create, so it cannot fail here). */
static void restore_system_area(struct vm *vm)
{
	(void)vm_system_area(vm);
}

static int restore_memory(const char *file, struct img_reader *r, struct vm *vm)
{
	int rc = memrestore_eager(file, r, &vm->ram);

	if (rc)
		return rc;
	restore_system_area(vm);
	return 0;
}

/* One vCPU per saved thread, each with its registers and its personality state: the
 * first process's threads (the first of the @n saved vCPUs) now, the tree's after. */
static int restore_threads(const char *file, struct vm *vm, json_t *proc,
			   struct kvm_saved *saved, int n, bool capped)
{
	int first = lx_state_threads(proc), rc = 0;

	if (first > n || n > VM_MAX_VCPUS) {
		log_err("cannot restore '%s': %d saved vCPUs for %d threads (at most %d)", file, n,
			first, VM_MAX_VCPUS);
		return -EINVAL;
	}
	if (n > vm->max_vcpus && !capped)
		vm->max_vcpus = n;
	if (n > vm->max_vcpus) {
		log_err("cannot restore '%s': it has %d threads, more than --vcpus %d", file, n,
			vm->max_vcpus);
		return -EINVAL;
	}
	rc = restore_proc_threads(vm, vm->proc, proc, saved, 0);
	if (rc)
		log_err("cannot restore '%s': the first process's threads do not come back", file);
	return rc;
}


static int restore_state(const char *file, const struct restore_saved *st,
			 const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns)
{
	struct lx_restore_policy pol = { .root = o->root, .rw = o->rw, .n_rw = o->n_rw,
					 .net = o->net, .publish_given = o->publish_given,
					 .hooks = o->hooks, .filter = o->filter };
	char err[512];
	int rc;

	/* The saved guest may use what this host's guests are given, or nothing runs. */
	rc = persist_cpu_check(vm, st->cpu, st->cpu_len, err, sizeof(err));
	if (rc) {
		log_err("cannot restore '%s': %s", file, err);
		return rc;
	}
	/* Processes of a tree share pipes: each made once, for all of them. */
	if (st->tree && !(pol.pipes = json_object()))
		return -ENOMEM;
	/* And memfds: made before any process, which map them and hold them open. */
	rc = 0;
	if (st->shm_made) /* a stream's, made as it came (restore_saved_free closes them) */
		pol.shm = st->shm_made;
	else if (st->shm_file.read)
		rc = lx_shm_restore_src(&st->shm_file, &pol.shm);
	if (rc) {
		log_err("cannot restore '%s': its shared memory: %s", file, strerror(-rc));
		goto out;
	}
	rc = lx_proc_restore(vm_first_view(vm), st->proc, &pol, &vm->proc, err, sizeof(err));
	if (rc)
		log_err("cannot restore '%s': %s", file, err);
	if (!rc)
		rc = vm_tree(vm);
	if (!rc) {
		*mono_ns = vm->proc->clock.mono_base_ns;
		rc = restore_threads(file, vm, st->proc, st->vcpus, (int)st->n_vcpus, o->vcpus != 0);
	}
	if (!rc && st->tree)
		rc = tree_restore(vm, st->tree, &st->windows, &pol, st->vcpus,
				  lx_state_threads(st->proc));
out:
	if (pol.pipes) {
		lx_restore_pipes_close(pol.pipes);
		json_decref(pol.pipes);
	}
	if (pol.shm && pol.shm != st->shm_made)
		lx_shm_restored_close(pol.shm);
	return rc;
}

static pthread_t lazy_thread;

static void *restore_lazy_wait(void *arg)
{
	struct vm *vm = arg;

	role_enter(ROLE_HELPER);
	if (lazy_finish(vm->lazy) == 0)
		log_info("lazy restore: all memory in place");
	__atomic_store_n(&vm->lazy, NULL, __ATOMIC_RELEASE);
	return NULL;
}

int restore_lazy_begin(struct vm *vm)
{
	if (!vm->lazy)
		return 0;
	return pthread_create(&lazy_thread, NULL, restore_lazy_wait, vm) ? -EAGAIN : 0;
}

void restore_lazy_end(struct vm *vm)
{
	struct lazy *l = __atomic_load_n(&vm->lazy, __ATOMIC_ACQUIRE);

	if (l)
		lazy_abort(l);
	if (lazy_thread)
		pthread_join(lazy_thread, NULL);
	lazy_thread = 0;
}

/* A chunk failed its checksum after the VM started: it cannot go on. */
static void restore_lazy_bad(void *ctx)
{
	vm_stop(ctx, 1);
}

static int restore_vm_from(const char *file, struct img_reader *r, const struct restore_saved *st,
			   const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns);

int restore_vm_create(struct vm *vm, uint64_t ram_size, const struct restore_opts *o)
{
	int rc = vm_create(vm, ram_size, o->mem_total);

	if (!rc && o->confine)
		rc = o->confine(o->confine_ctx);
	if (rc)
		return rc;
	if (o->vcpus)
		vm->max_vcpus = o->vcpus;
	vm->max_procs = o->max_procs;
	return 0;
}

int restore_vm_state(const char *what, const struct restore_saved *st,
		     const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns)
{
	restore_system_area(vm);
	return restore_state(what, st, o, vm, mono_ns);
}

int restore_vm(const char *file, const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns)
{
	struct restore_saved st = { 0 };
	struct img_reader r;
	char err[IMG_ERR_LEN];
	int rc = img_open(file, &r, err);

	if (rc) {
		log_err("cannot restore '%s': %s", file, err);
		return rc;
	}
	if (o->mem && o->mem != r.info.ram_size) {
		log_err("cannot restore '%s': it holds a VM with %llu MiB of RAM; --mem %llu MiB "
			"differs (leave --mem out)", file, (unsigned long long)(r.info.ram_size >> 20),
			(unsigned long long)(o->mem >> 20));
		img_close(&r);
		return -EINVAL;
	}
	/* The VM is made and the monitor confined before the state sections are parsed:
	 * what an image says is read under seccomp and Landlock. */
	rc = restore_vm_create(vm, r.info.ram_size, o);
	if (rc) {
		img_close(&r);
		return rc;
	}
	/* Read once, checked, and only that copy is loaded: the file may change meanwhile. */
	rc = restore_read_state(&r, &st, err, sizeof(err));
	if (rc) {
		log_err("cannot restore '%s': %s ('ccvm inspect %s' shows the image)", file, err,
			file);
		img_close(&r);
		return rc;
	}
	rc = restore_vm_from(file, &r, &st, o, vm, mono_ns);
	restore_saved_free(&st);
	return rc;
}

/* restore_vm once the VM is made, the image open and its state read and checked (@st);
 * closes or hands on @r. */
static int restore_vm_from(const char *file, struct img_reader *r, const struct restore_saved *st,
			   const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns)
{
	int rc = 0;

	if (o->lazy && (st->shm_file.read || st->shm_made)) {
		/* A shared mapping is mapped anew over memory the lazy fill still owns. */
		log_info("restore of '%s': it holds shared memory; loading all memory first", file);
	} else if (o->lazy) {
		/* Sections are read now, while we still own the reader; memory later. */
		rc = lazy_start(r, &(struct lazy_target){ .mem = &vm->ram, .on_bad = restore_lazy_bad,
							   .ctx = vm }, file, &vm->lazy);
		if (rc) {
			log_err("cannot restore '%s' lazily: %s", file, strerror(-rc));
			img_close(r);
			return rc;
		}
		restore_system_area(vm);
		rc = restore_state(file, st, o, vm, mono_ns);
		if (rc) {
			lazy_abort(vm->lazy);
			lazy_finish(vm->lazy);
			vm->lazy = NULL;
		}
		return rc;
	}
	rc = restore_memory(file, r, vm);
	if (!rc)
		rc = restore_state(file, st, o, vm, mono_ns);
	img_close(r);
	return rc;
}

/* Section @type of an image: restore_src's for an image file. */
static int img_src_section(void *ctx, uint32_t type, void **data, size_t *len)
{
	const struct img_reader *r = ctx;
	const struct img_section *sec = img_find(r, type);

	if (!sec)
		return -ENOENT;
	*len = sec->length;
	if (!sec->length) {
		*data = NULL;
		return 0;
	}
	return img_read_section(r, sec, data) ? -EIO : 0;
}

/* The windows and shared memory sections read in place (img_src_in_place). */
static int img_src_read_windows(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct img_reader *r = ctx;
	const struct img_section *sec = img_find(r, IMG_SEC_WINDOWS);

	return sec ? img_read_at(r, sec, off, buf, n) : -ENOENT;
}

static int img_src_read_shm(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct img_reader *r = ctx;
	const struct img_section *sec = img_find(r, IMG_SEC_SHM);

	return sec ? img_read_at(r, sec, off, buf, n) : -ENOENT;
}

/* Section @type of an image left in the file: its length, and how to read it. */
static int img_src_in_place(void *ctx, uint32_t type, size_t *len,
			    int (**read)(void *ctx, uint64_t off, void *buf, size_t n))
{
	const struct img_section *sec = img_find(ctx, type);

	if (!sec || (type != IMG_SEC_WINDOWS && type != IMG_SEC_SHM))
		return -ENOENT;
	*len = sec->length;
	*read = type == IMG_SEC_WINDOWS ? img_src_read_windows : img_src_read_shm;
	return 0;
}

static int src_get(const struct restore_src *src, uint32_t type, void **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	return src->section(src->ctx, type, data, len);
}

static int read_vcpus(const struct restore_src *src, struct restore_saved *st, char *err,
		      size_t errlen)
{
	char why[256];
	size_t len;
	int rc = src_get(src, IMG_SEC_VCPUS, (void **)&st->vcpus, &len);

	if (rc == -EIO)
		return log_set_err(-EINVAL, err, errlen, "vcpus section: unreadable");
	if (rc || !len || len % kvm_saved_size())
		return log_set_err(-EINVAL, err, errlen,
				   "vcpus section: missing, or %zu bytes (a multiple of %zu from "
				   "this ccvm)", rc ? 0 : len, kvm_saved_size());
	st->n_vcpus = len / kvm_saved_size();
	for (size_t i = 0; i < st->n_vcpus && !rc; i++)
		if (kvm_saved_check(kvm_saved_nth(st->vcpus, i), why, sizeof(why)))
			rc = log_set_err(-EINVAL, err, errlen, "vcpu %zu: %s", i, why);
	return rc;
}

static int read_process(const struct restore_src *src, struct restore_saved *st, char *err,
			size_t errlen)
{
	char *text = NULL, why[512];
	size_t len;
	int rc = src_get(src, IMG_SEC_PROCESS, (void **)&text, &len);

	if (rc) {
		free(text);
		return log_set_err(-EINVAL, err, errlen, "process section: missing or unreadable");
	}
	st->proc = json_loadb(text ? text : "", len, 0, NULL);
	free(text);
	if (!st->proc)
		return log_set_err(-EINVAL, err, errlen, "process section: not valid JSON");
	rc = lx_state_check(st->proc, src->ram_size, why, sizeof(why));
	if (rc)
		log_set_err(-EINVAL, err, errlen, "process state: %s", why);
	return rc;
}

/* The windows section: left in place where the source can (an image's, up to 4x RAM
 * and more than the monitor should hold), else whole (a stream's, bounded by its
 * receiver). */
static int read_windows(const struct restore_src *src, struct restore_saved *st)
{
	int rc;

	if (src->in_place) {
		st->windows.ctx = src->ctx;
		return src->in_place(src->ctx, IMG_SEC_WINDOWS, &st->windows.len,
				     &st->windows.read);
	}
	rc = src_get(src, IMG_SEC_WINDOWS, (void **)&st->windows_buf, &st->windows.len);
	st->windows.data = st->windows_buf;
	return rc;
}

/* The other processes of a tree (version 3), when the image has them; else the first
 * process has every saved vCPU. */
static int read_tree(const struct restore_src *src, struct restore_saved *st, char *err,
		     size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rt = src_get(src, IMG_SEC_TREE, (void **)&text, &len);
	int rw = read_windows(src, st);

	if (rt == -ENOENT && rw == -ENOENT) {
		if ((size_t)lx_state_threads(st->proc) != st->n_vcpus)
			return log_set_err(-EINVAL, err, errlen, "%zu saved vCPUs for %d threads",
					   st->n_vcpus, lx_state_threads(st->proc));
		return 0;
	}
	if (rt || rw) {
		free(text);
		return log_set_err(-EINVAL, err, errlen, "tree sections: missing or unreadable");
	}
	st->tree = json_loadb(text ? text : "", len, 0, NULL);
	free(text);
	if (!st->tree)
		return log_set_err(-EINVAL, err, errlen, "tree section: not valid JSON");
	return tree_check(st->tree, &st->windows, st->n_vcpus,
			  lx_state_threads(st->proc), src->ram_size, err, errlen);
}

/* The CPU features the state may depend on, when the image records them (checked
 * against this host once the VM exists: restore_state). */
static int read_cpu(const struct restore_src *src, struct restore_saved *st, char *err,
		    size_t errlen)
{
	int rc = src_get(src, IMG_SEC_CPU, &st->cpu, &st->cpu_len);

	if (rc == -ENOENT)
		return 0;
	return rc ? log_set_err(-EINVAL, err, errlen, "cpu section: unreadable") : 0;
}

/* The processes' shared memory (vmm/linux/shm.c), when an image has any: left in the
 * file and read a MiB at a time (up to 4x RAM, more than the monitor should hold). A
 * stream's needs nothing here: its memfds were made as it came (restore_saved). */
static int read_shm(const struct restore_src *src, struct restore_saved *st, char *err,
		    size_t errlen)
{
	size_t len = 0;
	int rc = src->in_place ? src->in_place(src->ctx, IMG_SEC_SHM, &len, &st->shm_file.read) :
				 -ENOENT;

	if (rc || !len) {
		st->shm_file.read = NULL;
		return rc && rc != -ENOENT ? log_set_err(-EINVAL, err, errlen, "shared memory "
							 "section: unreadable") : 0;
	}
	st->shm_file.len = len;
	st->shm_file.ctx = src->ctx;
	return lx_shm_check_src(&st->shm_file, err, errlen);
}

int restore_read_sections(const struct restore_src *src, struct restore_saved *st, char *err,
			  size_t errlen)
{
	int rc;

	memset(st, 0, sizeof(*st));
	rc = read_vcpus(src, st, err, errlen);
	if (!rc)
		rc = read_cpu(src, st, err, errlen);
	if (!rc)
		rc = read_process(src, st, err, errlen);
	if (!rc)
		rc = read_tree(src, st, err, errlen);
	if (!rc)
		rc = read_shm(src, st, err, errlen);
	if (rc)
		restore_saved_free(st);
	return rc;
}

int restore_read_state(const struct img_reader *r, struct restore_saved *st, char *err,
		       size_t errlen)
{
	const struct restore_src src = { .section = img_src_section,
					 .in_place = img_src_in_place, .ctx = (void *)r,
					 .ram_size = r->info.ram_size };

	return restore_read_sections(&src, st, err, errlen);
}

void restore_saved_free(struct restore_saved *st)
{
	free(st->vcpus);
	free(st->cpu);
	json_decref(st->proc);
	json_decref(st->tree);
	free(st->windows_buf);
	if (st->shm_made)
		lx_shm_restored_close(st->shm_made);
	memset(st, 0, sizeof(*st));
}

int restore_check_state(const struct img_reader *r, char *err, size_t errlen)
{
	struct restore_saved st;
	int rc = restore_read_state(r, &st, err, errlen);

	restore_saved_free(&st);
	return rc;
}

static const char *section_name(uint32_t type)
{
	switch (type) {
	case IMG_SEC_VCPUS: return "vcpus";
	case IMG_SEC_PROCESS: return "process";
	case IMG_SEC_CHUNKS: return "memory checksums";
	case IMG_SEC_INFO: return "info";
	case IMG_SEC_ENCODING: return "chunk encodings";
	case IMG_SEC_PARENT: return "parent";
	case IMG_SEC_PAGEMASK: return "page mask";
	case IMG_SEC_TREE: return "process tree";
	case IMG_SEC_CPU: return "cpu features";
	case IMG_SEC_PATCHES: return "patches";
	case IMG_SEC_WINDOWS: return "processes' memory";
	case IMG_SEC_SHM: return "shared memory";
	default: return "unknown";
	}
}

/* The processes besides the first, when the image holds a tree. */
static void inspect_tree(const struct img_reader *r, FILE *out)
{
	const struct img_section *st = img_find(r, IMG_SEC_TREE);
	char *text = NULL;
	json_t *t, *p;
	size_t i;

	if (!st || img_read_section(r, st, (void **)&text))
		return;
	t = json_loadb(text, st->length, 0, NULL);
	free(text);
	if (!t)
		return;
	json_array_foreach(json_object_get(t, "procs"), i, p)
		fprintf(out, "process %lld (parent %lld, window %lld): %s, %d threads\n",
			(long long)json_integer_value(json_object_get(p, "pid")),
			(long long)json_integer_value(json_object_get(p, "ppid")),
			(long long)json_integer_value(json_object_get(p, "win")),
			json_string_value(json_object_get(json_object_get(p, "state"), "exe")) ?: "?",
			lx_state_threads(json_object_get(p, "state")));
	json_array_foreach(json_object_get(t, "zombies"), i, p)
		fprintf(out, "process %lld (parent %lld): ended, status %#llx, not yet waited for\n",
			(long long)json_integer_value(json_object_get(p, "pid")),
			(long long)json_integer_value(json_object_get(p, "ppid")),
			(long long)json_integer_value(json_object_get(p, "wstatus")));
	json_decref(t);
}

static void inspect_process(const struct img_reader *r, FILE *out)
{
	const struct img_section *sp = img_find(r, IMG_SEC_PROCESS);
	char *text = NULL;
	json_t *p;

	if (!sp || img_read_section(r, sp, (void **)&text))
		return;
	p = json_loadb(text, sp->length, 0, NULL);
	if (p)
		fprintf(out, "process: %s (cwd %s, root %s), %zu open fds, %zu memory map entries\n",
			json_string_value(json_object_get(p, "exe")) ?: "?",
			json_string_value(json_object_get(p, "cwd")) ?: "?",
			json_string_value(json_object_get(p, "root")) ?: "?",
			json_array_size(json_object_get(p, "fds")),
			json_array_size(json_object_get(json_object_get(p, "mm"), "vmas")));
	if (p) {
		json_t *th = json_object_get(p, "threads"), *t;
		size_t i;

		fprintf(out, "threads: %zu (pid %lld; tids", json_array_size(th),
			(long long)json_integer_value(json_object_get(p, "pid")));
		json_array_foreach(th, i, t)
			fprintf(out, " %lld", (long long)json_integer_value(json_object_get(t, "tid")));
		fprintf(out, ")\n");
	}
	json_decref(p);
	free(text);
}

/* How the chunks holding data are stored: "codecs: zstd 71%, lz4 9%, raw 20%". */
static void inspect_codecs(const struct img_reader *r, FILE *out)
{
	static const enum img_codec order[] = { IMG_CODEC_ZSTD, IMG_CODEC_LZ4, IMG_CODEC_NONE };
	uint64_t n[IMG_CODEC_AUTO], all = 0;

	img_reader_mix(r, n);
	for (int i = 0; i < IMG_CODEC_AUTO; i++)
		all += n[i];
	if (!all)
		return;
	fprintf(out, "codecs:");
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		fprintf(out, "%s %s %.0f%%", i ? "," : "", codec_stored_name(order[i]),
			100.0 * (double)n[order[i]] / (double)all);
	fprintf(out, "\n");
}

/* The codec, how many chunks it stored as frames, the mix of codecs, and the ratio of
 * data bytes to the bytes they take in the image. */
static void inspect_compression(const struct img_reader *r, FILE *out)
{
	uint64_t raw, stored, frames = 0;

	img_reader_bytes(r, &raw, &stored);
	for (uint64_t c = 0; c < r->n_chunks; c++)
		frames += r->enc[c].codec != IMG_CODEC_NONE;
	if (r->version < 2) {
		fprintf(out, "compression: none (format version %u)\n", r->version);
		return;
	}
	fprintf(out, "compression: %s", codec_name(r->codec));
	if (r->codec == IMG_CODEC_AUTO)
		fprintf(out, " (a codec and level per chunk)");
	else if (r->codec != IMG_CODEC_NONE)
		fprintf(out, " level %d", r->level);
	if (r->codec != IMG_CODEC_NONE)
		fprintf(out, ", %llu of %llu chunks compressed", (unsigned long long)frames,
			(unsigned long long)r->n_chunks);
	fprintf(out, "\n");
	inspect_codecs(r, out);
	fprintf(out, "data: %llu bytes in pages, %llu stored, ratio %.2f\n",
		(unsigned long long)raw, (unsigned long long)stored,
		stored ? (double)raw / (double)stored : 1.0);
	if (r->mask) {
		uint64_t held = 0, pages = r->info.ram_size / 4096;

		for (uint64_t i = 0; i < pages / 8; i++)
			held += (uint64_t)__builtin_popcount(r->mask[i]);
		fprintf(out, "incremental: holds %llu of %llu pages, the rest are its parents'\n",
			(unsigned long long)held, (unsigned long long)pages);
	}
	if (r->info.flags & IMG_FLAG_PATCHED)
		fprintf(out, "patches: %llu pages written after their chunk's frame, raw in the "
			"patch area ('ccvm compact' folds them in)\n",
			(unsigned long long)r->n_patches);
}

int inspect_image(const char *file, FILE *out)
{
	struct img_reader r;
	char err[IMG_ERR_LEN], why[512];
	uint64_t bad = 0, data = 0;
	bool bad_state = false;
	uint8_t *buf;
	time_t t;

	if (img_open(file, &r, err)) {
		log_err("%s: %s", file, err);
		return 1;
	}
	t = (time_t)(r.info.created_ns / 1000000000ULL);
	fprintf(out, "image: %s\nversion: %u\nram: %llu MiB\npolicy: %s\ncreated: %s",
		file, r.version, (unsigned long long)(r.info.ram_size >> 20),
		r.info.policy < SNAP_NR_POLICIES ? snap_policy_name((enum snap_policy)r.info.policy) :
						   "unknown", ctime(&t));
	fprintf(out, "file: %llu bytes, %llu on disk\n", (unsigned long long)r.file_size,
		(unsigned long long)img_disk_bytes(file));
	inspect_compression(&r, out);
	for (const struct img_reader *p = &r; p->parent; p = p->parent)
		fprintf(out, "parent: %s (%s, %s)\n", p->parent_path, p->parent->parent ?
			"incremental" : "full", codec_name(p->parent->codec));
	for (int i = 0; i < r.n_sections; i++)
		fprintf(out, "section %d: %s, %llu bytes, checksum ok\n", i,
			section_name(r.sec[i].type), (unsigned long long)r.sec[i].length);
	inspect_process(&r, out);
	inspect_tree(&r, out);
	if (restore_check_state(&r, why, sizeof(why))) {
		bad_state = true;
		fprintf(out, "DAMAGED: %s\n", why);
	}
	buf = malloc(IMG_CHUNK);
	if (!buf) {
		img_close(&r);
		return 1;
	}
	for (uint64_t c = 0; c < r.n_chunks; c++) {
		bool has_data;
		int rc = img_load_chunk(&r, c, buf, &has_data);

		data += has_data;
		if (rc) {
			bad++;
			fprintf(out, "DAMAGED: memory chunk %llu (guest %#llx-%#llx): %s\n",
				(unsigned long long)c, (unsigned long long)(c * IMG_CHUNK),
				(unsigned long long)((c + 1) * IMG_CHUNK),
				rc == -EBADMSG ? "checksum mismatch" : strerror(-rc));
		}
	}
	free(buf);
	fprintf(out, "memory: %llu chunks of %llu KiB, %llu with data, %llu damaged\n",
		(unsigned long long)r.n_chunks, (unsigned long long)(IMG_CHUNK >> 10),
		(unsigned long long)data, (unsigned long long)bad);
	img_close(&r);
	if (bad)
		log_err("%s: %llu damaged memory chunk(s)", file, (unsigned long long)bad);
	if (bad_state)
		log_err("%s: damaged state: %s", file, why);
	return bad || bad_state ? 1 : 0;
}

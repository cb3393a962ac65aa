/*
 * test_restore_policy.c - an image is data, never policy. Saved vCPU and process state
 * built here as ccvm saves it, then altered as an attacker writing the file would:
 * CS at DPL 0 at a user RIP, IOPL 3, a foreign MSR or a syscall entry of its own, a
 * pending NMI, tables elsewhere, a raw socket, a heap outside user RAM. Each is
 * refused with the field's name by the checks (kvm_saved_check, lx_state_check), by
 * `inspect` and by restore before any VM exists. A restore takes root, writable
 * directories and network rules from its own options: a different saved root is
 * refused, saved --rw and --net host are ignored, and only loopback publish rules are
 * reused. No KVM is needed.
 */
#include "suites.h"
#include "../../mmu/layout.h"
#include "../../snapshot/codec.h"
#include "../../snapshot/image.h"
#include "../../vmm/persist_restore.h"
#include "../../vmm/persist_tree.h"
#include "../../mmu/cpu_tables.h"
#include "../../vmm/kvm/kvm_impl.h"
#include "../../vmm/vm.h"
#include "../../base/x86.h"
#include "../../vmm/linux/lx.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define RAM (16ULL << 20)

static char dir[] = "/tmp/ccvm-policy-XXXXXX", img[128];
static char err[512];

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/crafted.img", dir);
	err[0] = '\0';
}

static void teardown(void)
{
	unlink(img);
	rmdir(dir);
	strcpy(dir, "/tmp/ccvm-policy-XXXXXX");
}

/* A vCPU state as ccvm saves it for a thread running user code. */
static void good_vcpu(struct kvm_saved *st)
{
	memset(st, 0, sizeof(*st));
	st->magic = KVM_SAVED_MAGIC;
	st->size = sizeof(*st);
	st->regs.rip = LAYOUT_USER_BASE + 0x1234;
	st->regs.rsp = RAM - 4096;
	st->regs.rflags = RFLAGS_FIXED | RFLAGS_IF;
	st->sregs.cs = (struct kvm_segment){ .selector = GDT_USER_CS, .dpl = 3, .l = 1, .s = 1,
					     .present = 1, .type = 11 };
	st->sregs.ss = (struct kvm_segment){ .selector = GDT_USER_DS, .dpl = 3, .db = 1, .s = 1,
					     .present = 1, .type = 3 };
	st->sregs.fs.base = LAYOUT_USER_BASE + 0x8000;
	st->sregs.gdt = (struct kvm_dtable){ .base = LAYOUT_GDT, .limit = GDT_LIMIT };
	st->sregs.idt = (struct kvm_dtable){ .base = LAYOUT_IDT, .limit = IDT_LIMIT };
	st->sregs.tr = (struct kvm_segment){ .base = cpu_tss_base(0), .limit = cpu_tss_limit(0),
					     .selector = GDT_TSS, .present = 1, .type = 11 };
	st->sregs.cr0 = CR0_PE | CR0_WP | CR0_PG;
	st->sregs.cr3 = LAYOUT_PGTABLE;
	st->sregs.efer = EFER_LME | EFER_LMA | EFER_SCE;
	st->n_msrs = KVM_FIXED_MSRS;
	memcpy(st->msrs, kvm_fixed_msrs, sizeof(kvm_fixed_msrs));
}

static void expect_refused(const struct kvm_saved *st, const char *field)
{
	err[0] = '\0';
	ck_assert_int_eq(kvm_saved_check(st, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, field), "refusal '%s' does not name '%s'", err, field);
}

/* The tree sections of a crafted image: what ccvm writes passes, anything else is
 * refused before a VM exists (windows twice, a block outside user memory, threads that
 * do not add up, memory records of a window no process has). */
START_TEST(test_tree_check)
{
	const uint64_t ram = 64ULL << 20;
	static uint8_t rec[8 + (2 << 20)];
	uint32_t head[2] = { 5, 3 };
	struct tree_windows none = { 0 }, one = { .data = rec, .len = sizeof(rec) };
	struct tree_windows torn = { .data = rec, .len = 7 };
	char err[256];
	json_t *t;

	t = json_loads("{\"root\":{\"pgid\":1,\"sid\":1,\"reads\":[]},\"next_id\":10,"
		       "\"procs\":[],\"zombies\":[{\"pid\":5,\"ppid\":1,\"pgid\":1,\"sid\":1,"
		       "\"wstatus\":768}]}", 0, NULL);
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(tree_check(t, &none, 1, 1, ram, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tree_check(t, &none, 2, 1, ram, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "threads"), "%s", err);
	json_object_set_new(json_object_get(t, "root"), "reads", json_loads("[[1, 0]]", 0, NULL));
	ck_assert_int_eq(tree_check(t, &none, 1, 1, ram, err, sizeof(err)), -EINVAL);
	json_object_set_new(json_object_get(t, "root"), "reads", json_loads("[[40, 64]]", 0, NULL));
	ck_assert_int_eq(tree_check(t, &none, 1, 1, ram, err, sizeof(err)), -EINVAL);
	json_object_set_new(json_object_get(t, "root"), "reads", json_array());
	memcpy(rec, head, sizeof(head)); /* window 5: no process has it */
	ck_assert_int_eq(tree_check(t, &one, 1, 1, ram, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "window 5"), "%s", err);
	ck_assert_int_eq(tree_check(t, &torn, 1, 1, ram, err, sizeof(err)), -EINVAL);
	json_object_set_new(json_array_get(json_object_get(t, "zombies"), 0), "wstatus",
			    json_integer(1 << 20));
	ck_assert_int_eq(tree_check(t, &none, 1, 1, ram, err, sizeof(err)), -EINVAL);
	json_decref(t);
}
END_TEST

/* An image of one process written by ccvm before trees (version 2: fdkeep waiting for
 * its stdin, snapshotted by 804668d's ccvm) is still read and its state checked as
 * this version's restore does: all its vCPUs the one process's, no tree sections. */
#define V2_SIZE 17833448 /* bytes of the fixture */

START_TEST(test_version2_image)
{
	struct restore_saved saved;
	struct img_reader r;
	char err[IMG_ERR_LEN];

	fixture_unpack("tests/unit/data/image-v2.img.zst", V2_SIZE, img);
	ck_assert_msg(img_open(img, &r, err) == 0, "%s", err);
	ck_assert_uint_eq(r.version, 2);
	ck_assert_ptr_null(img_find(&r, IMG_SEC_TREE));
	ck_assert_msg(restore_read_state(&r, &saved, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(saved.n_vcpus, 1);
	ck_assert_ptr_null(saved.tree);
	ck_assert_int_eq(lx_state_threads(saved.proc), 1);
	restore_saved_free(&saved);
	img_close(&r);
}
END_TEST

/* What ccvm saves passes: user code, and a vCPU caught at a trap stub's entry at CPL0
 * (after `syscall` or an exception, before the stub's `out`). */
START_TEST(test_vcpu_good_states)
{
	struct kvm_saved st;

	good_vcpu(&st);
	ck_assert_msg(kvm_saved_check(&st, err, sizeof(err)) == 0, "refused: %s", err);
	st.regs.rip = STUB_SYSCALL;
	st.sregs.cs.dpl = 0;
	st.sregs.cs.selector = GDT_KERNEL_CS;
	ck_assert_msg(kvm_saved_check(&st, err, sizeof(err)) == 0, "refused: %s", err);
	st.regs.rip = STUB_EXC(14);
	ck_assert_msg(kvm_saved_check(&st, err, sizeof(err)) == 0, "refused: %s", err);
	good_vcpu(&st);
	st.regs.rip = STUB_SYSCALL; /* kvm_pvm runs the syscall stub at CPL3 */
	ck_assert_msg(kvm_saved_check(&st, err, sizeof(err)) == 0, "refused: %s", err);
}
END_TEST

/* What ccvm never saves is refused, by name. */
START_TEST(test_vcpu_crafted_states)
{
	struct kvm_saved st;

	good_vcpu(&st);
	st.sregs.cs.dpl = 0;
	st.sregs.cs.selector = GDT_KERNEL_CS;
	expect_refused(&st, "cs.dpl 0");
	good_vcpu(&st);
	st.regs.rip = STUB_EXC(3) + 2;
	expect_refused(&st, "inside ccvm's trap stubs");
	good_vcpu(&st);
	st.regs.rflags |= RFLAGS_IOPL;
	expect_refused(&st, "rflags.iopl 3");
	good_vcpu(&st);
	st.msrs[2].index = 0xc0000100; /* FS_BASE: not one ccvm saves */
	expect_refused(&st, "msr 0xc0000100");
	good_vcpu(&st);
	st.msrs[1].data = LAYOUT_USER_BASE; /* LSTAR: syscall into guest code at CPL0 */
	expect_refused(&st, "msr 0xc0000082");
	good_vcpu(&st);
	st.n_msrs = 5;
	expect_refused(&st, "n_msrs 5");
	good_vcpu(&st);
	st.sregs.idt.base = LAYOUT_USER_BASE;
	expect_refused(&st, "idt");
	good_vcpu(&st);
	st.sregs.cr3 = LAYOUT_USER_BASE;
	expect_refused(&st, "cr3");
	good_vcpu(&st);
	st.events.nmi.pending = 1;
	expect_refused(&st, "events.nmi");
	good_vcpu(&st);
	st.events.exception.injected = 1;
	st.events.exception.nr = 200;
	expect_refused(&st, "events.exception");
	good_vcpu(&st);
	st.size = 12;
	expect_refused(&st, "size 12");
}
END_TEST

/* A process state as ccvm saves it, rooted at @root. */
/*
 * G3: every return to CPL3 takes its flags from one function, which keeps only what a
 * program at IOPL 0 may hold. A forged R11 at the syscall stub (the guest can jump
 * there) or a saved state naming IOPL 3 in R11 never reaches CPL3 with IOPL set.
 */
START_TEST(test_user_rflags)
{
	struct cpu_regs r = { .rcx = LAYOUT_USER_BASE, .r11 = ~0ULL };
	struct kvm_saved st;

	x86_sysret_regs(&r);
	ck_assert_uint_eq(r.rflags & (RFLAGS_IOPL | RFLAGS_VM | RFLAGS_VIF | RFLAGS_VIP), 0);
	ck_assert_uint_eq(r.rflags & ~(RFLAGS_USER | RFLAGS_FIXED | RFLAGS_IF), 0);
	ck_assert_uint_ne(r.rflags & RFLAGS_IF, 0);
	ck_assert_uint_eq(x86_user_rflags(RFLAGS_IOPL | RFLAGS_FIXED), RFLAGS_FIXED | RFLAGS_IF);
	ck_assert_uint_eq(x86_user_rflags(RFLAGS_DF | RFLAGS_AC),
			  RFLAGS_DF | RFLAGS_AC | RFLAGS_FIXED | RFLAGS_IF);
	good_vcpu(&st);
	st.regs.rip = STUB_SYSCALL;
	st.regs.r11 = RFLAGS_FIXED | RFLAGS_IF | RFLAGS_IOPL;
	expect_refused(&st, "r11.iopl");
}
END_TEST

static json_t *good_state(const char *root)
{
	return json_pack(
		"{s:i, s:s, s:s, s:s, s:s, s:[s], s:i, s:[], s:{s:[], s:[], s:I, s:I, s:I, s:I, "
		"s:I, s:I, s:I}, s:[], s:[], s:I, s:i, s:i, s:[{s:i}], s:{s:b, s:[s, s]}, s:i}",
		"version", 2, "exe", "/bin/x", "comm", "x", "root", root, "cwd", "/", "rw", "/",
		"umask", 18, "fds", "mm", "vmas", "files", "brk_start", (json_int_t)0x500000, "brk",
		(json_int_t)0x501000, "mmap_top", (json_int_t)0xe00000, "stack_lo",
		(json_int_t)0xe00000, "stack_top", (json_int_t)0xf00000, "vdso_base",
		(json_int_t)0xf80000, "ram_size", (json_int_t)RAM, "rlimits", "sigactions",
		"mono_ns", (json_int_t)1, "pid", 100, "next_tid", 101, "threads", "tid", 100, "net",
		"host", 1, "publish", "0.0.0.0:18080:80", "127.0.0.1:16379:6379", "fastio", 0);
}

static void add_socket(json_t *st, int family, int type, int protocol)
{
	json_array_append_new(json_object_get(st, "fds"),
			      json_pack("{s:i, s:s, s:i, s:i, s:i, s:i}", "fd", 3, "kind", "socket",
					"family", family, "type", type, "protocol", protocol, "port",
					0));
}

/* The process state checks: a good state passes; a raw socket, a heap or stack
 * outside user RAM, another version are refused by name. */
START_TEST(test_state_checks)
{
	json_t *st = good_state("/");

	ck_assert_msg(lx_state_check(st, RAM, err, sizeof(err)) == 0, "refused: %s", err);
	add_socket(st, AF_INET, SOCK_STREAM, 0);
	ck_assert_msg(lx_state_check(st, RAM, err, sizeof(err)) == 0, "refused: %s", err);
	add_socket(st, AF_INET, SOCK_RAW, IPPROTO_ICMP);
	ck_assert_int_eq(lx_state_check(st, RAM, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "socket family 2, type 3"), "refusal: %s", err);
	json_decref(st);
	st = good_state("/");
	json_object_set_new(json_object_get(st, "mm"), "brk", json_integer(0x1000));
	ck_assert_int_eq(lx_state_check(st, RAM, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "mm.brk 0x1000"), "refusal: %s", err);
	json_object_set_new(json_object_get(st, "mm"), "brk", json_integer(0x501000));
	json_object_set_new(json_object_get(st, "mm"), "stack_lo", json_integer((json_int_t)RAM * 2));
	ck_assert_int_eq(lx_state_check(st, RAM, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "mm.stack_lo"), "refusal: %s", err);
	json_object_set_new(st, "version", json_integer(1));
	ck_assert_int_eq(lx_state_check(st, RAM, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "version 1"), "refusal: %s", err);
	json_decref(st);
}
END_TEST

/* An image holding @st and @state, written as the engine writes one. */
static void write_image(const struct kvm_saved *st, json_t *state)
{
	struct img_header_info info = { .ram_size = RAM };
	struct img_writer *w;
	char *text = json_dumps(state, JSON_COMPACT);

	static const uint8_t zero[4096];

	ck_assert_int_eq(img_create(img, &info, &w), 0);
	for (uint64_t pfn = 0; pfn < RAM / sizeof(zero); pfn++)
		ck_assert_int_eq(img_write_page(w, pfn, zero), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, st, sizeof(*st)), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_PROCESS, text, strlen(text)), 0);
	ck_assert_int_eq(img_finish(w), 0);
	free(text);
}

/*
 * G4: restore loads only the copy it checked. restore_read_state reads each state
 * section once and checks that copy; the file changed afterwards (an IOPL-3 vCPU
 * written over the section in place, and the open reader's checksum made to match it,
 * as a crafted collision would) fails a fresh check, while the copy restore goes on
 * with is still the one checked.
 */
START_TEST(test_restore_loads_the_checked_copy)
{
	struct restore_saved saved;
	struct kvm_saved st, bad;
	struct img_reader r;
	char why[IMG_ERR_LEN];
	json_t *state = good_state("/");
	const struct img_section *sv;
	int fd;

	good_vcpu(&st);
	write_image(&st, state);
	json_decref(state);
	ck_assert_msg(img_open(img, &r, why) == 0, "%s", why);
	ck_assert_msg(restore_read_state(&r, &saved, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(saved.n_vcpus, 1);
	bad = st;
	bad.regs.rflags |= RFLAGS_IOPL;
	sv = img_find(&r, IMG_SEC_VCPUS);
	fd = open(img, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, &bad, sizeof(bad), (off_t)sv->offset), (ssize_t)sizeof(bad));
	close(fd);
	((struct img_section *)sv)->hash = XXH3_64bits(&bad, sizeof(bad));
	ck_assert_int_eq(restore_check_state(&r, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "iopl"), "%s", err);
	ck_assert_uint_eq(saved.vcpus[0].regs.rflags & RFLAGS_IOPL, 0);
	ck_assert_int_eq(memcmp(&saved.vcpus[0], &st, sizeof(st)), 0);
	restore_saved_free(&saved);
	img_close(&r);
}
END_TEST

/* A valid image whose memory (text in every chunk) is compressed with @codec. */
static void write_compressed_image(enum img_codec codec)
{
	struct img_header_info info = { .ram_size = RAM, .codec = codec, .level = 1 };
	uint8_t *chunk = aligned_alloc(4096, IMG_CHUNK), *scratch = aligned_alloc(4096, IMG_SCRATCH_SIZE);
	uint8_t what[IMG_CHUNK / 4096];
	json_t *state = good_state("/");
	char *text = json_dumps(state, JSON_COMPACT);
	struct kvm_saved st;
	struct img_writer *w;

	good_vcpu(&st);
	ck_assert_ptr_nonnull(chunk);
	ck_assert_ptr_nonnull(scratch);
	ck_assert_int_eq(img_create(img, &info, &w), 0);
	for (uint64_t c = 0; c < RAM / IMG_CHUNK; c++) {
		uint64_t zero;

		for (size_t i = 0; i < IMG_CHUNK; i += 64)
			snprintf((char *)chunk + i, 64, "record %llu of chunk %llu: status=shipped   ",
				 (unsigned long long)i, (unsigned long long)c);
		memset(what, IMG_PAGE_DATA, sizeof(what));
		ck_assert_int_eq(img_chunk_prepare(w, c, chunk, what, &zero), 0);
		ck_assert_int_eq(img_chunk_write(w, c, chunk, what, scratch), 0);
	}
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, &st, sizeof(st)), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_PROCESS, text, strlen(text)), 0);
	ck_assert_int_eq(img_finish(w), 0);
	free(text);
	json_decref(state);
	free(chunk);
	free(scratch);
}

/* inspect of a compressed image: intact, it names the codec, the chunks compressed and
 * the ratio; with one byte of a frame flipped, it names that chunk as damaged. */
START_TEST(test_inspect_compressed)
{
	static const enum img_codec codecs[] = { IMG_CODEC_ZSTD, IMG_CODEC_LZ4 };

	for (int i = 0; i < 2; i++) {
		char out[8192] = "", want[64];
		struct img_reader r;
		char err[IMG_ERR_LEN];
		FILE *f;
		int fd;
		uint8_t b;
		off_t at;

		write_compressed_image(codecs[i]);
		f = fmemopen(out, sizeof(out) - 1, "w");
		ck_assert_int_eq(inspect_image(img, f), 0);
		fclose(f);
		snprintf(want, sizeof(want), "compression: %s level 1, 8 of 8 chunks compressed",
			 codec_name(codecs[i]));
		ck_assert_msg(strstr(out, want) && strstr(out, "version: 3") && strstr(out, "ratio "),
			      "inspect said: %s", out);
		ck_assert_int_eq(img_open(img, &r, err), 0);
		at = (off_t)(IMG_MEM_OFFSET + 3 * IMG_CHUNK + r.enc[3].stored_len / 3);
		img_close(&r);
		fd = open(img, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &b, 1, at), 1);
		b ^= 1;
		ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
		close(fd);
		f = fmemopen(out, sizeof(out) - 1, "w");
		ck_assert_int_eq(inspect_image(img, f), 1);
		fclose(f);
		ck_assert_msg(strstr(out, "DAMAGED: memory chunk 3 ") && strstr(out, "1 damaged"),
			      "inspect said: %s", out);
	}
}
END_TEST

/* inspect reports the crafted field as damage (status 1), and restore's parser refuses
 * the image (restore_vm runs it once the monitor is confined, which needs a VM: here it
 * is called alone, where no KVM is needed to see it). */
static void expect_image_refused(const char *field)
{
	struct restore_saved saved;
	struct img_reader r;
	char out[8192] = "", err[IMG_ERR_LEN];
	FILE *f = fmemopen(out, sizeof(out) - 1, "w");
	int rc;

	ck_assert_int_eq(inspect_image(img, f), 1);
	fclose(f);
	/* The memory is intact: the damage is the crafted field. */
	ck_assert_msg(strstr(out, "0 damaged") && strstr(out, "DAMAGED: ") && strstr(out, field),
		      "inspect said: %s", out);
	rc = img_open(img, &r, err);
	if (!rc) {
		rc = restore_read_state(&r, &saved, err, sizeof(err));
		img_close(&r);
	}
	ck_assert_int_eq(rc, -EINVAL);
}

START_TEST(test_crafted_images)
{
	struct kvm_saved st;
	json_t *state = good_state("/");

	good_vcpu(&st);
	st.sregs.cs.dpl = 0;
	write_image(&st, state);
	expect_image_refused("cs.dpl 0");
	good_vcpu(&st);
	st.regs.rflags |= RFLAGS_IOPL;
	write_image(&st, state);
	expect_image_refused("rflags.iopl 3");
	good_vcpu(&st);
	st.msrs[3].index = 0x1b; /* APIC base */
	write_image(&st, state);
	expect_image_refused("msr 0x1b");
	good_vcpu(&st);
	add_socket(state, AF_INET, SOCK_RAW, IPPROTO_RAW);
	write_image(&st, state);
	expect_image_refused("socket family 2, type 3");
	json_decref(state);
}
END_TEST

/* Restore under a policy: another root is refused naming it; with the same root, the
 * saved --rw and --net host are not used and only the loopback publish rule is. */
START_TEST(test_restore_policy)
{
	const char *rw[] = { dir };
	struct lx_net none = { 0 };
	struct lx_restore_policy pol = { .root = dir, .rw = rw, .n_rw = 1, .net = &none };
	struct lx_proc *p = NULL;
	struct gmem mem;
	json_t *st = good_state("/");
	char spec[80];

	ck_assert_int_eq(gmem_map(&mem, RAM), 0);
	ck_assert_int_eq(lx_proc_restore(&mem, st, &pol, &p, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "root: the image was taken with --root /") &&
		      strstr(err, "restore with --root / to accept it"), "refusal: %s", err);
	json_decref(st);
	st = good_state(dir);
	ck_assert_msg(lx_proc_restore(&mem, st, &pol, &p, err, sizeof(err)) == 0, "refused: %s",
		      err);
	ck_assert_int_eq(p->fs.n_rw, 1);
	ck_assert_str_eq(p->fs.rw_real[0], dir);
	ck_assert(!p->net.host);
	ck_assert_int_eq(p->net.n_rules, 1);
	lx_net_format_publish(&p->net.rules[0], spec, sizeof(spec));
	ck_assert_str_eq(spec, "127.0.0.1:16379:6379");
	lx_proc_destroy(p);
	json_decref(st);
	gmem_unmap(&mem);
}
END_TEST

Suite *restore_policy_suite(void)
{
	Suite *s = suite_create("restore_policy");
	TCase *tc = tcase_create("image is data");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_vcpu_good_states);
	tcase_add_test(tc, test_version2_image);
	tcase_add_test(tc, test_tree_check);
	tcase_add_test(tc, test_vcpu_crafted_states);
	tcase_add_test(tc, test_user_rflags);
	tcase_add_test(tc, test_state_checks);
	tcase_add_test(tc, test_crafted_images);
	tcase_add_test(tc, test_restore_loads_the_checked_copy);
	tcase_add_test(tc, test_inspect_compressed);
	tcase_add_test(tc, test_restore_policy);
	suite_add_tcase(s, tc);
	return s;
}

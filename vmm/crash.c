/*
 * crash.c - guest crash reports.
 *
 * When the guest program faults, the CPU has pushed an exception frame (RIP, CS,
 * RFLAGS, RSP, SS, and an error code for some vectors) on the CPL0 stack and entered
 * the vector's stub, whose `out` brought us here. The general registers still hold
 * the program's values. We print them with the vector's name and, for a page fault,
 * the faulting address and what kind of access it was, then end the VM with the exit
 * status a shell shows for the signal Linux would have sent.
 */
#include "crash.h"
#include "../base/log.h"
#include "../base/x86.h"
#include "linux/lx.h"
#include "../mmu/cpu_tables.h"
#include "../mmu/gmem.h"
#include "../mmu/layout.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *crash_vector_name(int v)
{
	static const char *const names[X86_NR_EXCEPTIONS] = {
		[X86_DE] = "#DE divide error",       [X86_DB] = "#DB debug",
		[X86_NMI] = "NMI",                   [X86_BP] = "#BP breakpoint (int3)",
		[X86_OF] = "#OF overflow",           [X86_BR] = "#BR bound range",
		[X86_UD] = "#UD invalid opcode",     [X86_NM] = "#NM device not available",
		[X86_DF] = "#DF double fault",       [X86_TS] = "#TS invalid TSS",
		[X86_NP] = "#NP segment not present", [X86_SS] = "#SS stack fault",
		[X86_GP] = "#GP general protection", [X86_PF] = "#PF page fault",
		[X86_MF] = "#MF x87 floating point", [X86_AC] = "#AC alignment check",
		[X86_MC] = "#MC machine check",      [X86_XM] = "#XM SIMD floating point",
		[X86_VE] = "#VE virtualization",     [X86_CP] = "#CP control protection",
	};

	return v >= 0 && v < X86_NR_EXCEPTIONS && names[v] ? names[v] : "reserved exception";
}

/* The signal Linux sends a process for exception @v. */
static bool crash_has_error_code(int v)
{
	return v == X86_DF || v == X86_TS || v == X86_NP || v == X86_SS || v == X86_GP ||
	       v == X86_PF || v == X86_AC || v == X86_CP;
}

int crash_read_frame(const struct crash_ctx *c, int vector, struct crash_frame *f)
{
	const struct cpu_regs *r = &c->view->regs;
	const uint64_t *w;
	int n = crash_has_error_code(vector) ? 6 : 5;

	/* The frame must lie on our CPL0 stack; anything else means the stub was
	 * reached some other way. */
	uint64_t top = cpu_kstack_top(c->vcpu_id);

	if (r->rsp < top - LAYOUT_KSTACK_SIZE || r->rsp + (uint64_t)n * 8 > top)
		return -1;
	w = gmem_sys_ptr(c->mem, r->rsp, (uint64_t)n * 8);
	if (!w)
		return -1;
	f->has_error = n == 6;
	f->error = f->has_error ? w[0] : 0;
	w += n - 5;
	f->rip = w[0];
	f->cs = w[1];
	f->rflags = w[2];
	f->rsp = w[3];
	f->ss = w[4];
	return 0;
}

static void crash_print_regs(FILE *out, const struct cpu_regs *r, uint64_t rip, uint64_t rsp,
			     uint64_t rflags)
{
	fprintf(out,
		"  rip %016llx  rsp %016llx  rflags %016llx\n"
		"  rax %016llx  rbx %016llx  rcx %016llx  rdx %016llx\n"
		"  rsi %016llx  rdi %016llx  rbp %016llx  r8  %016llx\n"
		"  r9  %016llx  r10 %016llx  r11 %016llx  r12 %016llx\n"
		"  r13 %016llx  r14 %016llx  r15 %016llx\n",
		(unsigned long long)rip, (unsigned long long)rsp, (unsigned long long)rflags,
		(unsigned long long)r->rax, (unsigned long long)r->rbx, (unsigned long long)r->rcx,
		(unsigned long long)r->rdx, (unsigned long long)r->rsi, (unsigned long long)r->rdi,
		(unsigned long long)r->rbp, (unsigned long long)r->r8, (unsigned long long)r->r9,
		(unsigned long long)r->r10, (unsigned long long)r->r11, (unsigned long long)r->r12,
		(unsigned long long)r->r13, (unsigned long long)r->r14, (unsigned long long)r->r15);
}

int crash_report_exception(const struct crash_ctx *c, int vector)
{
	const struct cpu_regs *r = &c->view->regs;
	uint64_t cr2 = c->view->cr2;
	int sig = lx_fault_signal(vector);
	struct crash_frame f;
	char buf[2048];
	FILE *out;

	if (crash_read_frame(c, vector, &f))
		return crash_report_exit(c, "exception stub entered without a valid frame");
	out = fmemopen(buf, sizeof(buf), "w");
	if (!out)
		return 128 + sig;
	fprintf(out, "ccvm: guest program %s crashed: %s (vector %d)", c->exe ? c->exe : "?",
		crash_vector_name(vector), vector);
	if (f.has_error)
		fprintf(out, ", error code %#llx", (unsigned long long)f.error);
	fputc('\n', out);
	if (vector == X86_PF)
		fprintf(out, "  faulting address %#llx: %s %s, %s\n", (unsigned long long)cr2,
			(f.error & PF_ERR_ID) ? "instruction fetch" :
			(f.error & PF_ERR_W) ? "write" : "read",
			(f.error & PF_ERR_P) ? "protection violation" : "page not mapped",
			cr2 < LAYOUT_USER_BASE ? "below user memory (NULL pointer?)" :
			cr2 >= c->mem->size ? "above the end of guest RAM" :
							 "inside guest RAM");
	crash_print_regs(out, r, f.rip, f.rsp, f.rflags);
	fprintf(out, "  fs_base %016llx  cs %#llx  ss %#llx\n", (unsigned long long)c->view->segs.fs_base,
		(unsigned long long)f.cs, (unsigned long long)f.ss);
	if (c->child_pid)
		fprintf(out, "ccvm: process %d ends with %s; its parent goes on\n", c->child_pid,
			strsignal(sig));
	else
		fprintf(out, "ccvm: exiting with status %d (128 + %s)\n", 128 + sig, strsignal(sig));
	fclose(out);
	buf[sizeof(buf) - 1] = '\0';
	if (write(STDERR_FILENO, buf, strlen(buf)) < 0)
		return 128 + sig;
	return 128 + sig;
}

int crash_report_exit(const struct crash_ctx *c, const char *what)
{
	const struct cpu_exit *e = c->exit;
	const struct cpu_regs *r = &c->view->regs;

	log_err("guest stopped: %s (exit reason %u, cpl %u)", what, e->reason, c->view->cpl);
	if (e->kind == CPU_EXIT_INTERNAL)
		log_err("  internal error suberror %llu", (unsigned long long)e->detail);
	if (e->kind == CPU_EXIT_FAIL_ENTRY)
		log_err("  hardware entry failure reason %#llx", (unsigned long long)e->detail);
	crash_print_regs(stderr, r, r->rip, r->rsp, r->rflags);
	return 128 + SIGSEGV;
}

/*
 * mem.c - memory system calls: mmap, munmap, madvise, mremap, mprotect, brk.
 * Usage: mem FILE   (FILE is read through a private file mapping)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHECK(cond) do { if (!(cond)) { printf("FAIL line %d: %s (errno %d %s)\n", __LINE__, #cond, errno, strerror(errno)); return 1; } } while (0)
#define MIB (1024 * 1024)

static int all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static unsigned long sum(const unsigned char *p, size_t n)
{
	unsigned long s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

int main(int argc, char **argv)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *a, *b, *f;
	struct stat st;
	int fd;

	printf("page %ld\n", pg);
	a = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(a != MAP_FAILED);
	CHECK(((uintptr_t)a % pg) == 0);
	CHECK(all_zero(a, 8 * MIB));
	memset(a, 0xab, 8 * MIB);
	CHECK(madvise(a + MIB, 2 * MIB, MADV_DONTNEED) == 0);
	printf("dontneed zeroes: %d, neighbours kept: %d %d\n", all_zero(a + MIB, 2 * MIB),
	       a[MIB - 1] == 0xab, a[3 * MIB] == 0xab);
	CHECK(madvise(a, MIB, MADV_WILLNEED) == 0);
	CHECK(madvise(a, MIB, 12345) < 0 && errno == EINVAL);
	CHECK(mprotect(a, MIB, PROT_READ) == 0 && mprotect(a, MIB, PROT_READ | PROT_WRITE) == 0);

	CHECK(munmap(a + 4 * MIB, 4 * MIB) == 0);
	b = mmap(a + 4 * MIB, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(b == a + 4 * MIB);
	CHECK(all_zero(b, MIB));
	CHECK(mmap(a, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED && errno == EEXIST);
	CHECK(munmap(b, MIB) == 0);

	/* mremap: grow with move keeps contents; shrink keeps the head. */
	for (int i = 0; i < 4 * MIB; i++)
		a[i] = (unsigned char)(i * 7);
	unsigned long before = sum(a, 4 * MIB);
	b = mremap(a, 4 * MIB, 16 * MIB, MREMAP_MAYMOVE);
	CHECK(b != MAP_FAILED);
	printf("mremap grow keeps contents: %d, tail zero: %d\n", sum(b, 4 * MIB) == before, all_zero(b + 4 * MIB, 12 * MIB));
	a = mremap(b, 16 * MIB, 2 * MIB, 0);
	CHECK(a == b);
	CHECK(munmap(a, 2 * MIB) == 0);
	CHECK(munmap((void *)1, pg) < 0 && errno == EINVAL);
	CHECK(mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED && errno == EINVAL);

	/* private file mapping at an offset, then DONTNEED brings the file back */
	if (argc > 1) {
		fd = open(argv[1], O_RDONLY);
		CHECK(fd >= 0 && fstat(fd, &st) == 0);
		size_t len = (size_t)st.st_size;
		f = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		CHECK(f != MAP_FAILED);
		unsigned long fs = sum(f, len);
		memset(f, 0, len < 100 ? len : 100);
		CHECK(madvise(f, (len + pg - 1) / pg * pg, MADV_DONTNEED) == 0);
		printf("file mapping restored after DONTNEED: %d\n", sum(f, len) == fs);
		if (len > (size_t)pg) {
			unsigned char *g = mmap(NULL, len - pg, PROT_READ, MAP_PRIVATE, fd, pg);
			CHECK(g != MAP_FAILED);
			printf("offset mapping matches: %d\n", memcmp(g, f + pg, len - pg) == 0);
			munmap(g, len - pg);
		}
		munmap(f, len);
		close(fd);
	}

	/* brk, through the system call itself (musl's sbrk refuses to move the break) */
	uintptr_t cur = (uintptr_t)syscall(SYS_brk, 0);
	CHECK(cur != 0);
	CHECK((uintptr_t)syscall(SYS_brk, cur + 3 * MIB) == cur + 3 * MIB);
	memset((void *)cur, 0x5a, 3 * MIB);
	CHECK((uintptr_t)syscall(SYS_brk, cur + MIB) == cur + MIB);
	CHECK((uintptr_t)syscall(SYS_brk, cur + 3 * MIB) == cur + 3 * MIB);
	printf("brk keeps the kept part: %d, regrown part zero: %d\n", ((unsigned char *)cur)[MIB - 1] == 0x5a,
	       all_zero((unsigned char *)cur + MIB + pg, 2 * MIB - pg));
	CHECK((uintptr_t)syscall(SYS_brk, cur) == cur);

	/* malloc a lot and free it */
	for (int round = 0; round < 3; round++) {
		char *big = malloc(64 * MIB);
		CHECK(big != NULL);
		memset(big, round, 64 * MIB);
		free(big);
	}
	printf("mem ok\n");
	return 0;
}

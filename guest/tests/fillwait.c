/*
 * fillwait.c - fill N MiB with a pattern, say so, wait until stdin closes, then check
 * the pattern. Snapshotted while waiting and restored with stdin closed, it measures
 * how long a restore of N MiB takes, and checks what came back.
 * Usage: fillwait N
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64, words = mib << 17;
	uint64_t *m = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char buf[64];

	if (m == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < words; i++)
		m[i] = i * 0x9E3779B97F4A7C15ULL;
	printf("filled %zu MiB\n", mib);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	printf("resumed\n");
	fflush(stdout);
	for (size_t i = 0; i < words; i++)
		if (m[i] != i * 0x9E3779B97F4A7C15ULL) {
			printf("MISMATCH at word %zu\n", i);
			return 1;
		}
	printf("pattern intact\n");
	return 0;
}

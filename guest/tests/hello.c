/* hello.c - the smallest end-to-end check: argv, environment, stdout, exit status. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	const char *who = getenv("CCVM_TEST_WHO");

	printf("hello from %s, argc=%d\n", who ? who : "nobody", argc);
	for (int i = 1; i < argc; i++)
		printf("argv[%d]=%s\n", i, argv[i]);
	return argc > 1 ? atoi(argv[argc - 1]) & 0xff : 0;
}

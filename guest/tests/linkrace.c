/*
 * linkrace.c - a guest that races the monitor in a directory it may write (issue 29):
 * while the host takes snapshots into that directory, it plants symbolic links to a
 * file outside it under every name the monitor's writer uses there, over and over:
 * the temporary ".NAME.tmp.PID" (its getpid is the monitor's pid), any other
 * temporary it sees, and NAME itself. A monitor that ever follows one of those names
 * writes guest memory into the file outside. Prints "ready", then races until the
 * file STOP exists; prints how many links it planted.
 * Usage: linkrace DIR NAME TARGET STOP
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH_LEN 4096

/* Put a link to @target at @dir/@name, atomically over whatever is there. */
static int plant(const char *dir, const char *name, const char *target)
{
	char stage[PATH_LEN], at[PATH_LEN];

	snprintf(stage, sizeof(stage), "%s/.linkrace-stage", dir);
	snprintf(at, sizeof(at), "%s/%s", dir, name);
	unlink(stage);
	if (symlink(target, stage) != 0)
		return 0;
	return rename(stage, at) == 0;
}

/* Every temporary the writer has in @dir now (".NAME.tmp.*"). */
static long plant_seen(const char *dir, const char *name, const char *target)
{
	char prefix[PATH_LEN];
	struct dirent *de;
	long n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	snprintf(prefix, sizeof(prefix), ".%s.tmp.", name);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n += plant(dir, de->d_name, target);
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	char tmp[PATH_LEN];
	long planted = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: linkrace DIR NAME TARGET STOP\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(tmp, sizeof(tmp), ".%s.tmp.%d", argv[2], (int)getpid());
	printf("ready\n");
	while (access(argv[4], F_OK) != 0) {
		planted += plant(argv[1], tmp, argv[3]);
		planted += plant_seen(argv[1], argv[2], argv[3]);
		planted += plant(argv[1], argv[2], argv[3]);
	}
	printf("planted %ld links\n", planted);
	return 0;
}

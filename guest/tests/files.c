/*
 * files.c - file system calls, compared natively and in ccvm.
 * Usage: files DIR   (DIR must exist and be writable; the test works below it)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHECK(cond) do { if (!(cond)) { printf("FAIL line %d: %s (errno %d %s)\n", __LINE__, #cond, errno, strerror(errno)); return 1; } } while (0)

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	char path[512], path2[512], buf[256], cwd[512], link[512];
	struct stat st;
	int fd, fd2, p[2];

	if (argc < 2) {
		fprintf(stderr, "usage: files DIR\n");
		return 2;
	}
	CHECK(chdir(argv[1]) == 0);
	CHECK(mkdir("t", 0755) == 0);
	CHECK(mkdir("t", 0755) < 0 && errno == EEXIST);
	snprintf(path, sizeof(path), "t/a.txt");
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "hello world\n", 12) == 12);
	struct iovec iov[2] = { { "abc", 3 }, { "defg\n", 5 } };
	CHECK(writev(fd, iov, 2) == 8);
	CHECK(pwrite(fd, "H", 1, 0) == 1);
	CHECK(fsync(fd) == 0 && fdatasync(fd) == 0);
	CHECK(close(fd) == 0);
	CHECK(close(fd) < 0 && errno == EBADF);

	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(fstat(fd, &st) == 0);
	printf("size %lld mode %o regular %d\n", (long long)st.st_size, st.st_mode & 0777, S_ISREG(st.st_mode));
	memset(buf, 0, sizeof(buf));
	CHECK(read(fd, buf, 5) == 5);
	printf("read5 [%s]\n", buf);
	CHECK(lseek(fd, 0, SEEK_CUR) == 5);
	CHECK(lseek(fd, -3, SEEK_END) == 17);
	memset(buf, 0, sizeof(buf));
	CHECK(pread(fd, buf, 11, 0) == 11);
	printf("pread [%s]\n", buf);
	char a[4] = { 0 }, b[8] = { 0 };
	struct iovec riov[2] = { { a, 3 }, { b, 7 } };
	CHECK(lseek(fd, 12, SEEK_SET) == 12);
	CHECK(readv(fd, riov, 2) == 8);
	printf("readv [%s][%s]\n", a, b);
	CHECK(read(fd, buf, sizeof(buf)) == 0);

	fd2 = dup(fd);
	CHECK(fd2 > fd);
	CHECK(dup2(fd, 20) == 20);
	CHECK(dup3(fd, 21, O_CLOEXEC) == 21);
	CHECK(fcntl(21, F_GETFD) == FD_CLOEXEC);
	CHECK(fcntl(20, F_GETFD) == 0);
	CHECK(fcntl(fd, F_DUPFD, 30) == 30);
	CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
	CHECK(close(20) == 0 && close(21) == 0 && close(30) == 0 && close(fd2) == 0);
	CHECK(close(fd) == 0);

	CHECK(stat(path, &st) == 0 && st.st_size == 20);
	CHECK(access(path, R_OK) == 0);
	CHECK(access("t/missing", F_OK) < 0 && errno == ENOENT);
	CHECK(open("t/missing", O_RDONLY) < 0 && errno == ENOENT);
	CHECK(symlink("a.txt", "t/ln") == 0 || errno == ENOSYS);
	if (access("t/ln", F_OK) == 0) {
		ssize_t n = readlink("t/ln", link, sizeof(link) - 1);
		CHECK(n == 5);
		link[n] = 0;
		printf("readlink %s\n", link);
		CHECK(lstat("t/ln", &st) == 0 && S_ISLNK(st.st_mode));
		CHECK(unlink("t/ln") == 0);
	} else {
		printf("readlink a.txt\n");
	}

	snprintf(path2, sizeof(path2), "t/b.txt");
	CHECK(rename(path, path2) == 0);
	CHECK(stat(path, &st) < 0 && errno == ENOENT);
	fd = open(path2, O_RDWR);
	CHECK(fd >= 0 && ftruncate(fd, 4) == 0 && fstat(fd, &st) == 0 && st.st_size == 4);
	CHECK(close(fd) == 0);
	fd = openat(AT_FDCWD, "t/c.txt", O_CREAT | O_EXCL | O_WRONLY, 0600);
	CHECK(fd >= 0 && close(fd) == 0);
	CHECK(open("t/c.txt", O_CREAT | O_EXCL | O_WRONLY, 0600) < 0 && errno == EEXIST);

	int dfd = open("t", O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK(fstatat(dfd, "b.txt", &st, 0) == 0 && st.st_size == 4);
	CHECK(faccessat(dfd, "c.txt", W_OK, 0) == 0);
	CHECK(mkdirat(dfd, "sub", 0700) == 0);
	CHECK(renameat(dfd, "c.txt", dfd, "sub/c.txt") == 0);
	close(dfd);

	DIR *d = opendir("t");
	CHECK(d != NULL);
	char *names[16];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 16)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), cmp_names);
	printf("dir:");
	for (int i = 0; i < n; i++)
		printf(" %s", names[i]);
	printf("\n");

	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir("t/sub") == 0);
	CHECK(getcwd(buf, sizeof(buf)) != NULL);
	printf("cwd ends with t/sub: %d\n", strlen(buf) > 5 && strcmp(buf + strlen(buf) - 5, "t/sub") == 0);
	CHECK(chdir("../..") == 0);
	CHECK(getcwd(buf, sizeof(buf)) != NULL && strcmp(buf, cwd) == 0);

	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "pipe!", 5) == 5);
	memset(buf, 0, sizeof(buf));
	CHECK(read(p[0], buf, sizeof(buf)) == 5);
	printf("pipe [%s]\n", buf);
	CHECK(close(p[0]) == 0 && close(p[1]) == 0);

	CHECK(unlink("t/sub/c.txt") == 0);
	CHECK(rmdir("t/sub") == 0);
	CHECK(unlinkat(AT_FDCWD, "t/b.txt", 0) == 0);
	CHECK(rmdir("t") == 0);
	CHECK(rmdir("t") < 0 && errno == ENOENT);

	fd = open("/proc/self/exe", O_RDONLY);
	ssize_t m = readlink("/proc/self/exe", link, sizeof(link) - 1);
	CHECK(m > 0);
	link[m] = 0;
	printf("exe basename %s\n", strrchr(link, '/') + 1);
	if (fd >= 0)
		close(fd);
	printf("files ok\n");
	return 0;
}

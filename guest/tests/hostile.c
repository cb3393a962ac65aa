/*
 * hostile.c - a guest whose second thread rewrites the arguments of the first one's
 * system calls while they run: a path flips between a short name and 8 KiB without a
 * NUL, a msghdr's msg_iovlen between 1 and 2000 and its msg_namelen between 0 and
 * 65535. The first thread calls open, stat, sendmsg and recvmsg in a loop; every call
 * must return a result or one of the errors Linux gives for such arguments (EFAULT,
 * ENAMETOOLONG, EINVAL, EMSGSIZE, ENOENT, EAGAIN). The monitor reads each argument
 * once (ccvm's ASan build reports any access outside what it checked). Prints
 * "hostile ok" and exits 0, natively and in ccvm alike; otherwise names the call.
 * Usage: hostile [SECONDS]   (default 1)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define LONG_PATH 8192
#define MANY_IOV  2000

static char path[LONG_PATH + 64];
static size_t nul_at;
static struct iovec iov[MANY_IOV];
static char bufs[MANY_IOV];
static char first[4096];
static struct msghdr msg;
static struct sockaddr_storage name;
static volatile int stop;

static void *flipper(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !stop; i++) {
		__atomic_store_n(&path[nul_at], (i & 1) ? 'A' : '\0', __ATOMIC_RELAXED);
		__atomic_store_n(&msg.msg_iovlen, (i & 2) ? MANY_IOV : 1, __ATOMIC_RELAXED);
		__atomic_store_n(&msg.msg_namelen, (i & 4) ? 0xffffu : 0u, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int allowed(long r, const char *what)
{
	if (r >= 0)
		return 1;
	switch (errno) {
	case EFAULT: case ENAMETOOLONG: case EINVAL: case EMSGSIZE: case ENOENT: case EAGAIN:
		return 1;
	default:
		printf("FAIL %s: %s\n", what, strerror(errno));
		return 0;
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
	pthread_t th;
	struct stat st;
	int sv[2], ok = 1, fd;

	if (!getcwd(path, sizeof(path) - 8))
		return 2;
	strcat(path, "/f");
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 || socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		return 2;
	close(fd);
	nul_at = strlen(path);
	memset(path + nul_at, 'A', LONG_PATH);
	for (int i = 0; i < MANY_IOV; i++)
		iov[i] = (struct iovec){ .iov_base = i ? &bufs[i] : first,
					 .iov_len = i ? 1 : sizeof(first) };
	msg.msg_iov = iov;
	msg.msg_iovlen = 1;
	msg.msg_name = &name;
	pthread_create(&th, NULL, flipper, NULL);
	while (ok && now() < end) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		ok &= allowed(fd, "open");
		if (fd >= 0)
			close(fd);
		ok &= allowed(stat(path, &st), "stat");
		ok &= allowed(sendmsg(sv[0], &msg, MSG_DONTWAIT), "sendmsg");
		ok &= allowed(recvmsg(sv[1], &msg, MSG_DONTWAIT), "recvmsg");
	}
	stop = 1;
	pthread_join(th, NULL);
	path[nul_at] = '\0';
	unlink(path);
	if (ok)
		printf("hostile ok\n");
	return ok ? 0 : 1;
}

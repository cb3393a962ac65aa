/*
 * reach.c - what a guest may reach after a restore. It prints "ready", sleeps SECONDS
 * (the e2e test snapshots it then, with --rw DIR and --net host), then tries to create
 * DIR/after.txt and to connect a UDP socket to 198.51.100.1 (TEST-NET-2, an address for
 * documentation; a UDP connect only sets the destination and sends no packet), and
 * prints each result. Restored without --rw DIR and --net host, both must fail.
 * Usage: reach SECONDS DIR
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "report.h"

#define DOC_ADDR "198.51.100.1"
#define DOC_PORT 9 /* discard */

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(DOC_PORT) };
	char path[4096];
	int fd, s;

	if (argc != 3) {
		fprintf(stderr, "usage: reach SECONDS DIR\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	sleep((unsigned)atoi(argv[1]));
	snprintf(path, sizeof(path), "%s/after.txt", argv[2]);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	show("create after.txt", fd < 0 ? -1 : 0);
	if (fd >= 0)
		close(fd);
	inet_pton(AF_INET, DOC_ADDR, &a.sin_addr);
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	show("udp connect " DOC_ADDR, connect(s, (struct sockaddr *)&a, sizeof(a)));
	return 0;
}

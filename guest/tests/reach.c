/*
 * reach.c - what a guest may reach after a restore. It prints "ready", waits until
 * stdin closes (the e2e test snapshots it then, with --rw DIR and --net host, and
 * closes stdin when the snapshot is done; restored, stdin is new), then tries to create
 * DIR/after.txt and to connect a UDP socket to 198.51.100.1 (TEST-NET-2, an address for
 * documentation; a UDP connect only sets the destination and sends no packet), and
 * prints each result. Restored without --rw DIR and --net host, both must fail.
 * Usage: reach DIR
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "report.h"

#define DOC_ADDR "198.51.100.1"
#define DOC_PORT 9 /* discard */

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(DOC_PORT) };
	char path[4096], in[64];
	int fd, s;

	if (argc != 2) {
		fprintf(stderr, "usage: reach DIR\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (read(0, in, sizeof(in)) > 0)
		;
	snprintf(path, sizeof(path), "%s/after.txt", argv[1]);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	show("create after.txt", fd < 0 ? -1 : 0);
	if (fd >= 0)
		close(fd);
	inet_pton(AF_INET, DOC_ADDR, &a.sin_addr);
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	show("udp connect " DOC_ADDR, connect(s, (struct sockaddr *)&a, sizeof(a)));
	return 0;
}

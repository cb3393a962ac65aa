/*
 * imgcpu.c - the end-to-end suite's forger of an image that asks for every CPU
 * feature: the cpu features section (type 11) of IMAGE gets all its feature words set,
 * its checksum, the section table's and the trailer's made to match again, as anyone
 * could. A restore must then refuse the image by the feature this host lacks, not by a
 * checksum (checksums authenticate nothing). Usage: imgcpu IMAGE; exit 0 once done.
 */
#include "../../snapshot/image.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define TRAILER     48
#define TABLE_ENT   32
#define CPU_WORDS   8   /* after the u32 version: the feature words (vmm/cpufeat.h) */

static int forge(int fd, off_t size)
{
	uint8_t trailer[TRAILER], table[IMG_MAX_SECTIONS * TABLE_ENT], sec[256];
	uint64_t table_off, hash;
	uint32_t n;

	if (pread(fd, trailer, TRAILER, size - TRAILER) != TRAILER)
		return -1;
	memcpy(&table_off, trailer + 8, 8);
	memcpy(&n, trailer + 16, 4);
	table_off = le64toh(table_off);
	n = le32toh(n);
	if (n > IMG_MAX_SECTIONS || pread(fd, table, n * TABLE_ENT, (off_t)table_off) != (ssize_t)(n * TABLE_ENT))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = table + i * TABLE_ENT;
		uint64_t off, len;
		uint32_t type;

		memcpy(&type, e, 4);
		memcpy(&off, e + 8, 8);
		memcpy(&len, e + 16, 8);
		if (le32toh(type) != IMG_SEC_CPU || le64toh(len) > sizeof(sec))
			continue;
		len = le64toh(len);
		if (pread(fd, sec, len, (off_t)le64toh(off)) != (ssize_t)len)
			return -1;
		memset(sec + 4, 0xff, 4 * CPU_WORDS);
		hash = htole64(XXH3_64bits(sec, len));
		memcpy(e + 24, &hash, 8);
		if (pwrite(fd, sec, len, (off_t)le64toh(off)) != (ssize_t)len ||
		    pwrite(fd, table, n * TABLE_ENT, (off_t)table_off) != (ssize_t)(n * TABLE_ENT))
			return -1;
		uint8_t whole[IMG_MAX_SECTIONS * TABLE_ENT + 40];

		memcpy(whole, table, n * TABLE_ENT);
		memcpy(whole + n * TABLE_ENT, trailer, 40);
		hash = htole64(XXH3_64bits(whole, n * TABLE_ENT + 40));
		memcpy(trailer + 40, &hash, 8);
		return pwrite(fd, trailer, TRAILER, size - TRAILER) == TRAILER ? 0 : -1;
	}
	fprintf(stderr, "imgcpu: no cpu features section\n");
	return -1;
}

int main(int argc, char **argv)
{
	int fd, rc;
	off_t size;

	if (argc != 2) {
		fprintf(stderr, "usage: imgcpu IMAGE\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	size = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
	if (size < TRAILER) {
		perror(argv[1]);
		return 1;
	}
	rc = forge(fd, size);
	close(fd);
	if (rc)
		fprintf(stderr, "imgcpu: %s: cannot rewrite it\n", argv[1]);
	return rc ? 1 : 0;
}

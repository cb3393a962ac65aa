/*
 * cli.h - command-line parsing helpers that need no VM (unit-tested).
 */
#ifndef CCVM_CLI_H
#define CCVM_CLI_H

#include <stdint.h>

/* "512M", "1G", "4096K", "2097152": bytes. Returns 0 or -EINVAL (no digits, bad
 * suffix, overflow). */
int cli_parse_size(const char *s, uint64_t *bytes);

#endif

/*
 * persist_cpu.h - the CPU features an image's saved state may depend on: recorded at
 * capture, checked at restore (persist_cpu.c).
 */
#ifndef CCVM_PERSIST_CPU_H
#define CCVM_PERSIST_CPU_H

#include "vm.h"
#include "../snapshot/image.h"

#include <stddef.h>
#include <stdint.h>

/* The features @vm's guests are given, as the image section IMG_SEC_CPU: 0 or -errno
 * from the writer. */
int persist_cpu_capture(const struct vm *vm, struct img_writer *img);
/*
 * persist_cpu_check - may @vm (built on this host) run the state an image saved with
 * the section @sec (@len bytes; NULL: the image has none, as an older ccvm's)?
 *
 * Returns 0, -EINVAL for a section no ccvm writes, or -ENOTSUP naming the first
 * feature this host's guests lack; the reason in @err.
 */
int persist_cpu_check(const struct vm *vm, const void *sec, size_t len, char *err, size_t errlen);

#endif

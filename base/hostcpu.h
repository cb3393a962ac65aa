/*
 * hostcpu.h - how much of the host's CPU is idle: the time all its cores spent idle
 * or waiting for I/O, from /proc/stat (base/hostcpu.c). `--compress auto` compresses
 * during a snapshot only with CPU that would otherwise idle (snapshot/codec_auto.c).
 */
#ifndef CCVM_HOSTCPU_H
#define CCVM_HOSTCPU_H

#include <stdint.h>

/* Open /proc/stat once, before the monitor is confined (Landlock grants no /proc
 * beyond /proc/self afterwards). Later calls do nothing. Returns 0 or -errno. */
int hostcpu_open(void);

/* The host's idle time so far, all cores together, in nanoseconds (the kernel counts
 * it in clock ticks, 10 ms apart on our machines). Opens /proc/stat itself when
 * hostcpu_open was not called. Returns 0, or -errno (e.g. -EACCES where the monitor
 * was confined without it). */
int hostcpu_idle_ns(uint64_t *out);

#endif

/*
 * persist_capture.h - the snapshot engine's view of a running VM (struct snap_target).
 */
#ifndef CCVM_CAPTURE_H
#define CCVM_CAPTURE_H

#include "../snapshot/engine.h"

struct vm;

/* Fill @t so that the engine snapshots @vm: its RAM, its vCPUs paused and resumed,
 * their registers and the process state captured into each image. */
void capture_vm_target(struct vm *vm, struct snap_target *t);

/* The state sections an image of @vm holds besides its first process's memory (vCPUs,
 * processes, the other processes' memory, shared memory), captured into @img while the
 * caller has the VM paused: 0 or -errno. */
struct img_writer;
int capture_vm_sections(struct vm *vm, struct img_writer *img);

#endif

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

#endif

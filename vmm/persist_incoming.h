/*
 * persist_incoming.h - a VM restored from a migration stream (persist_incoming.c).
 */
#ifndef CCVM_PERSIST_INCOMING_H
#define CCVM_PERSIST_INCOMING_H

#include <stdbool.h>
#include <stdint.h>

struct vm;
struct restore_opts;

/* Listen on @where ("unix:PATH" or "tcp:ADDR:PORT"), take one migration stream and
 * build @vm from it under @o's policy, ready to run: 0 with the connection in *@conn
 * (the sender has heard READY), or -errno, reported (the sender heard why). A stream
 * that switches to post-copy leaves the rest of the memory coming on its own threads.
 * incoming_running: the sender hears RUNNING (or nothing, the VM not @started), and
 * the connection is closed unless post-copy still reads it. incoming_end, once the VM
 * ended: post-copy waited for (every page in) and let go of. */
int restore_vm_incoming(const char *where, const struct restore_opts *o, struct vm *vm,
			uint64_t *mono_ns, int *conn);
void incoming_running(int conn, bool started);
void incoming_end(void);

#endif

/*
 * fuzz_ctl.c - libFuzzer target: the control protocol parser (vmm/ctl_proto.c), one
 * request line as a client may send it, then the reply built for it, kill's SIGNAL
 * parser on the first argument of any request that has one, and the snapshot request's
 * fields (snapshot/request.c's table) as `ctl snapshot` reads them.
 */
#include "../../vmm/ctl_proto.h"
#include "../../vmm/control_impl.h"
#include "../../base/log.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_request req;
	char err[256];

	log_set_level(LOG_ERR);
	if (size >= CTL_MAX_LINE)
		return 0;
	if (ctl_parse((const char *)data, size, &req, err, sizeof(err)) == 0) {
		const char *arg = json_string_value(json_array_get(json_object_get(req.msg, "args"), 0));
		int sig;

		if (arg && ctl_signal_parse(arg, &sig) == 0 && (sig < 1 || sig > 64))
			abort(); /* a signal the guest cannot have */
		struct snap_request sr = { 0 };

		if (ctl_snapshot_fields(req.msg, &sr, err, sizeof(err)) == 0 && sr.threads &&
		    (sr.threads < 1 || sr.threads > SNAP_THREADS_MAX))
			abort(); /* a value the table bounds */
		free(ctl_reply_ok(json_pack("{s:s}", "cmd", ctl_cmd_name(req.cmd))));
		ctl_request_free(&req);
	} else {
		free(ctl_reply_error(err));
	}
	return 0;
}

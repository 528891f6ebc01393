/* main: the executable dpc builds, a client of dpc.h's API like any host program: one session with the
 * command line's options, run as they say (train, --eval or --gradcheck), closed. Under mpirun each rank
 * is such a process. Where the session's phases live: session.c (options, model, data, buffers),
 * train.c (the loop), report.c (what is printed and written), check.c (--gradcheck), ranks.c (mpirun),
 * api.c (the API itself). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpc.h"
#include "rt.h"

/* the error as rt_fail prints it where nothing traps it; a bad command line points to --help */
static int failed(DpcSession *s, int code)
{
	fprintf(stderr, "%s: error: %s\n", rt_prog, dpc_error(s));
	if (code == DPC_ERR_USAGE)
		fprintf(stderr, "(%s --help lists the options)\n", rt_prog);
	if (rt_fail_hook) /* under mpirun: the other ranks end too */
		rt_fail_hook(code);
	return code;
}

int main(int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');
	rt_prog = slash ? slash + 1 : argv[0];
	rt_executable = true;
	rt_dist_init(&argc, &argv);
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			rt_help();
			return 0;
		}
	DpcSession *s;
	int code = dpc_open(&s, argc - 1, (const char *const *)argv + 1);
	if (code == DPC_OK) {
		code = dpc_run(s);
		/* a status with no message: the run's own lines said why (a failed gradient check) */
		if (code != DPC_OK && dpc_error(s)[0])
			failed(s, code);
	} else {
		failed(s, code);
	}
	if (s && dpc_close(s) != DPC_OK && code == DPC_OK)
		code = failed(s, DPC_ERR_RUN);
	rt_dist_finish();
	return code;
}

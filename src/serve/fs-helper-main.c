/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cordon-fs-helper: performs one fs/... request of `cordon serve` inside
 * the sandbox of the request's context (fs.c spawns it, sandboxed, as pid
 * 1 of the sandbox's pid namespace, and executes it by descriptor). The
 * request arrives on stdin, the result goes out on stdout: both are the
 * server's socket (fs-ops.h has the wire). Its environment is empty and
 * its memory its own: what it can read of itself through /proc/self is
 * nothing of the server's.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include "serve/fs-ops.h"
#include "serve/server.h"

int main(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], CD_FS_HELPER_MAGIC) != 0) {
		fprintf(stderr, "%s: the fs helper of cordon serve; not for direct use\n",
			CD_FS_HELPER_PROGRAM);
		return 2;
	}
	/*
	 * Executed by descriptor (Linux), it would be named after the
	 * descriptor on some kernels: the name a cordon server recognizes the init of a
	 * sandbox's pid namespace by (sandboxes.h).
	 */
#ifdef __linux__
	(void)prctl(PR_SET_NAME, CD_FS_HELPER_PROGRAM, 0, 0, 0);
#endif
	struct cd_fs_req q;
	int e = cd_fs_req_recv(STDIN_FILENO, &q);
	if (e < 0) {
		fprintf(stderr, "%s: cannot read the request: %s\n", CD_FS_HELPER_PROGRAM,
			strerror(-e));
		return 3;
	}
	q.sandboxed = true;
	struct cd_fs_res r = { .fd = -1 };
	cd_fs_do(&q, &r);
	/*
	 * EROFS, the denial of the sandbox's read-only mounts, keeps its
	 * -32603: the released Codex binary answers a write outside the
	 * writable roots so (bubblewrap's read-only bind gives it EROFS too).
	 */
	e = cd_fs_res_send(STDOUT_FILENO, &r);
	cd_fs_req_done(&q);
	cd_strbuf_done(&r.out);
	return e < 0 ? 3 : 0;
}

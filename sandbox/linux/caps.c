/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Capabilities backend: the command starts with no capability at all
 * (effective, permitted, inheritable, ambient, and the bounding set when we
 * may change it).
 *
 * The child uses the raw capget/capset system calls on structures prepared
 * by the parent, not libcap's cap_set_proc(): libcap 2.66 may route the
 * call through its psx thread machinery, and the contract forbids library
 * calls between fork and exec.
 *
 * Without CAP_SETPCAP the bounding set cannot be dropped (PR_CAPBSET_DROP
 * gives EPERM). That is harmless: with an empty permitted set and
 * no_new_privs (set here too, and by the supervisor), execve can never add
 * a capability back, not even for uid 0 or a file with capabilities (the
 * kernel caps the new permitted set at the old one under no_new_privs).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT		 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

struct cd_backend_state {
	unsigned last_cap;
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct cleared[2];
	struct __user_cap_data_struct cur[2]; /* scratch for capget in the child */
};

static unsigned read_last_cap(void)
{
	char buf[32];
	ssize_t n;
	int fd;

	fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			unsigned v = 0;

			buf[n] = 0;
			if (sscanf(buf, "%u", &v) == 1 && v < 64)
				return v;
		}
	}
	return CAP_LAST_CAP;
}

static int caps_prepare(const struct cd_linux_plan *lp, struct cd_backend_state **ret_state,
			char **reterr)
{
	struct cd_backend_state *s;

	*ret_state = NULL;
	if (!lp->sandboxed)
		return 0;
	s = cd_xcalloc(1, sizeof(*s));
	/* Drop more than the kernel knows rather than fewer: EINVAL is ignored in apply. */
	s->last_cap = read_last_cap();
	if (s->last_cap < CAP_LAST_CAP)
		s->last_cap = CAP_LAST_CAP;
	s->hdr.version = _LINUX_CAPABILITY_VERSION_3;
	s->hdr.pid = 0;
	*ret_state = s;
	return 0;
}

static int caps_apply(struct cd_backend_state *s)
{
	bool have_setpcap;

	if (!s)
		return 0;

	s->hdr.version = _LINUX_CAPABILITY_VERSION_3;
	s->hdr.pid = 0;
	if (syscall(SYS_capget, &s->hdr, s->cur) < 0)
		return -errno;
	have_setpcap = s->cur[CAP_SETPCAP / 32].effective & (1u << (CAP_SETPCAP % 32));

	if (have_setpcap) {
		for (unsigned c = 0; c <= s->last_cap; c++) {
			if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
				return -errno;
		}
	}

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;

	s->hdr.version = _LINUX_CAPABILITY_VERSION_3;
	s->hdr.pid = 0;
	if (syscall(SYS_capset, &s->hdr, s->cleared) < 0)
		return -errno;

	/* See the top comment: this is what makes a kept bounding set harmless. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

static void caps_destroy(struct cd_backend_state *s)
{
	free(s);
}

const struct cd_backend cd_backend_caps = {
	.name = "capabilities",
	.prepare = caps_prepare,
	.apply = caps_apply,
	.finish = NULL,
	.destroy = caps_destroy,
};

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Finding the programs of this installation that cordon executes itself
 * (cordon-init, cordon-fs-helper): see cd_program_open in spawn.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif

#include "core/util.h"
#ifdef __linux__
#include "sandbox/linux/linux-util.h"
#endif
#include "spawn.h"

/*
 * macOS has no O_PATH: a program of cordon's own is readable, and on macOS
 * it is executed by its path anyway (src/spawn-posix.c).
 */
#ifdef O_PATH
#define PROGRAM_OPEN_FLAGS (O_PATH | O_CLOEXEC)
#else
#define PROGRAM_OPEN_FLAGS (O_RDONLY | O_CLOEXEC)
#endif

/* An executable regular file at path: an O_PATH fd of it, or -errno. */
static int open_program(const char *path)
{
	int fd = open(path, PROGRAM_OPEN_FLAGS);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR)) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

/* The running program's path (resolved): 0, or -1. */
static int self_path(char self[PATH_MAX])
{
#ifdef __APPLE__
	char buf[PATH_MAX];
	uint32_t size = sizeof(buf);
	if (_NSGetExecutablePath(buf, &size) != 0 || !realpath(buf, self))
		return -1;
	return 0;
#else
	ssize_t n = readlink("/proc/self/exe", self, PATH_MAX - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	return 0;
#endif
}

int cd_program_open(const char *name, struct cd_program *ret, char **reterr)
{
	char self[PATH_MAX];
	cleanup_free char *beside = NULL;
	if (self_path(self) == 0) {
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			beside = cd_xasprintf("%s/%s", self, name);
			int fd = open_program(beside);
			if (fd >= 0) {
				*ret = (struct cd_program){ .fd = fd,
							    .path = cd_steal_pointer(&beside) };
				return 0;
			}
		}
	}
	cleanup_free char *installed = cd_xasprintf("%s/%s", CD_PKGLIBEXECDIR, name);
	int fd = open_program(installed);
	if (fd >= 0) {
		*ret = (struct cd_program){ .fd = fd, .path = cd_steal_pointer(&installed) };
		return 0;
	}
	if (reterr)
		*reterr = cd_xasprintf("cannot find %s (looked in %s%s%s): %s; it is part of "
				       "cordon: reinstall cordon, or run the build tree's cordon "
				       "from its own directory",
				       name, CD_PKGLIBEXECDIR, beside ? " and beside " : "",
				       beside ? self : "", strerror(-fd));
	return fd;
}

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

#ifndef __linux__
int cd_program_seal(struct cd_program *p, char **reterr)
{
	if (reterr)
		*reterr = cd_xasprintf("cannot copy %s into sealed memory: this host has no "
				       "memfd (it is Linux's)",
				       p->path);
	return -ENOTSUP;
}
#else
int cd_program_seal(struct cd_program *p, char **reterr)
{
	int e;
	char fdpath[64];
	/* For the tests: a host without executable memfds (vm.memfd_noexec=2). */
	if (cd_linux_test_disabled("seal")) {
		if (reterr)
			*reterr =
				cd_xasprintf("cannot copy %s into sealed memory: disabled for the "
					     "tests (CORDON_TEST_DISABLE=seal)",
					     p->path);
		return -ENOSYS;
	}
	/* The very file found (not whatever is at its path now). */
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", p->fd);
	int src = open(fdpath, O_RDONLY | O_CLOEXEC);
	const char *name = strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;
	if (src < 0) {
		e = errno;
		goto fail;
	}
	/*
	 * MFD_EXEC where the kernel knows it (6.3): a vm.memfd_noexec of 1
	 * would otherwise make the copy non-executable.
	 */
	int m = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (m < 0 && errno == EINVAL)
		m = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (m < 0) {
		e = errno;
		close(src);
		goto fail;
	}
	char buf[64 * 1024];
	ssize_t n;
	e = 0;
	while ((n = read(src, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(m, buf, (size_t)n) != n) {
			e = n < 0 ? errno : (errno ? errno : EIO);
			break;
		}
	}
	close(src);
	struct stat st;
	if (!e &&
	    (fcntl(m, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0 ||
	     fstat(m, &st) < 0 || !(st.st_mode & S_IXUSR)))
		e = errno ? errno : EACCES;
	if (e) {
		close(m);
		goto fail;
	}
	close(p->fd);
	p->fd = m;
	p->sealed = true;
	return 0;
fail:
	if (reterr)
		*reterr =
			cd_xasprintf("cannot copy %s into sealed memory: %s", p->path, strerror(e));
	return -e;
}
#endif

void cd_program_done(struct cd_program *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	free(p->path);
	p->path = NULL;
}

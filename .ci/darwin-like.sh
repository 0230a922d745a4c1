#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# gcc and glibc made to look like a Mac to cordon's code (HACKING.md):
#
#   .ci/darwin-like.sh DIR
#
# writes DIR/shadow and prints the compiler command to give configure as
# CC. With it the code sees __APPLE__ and __MACH__ instead of __linux__,
# glibc's headers without their GNU extensions (features.h is read before
# config.h asks for them), the headers macOS lacks as #error, and none of
# what glibc declares whatever is asked and macOS does not have:
# SOCK_CLOEXEC, SOCK_NONBLOCK, MSG_CMSG_CLOEXEC, __WALL, __WCLONE and the
# socket options SO_PEERCRED, SO_PEERGROUPS, SO_DOMAIN, SO_PEERPIDFD and
# SO_PEERSEC. What macOS declares by default and glibc only with
# extensions is declared again by the prelude
# (darwin-like.h), with macOS's names where they differ (st_mtimespec),
# and what glibc lacks altogether (getpeereid) is a stand-in that fails.
# A Linux-only call or header then fails to build (<malloc.h>,
# <sys/sysinfo.h> and explicit_bzero among them; not a use of struct stat's
# st_mtim, which glibc's own st_mtime needs). It is no macOS SDK: it cannot
# tell what macOS has that glibc lacks.

set -eu
dir=${1:?usage: darwin-like.sh DIR}
shadow=$dir/shadow
mkdir -p "$shadow/sys" "$shadow/linux" "$shadow/bits"

for h in sys/epoll.h sys/signalfd.h sys/timerfd.h sys/eventfd.h sys/inotify.h \
	sys/prctl.h sys/fsuid.h sys/sendfile.h sys/pidfd.h sys/sysmacros.h \
	sys/personality.h sys/vfs.h sys/statfs.h sys/capability.h sys/random.h \
	seccomp.h linux/landlock.h linux/seccomp.h linux/filter.h linux/audit.h \
	linux/netlink.h linux/rtnetlink.h linux/if_link.h linux/capability.h \
	linux/io_uring.h linux/magic.h linux/inet_diag.h linux/sock_diag.h \
	linux/sockios.h linux/sched.h linux/fs.h linux/mount.h linux/securebits.h \
	malloc.h sys/sysinfo.h; do
	echo "#error \"<$h> is Linux's: macOS has none\"" >"$shadow/$h"
done

# glibc's socket flags that macOS lacks, renamed away (found before glibc's own).
bits=$(printf '#include <sys/socket.h>\n' | gcc -xc -M - | tr ' \\' '\n\n' |
	sed -n 's|/socket_type\.h$||p' | head -n 1)
[ -f "$bits/socket.h" ] || { echo "darwin-like.sh: glibc's bits/socket.h not found" >&2; exit 1; }
sed -e 's/SOCK_CLOEXEC = /CD_DARWIN_NO_SOCK_CLOEXEC = /' -e '/#define SOCK_CLOEXEC/d' \
	-e 's/SOCK_NONBLOCK = /CD_DARWIN_NO_SOCK_NONBLOCK = /' -e '/#define SOCK_NONBLOCK/d' \
	"$bits/socket_type.h" >"$shadow/bits/socket_type.h"
# Netlink too, which glibc's PF_ROUTE aliases (macOS's routing socket is 17).
sed -e 's/MSG_CMSG_CLOEXEC\t= /CD_DARWIN_NO_MSG_CMSG_CLOEXEC = /' \
	-e '/#define MSG_CMSG_CLOEXEC/d' -e '/#define [AP]F_NETLINK/d' \
	-e 's/^#define PF_ROUTE.*/#define PF_ROUTE\t17/' "$bits/socket.h" >"$shadow/bits/socket.h"
for name in SOCK_CLOEXEC SOCK_NONBLOCK; do
	! grep -qw "$name" "$shadow/bits/socket_type.h" ||
		{ echo "darwin-like.sh: $name is still in bits/socket_type.h" >&2; exit 1; }
done
for name in MSG_CMSG_CLOEXEC AF_NETLINK PF_NETLINK; do
	! grep -qw "$name" "$shadow/bits/socket.h" ||
		{ echo "darwin-like.sh: $name is still in bits/socket.h" >&2; exit 1; }
done

# Linux's, in glibc's headers whatever is asked, and not macOS's: taken out.
asm=$(printf '#include <sys/socket.h>\n' | gcc -xc -M - | tr ' \\' '\n\n' |
	sed -n 's|/asm-generic/socket\.h$||p' | head -n 1)
[ -f "$asm/asm-generic/socket.h" ] ||
	{ echo "darwin-like.sh: asm-generic/socket.h not found" >&2; exit 1; }
mkdir -p "$shadow/asm-generic"
sed -E 's/^#define[ \t]+(SO_PEERCRED|SO_PEERGROUPS|SO_DOMAIN|SO_PEERPIDFD|SO_PEERSEC)\b.*//' \
	"$asm/asm-generic/socket.h" >"$shadow/asm-generic/socket.h"
sed -E 's/^#[ \t]*define[ \t]+(__WALL|__WCLONE)\b.*//' \
	"$bits/waitflags.h" >"$shadow/bits/waitflags.h"
for name in SO_PEERCRED SO_PEERGROUPS SO_DOMAIN SO_PEERPIDFD SO_PEERSEC; do
	! grep -qw "$name" "$shadow/asm-generic/socket.h" ||
		{ echo "darwin-like.sh: $name is still in asm-generic/socket.h" >&2; exit 1; }
done
! grep -qw __WALL "$shadow/bits/waitflags.h" ||
	{ echo "darwin-like.sh: __WALL is still in bits/waitflags.h" >&2; exit 1; }

# macOS's struct xucred (LOCAL_PEERCRED), for which glibc has no header.
cat >"$shadow/sys/ucred.h" <<'EOF'
#define XUCRED_VERSION 0
struct xucred {
	unsigned int cr_version;
	uid_t cr_uid;
	short cr_ngroups;
	gid_t cr_groups[16];
};
EOF

# macOS's sysctlbyname (glibc has no <sys/sysctl.h>): a stand-in that knows
# the two names cordon asks, as a Mac answers them (kern.maxfilesperproc at
# its default, 10240), so that the code using them runs here too.
cat >"$shadow/sys/sysctl.h" <<'EOF'
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
static inline int sysctlbyname(const char *name, void *old, size_t *oldlen, void *new,
			       size_t newlen)
{
	(void)new, (void)newlen;
	if (!strcmp(name, "hw.memsize") && old && *oldlen == sizeof(uint64_t)) {
		uint64_t v = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
		memcpy(old, &v, sizeof(v));
		return 0;
	}
	if (!strcmp(name, "kern.maxfilesperproc") && old && *oldlen == sizeof(int)) {
		int v = 10240;
		memcpy(old, &v, sizeof(v));
		return 0;
	}
	errno = ENOENT;
	return -1;
}
EOF

# macOS's _NSGetExecutablePath (src/program.c), with a stand-in that reads
# /proc/self/exe, so that the program links and runs.
mkdir -p "$shadow/mach-o"
cat >"$shadow/mach-o/dyld.h" <<'EOF'
#include <stdint.h>
#include <unistd.h>
static inline int _NSGetExecutablePath(char *buf, uint32_t *bufsize)
{
	ssize_t n = readlink("/proc/self/exe", buf, *bufsize);
	if (n < 0 || (uint32_t)n >= *bufsize)
		return -1;
	buf[n] = '\0';
	return 0;
}
EOF

cat >"$shadow/darwin-like.h" <<'EOF'
/* What macOS declares by default and glibc only with its extensions. */
#include <errno.h>
#include <features.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
void *memmem(const void *, size_t, const void *, size_t);
/* macOS's, which glibc lacks: a stand-in, so that the program links (it fails). */
static inline int getpeereid(int fd, uid_t *uid, gid_t *gid)
{
	(void)fd, (void)uid, (void)gid;
	errno = ENOSYS;
	return -1;
}
/*
 * libsystem_sandbox's sandbox_check (src/serve/sandboxes-mac.c), with a
 * stand-in: a process is sandboxed when its environment carries
 * CORDON_STANDIN_SANDBOXED=1, which the suite's stand-in for sandbox-exec
 * (tests/data/seatbelt-stand-in.sh) gives the command it runs.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
static inline int sandbox_check(pid_t pid, const char *operation, int type, ...)
{
	static const char mark[] = "CORDON_STANDIN_SANDBOXED=1";
	char path[64], buf[65536];
	(void)operation, (void)type;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
		if (!strcmp(buf + i, mark))
			return 1;
	return 0;
}
/* glibc's, not macOS's (which has memset_s): declared above, refused from here on. */
#pragma GCC poison explicit_bzero
int mkostemp(char *, int);
int posix_openpt(int);
int grantpt(int);
int unlockpt(int);
int ptsname_r(int, char *, size_t);
#define SOL_LOCAL      0
#define LOCAL_PEERCRED 0x001
#define LOCAL_PEERPID  0x002
#define SO_NWRITE     0x1024
#define SEEK_HOLE     3
#define SEEK_DATA     4
#define st_atimespec  st_atim
#define st_mtimespec  st_mtim
#define st_ctimespec  st_ctim
EOF

echo "gcc -U__linux__ -U__linux -Ulinux -U__gnu_linux__ -D__APPLE__=1 -D__MACH__=1" \
	"-I$shadow -include $shadow/darwin-like.h"

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Socket activation and readiness notification (sd-daemon.h), after the
 * documented protocols of sd_listen_fds(3) and sd_notify(3). cordon serves
 * one listener, so exactly one socket is accepted.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/util.h"
#include "serve/sd-daemon.h"
#include "shared/fd-util.h"

static const char *family_name(int family)
{
	switch (family) {
	case AF_UNIX:
		return "AF_UNIX";
	case AF_INET:
		return "AF_INET";
	case AF_INET6:
		return "AF_INET6";
#ifdef AF_NETLINK /* Linux's */
	case AF_NETLINK:
		return "AF_NETLINK";
#endif
	default:
		return "another family";
	}
}

static const char *type_name(int type)
{
	switch (type) {
	case SOCK_STREAM:
		return "a stream socket";
	case SOCK_DGRAM:
		return "a datagram socket";
	case SOCK_SEQPACKET:
		return "a seqpacket socket";
	default:
		return "a socket of another type";
	}
}

/* What fd is, for a refusal: NULL when it is a listening stream socket we serve. */
static char *check_listener(int fd, int *ret_family)
{
	struct stat st;
	int type = 0, acc = 0, family = 0;
	socklen_t len;

	if (fstat(fd, &st) < 0)
		return cd_xasprintf("descriptor %d is not open (%s)", fd, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return cd_xasprintf("descriptor %d is not a socket", fd);
	len = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return cd_xasprintf("descriptor %d: SO_TYPE: %s", fd, strerror(errno));
	/* The family from the address, not SO_DOMAIN, which macOS lacks. */
	struct sockaddr_storage ss = { 0 };
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return cd_xasprintf("descriptor %d: getsockname: %s", fd, strerror(errno));
	family = ss.ss_family;
	len = sizeof(acc);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0)
		return cd_xasprintf("descriptor %d: SO_ACCEPTCONN: %s", fd, strerror(errno));
	if (type != SOCK_STREAM)
		return cd_xasprintf("descriptor %d is %s, not a stream socket (ListenStream=)", fd,
				    type_name(type));
	if (family != AF_UNIX && family != AF_INET && family != AF_INET6)
		return cd_xasprintf("descriptor %d is a %s socket: cordon serves AF_UNIX (the "
				    "unix socket transport) and TCP (WebSocket) only",
				    fd, family_name(family));
	if (!acc)
		return cd_xasprintf("descriptor %d is a %s stream socket that is not listening "
				    "(a connection: the socket unit must not say Accept=yes)",
				    fd, family_name(family));
	*ret_family = family;
	return NULL;
}

int cd_sd_listen_fds(struct cd_sd_listen *ret, char **reterr)
{
	const char *spid = getenv("LISTEN_PID"), *sfds = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	uint64_t pid, n;

	memset(ret, 0, sizeof(*ret));
	ret->fd = -1;
	if (!spid || !sfds)
		return 0;
	if (cd_parse_u64(spid, &pid) < 0 || pid == 0 || pid > INT32_MAX) {
		*reterr = cd_xasprintf("LISTEN_PID='%s' is not a process id", spid);
		return -EINVAL;
	}
	/* Meant for another process (inherited through us): not an activation of ours. */
	if ((pid_t)pid != getpid())
		return 0;
	if (cd_parse_u64(sfds, &n) < 0) {
		*reterr = cd_xasprintf("LISTEN_FDS='%s' is not a number", sfds);
		return -EINVAL;
	}
	if (n == 0)
		return 0;
	if (n > 1) {
		*reterr = cd_xasprintf(
			"systemd passed %llu sockets (LISTEN_FDS), and cordon serve serves one: "
			"give its socket unit a single ListenStream= (one socket unit and service "
			"per listener)",
			(unsigned long long)n);
		return -EINVAL;
	}
	if (names) {
		/* One name per socket, ':'-separated: exactly one here. */
		if (strchr(names, ':') || strlen(names) >= sizeof(ret->name)) {
			*reterr =
				cd_xasprintf("LISTEN_FDNAMES='%s' does not name exactly one socket "
					     "of at most %zu bytes, as LISTEN_FDS=1 says",
					     names, sizeof(ret->name) - 1);
			return -EINVAL;
		}
		snprintf(ret->name, sizeof(ret->name), "%s", names);
	}
	int family = 0;
	char *why = check_listener(CD_SD_LISTEN_FDS_START, &family);
	if (why) {
		*reterr = cd_xasprintf("the socket systemd passed%s%s%s is refused: %s; cordon "
				       "serve takes one listening stream socket (ListenStream= "
				       "with a path or an address, Accept=no)",
				       ret->name[0] ? " ('" : "", ret->name,
				       ret->name[0] ? "')" : "", why);
		free(why);
		return -EINVAL;
	}
	ret->fd = CD_SD_LISTEN_FDS_START;
	ret->family = family;
	return 1;
}

int cd_sd_listen_done(const struct cd_sd_listen *act)
{
	int r = 0;

	(void)unsetenv("LISTEN_PID");
	(void)unsetenv("LISTEN_FDS");
	(void)unsetenv("LISTEN_FDNAMES");
	if (!act || act->fd < 0)
		return 0;
	int fdfl = fcntl(act->fd, F_GETFD);
	if (fdfl < 0 || fcntl(act->fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
		r = -errno;
	int fl = fcntl(act->fd, F_GETFL);
	if (r == 0 && (fl < 0 || fcntl(act->fd, F_SETFL, fl | O_NONBLOCK) < 0))
		r = -errno;
	return r;
}

int cd_sd_notify_take(char **ret_addr, char **reterr)
{
	const char *e = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;

	*ret_addr = NULL;
	if (!e || !*e) {
		(void)unsetenv("NOTIFY_SOCKET");
		return 0;
	}
	if (e[0] != '/' && e[0] != '@') {
		*reterr = cd_xasprintf("NOTIFY_SOCKET='%s' is neither an absolute path nor an "
				       "abstract socket name (@NAME)",
				       e);
		return -EINVAL;
	}
	if (strlen(e) >= sizeof(sun.sun_path) || (e[0] == '@' && !e[1])) {
		*reterr = cd_xasprintf("NOTIFY_SOCKET='%s' is %s", e,
				       e[1] ? "too long for a unix socket address"
					    : "an empty abstract name");
		return -EINVAL;
	}
	*ret_addr = cd_xstrdup(e);
	(void)unsetenv("NOTIFY_SOCKET");
	return 1;
}

int cd_sd_notify(const char *addr, const char *state)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t n = strlen(addr);

	if (n >= sizeof(sun.sun_path))
		return -EINVAL;
	memcpy(sun.sun_path, addr, n);
	/* "@name": the abstract namespace, whose addresses start with a NUL byte. */
	if (addr[0] == '@')
		sun.sun_path[0] = '\0';
	socklen_t len =
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (addr[0] == '@' ? 0 : 1));
	int fd = cd_socket(AF_UNIX, SOCK_DGRAM, 0, false);
	if (fd < 0)
		return -errno;
	ssize_t w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun, len);
	int e = errno;
	close(fd);
	if (w < 0)
		return -e;
	return (size_t)w == strlen(state) ? 0 : -EMSGSIZE;
}

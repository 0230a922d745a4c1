/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One RTM_GETROUTE request over rtnetlink, as `ip route get ADDR` makes:
 * the kernel answers with the route it would use (its type says whether it
 * delivers locally) or with an error when there is none.
 */
#include "config.h"

#include <errno.h>

#include "net/localroute.h"

#ifdef __linux__
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int cd_route_is_local(const struct cd_ipaddr *a)
{
	struct cd_ipaddr v4;
	if (cd_ipaddr_embedded_v4(a, &v4))
		a = &v4;
	size_t alen = a->family == 4 ? 4 : 16;
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attr[RTA_SPACE(16)];
	} req;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.rt)) + RTA_SPACE(alen);
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.rt.rtm_family = a->family == 4 ? AF_INET : AF_INET6;
	req.rt.rtm_dst_len = (unsigned char)(alen * 8);
	struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_LENGTH(sizeof(req.rt)));
	rta->rta_type = RTA_DST;
	rta->rta_len = RTA_LENGTH(alen);
	memcpy(RTA_DATA(rta), a->b, alen);

	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	/* The kernel answers at once; a bound on the wait all the same. */
	struct timeval tv = { .tv_sec = 2 };
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	union {
		struct nlmsghdr nh;
		char buf[8192];
	} ans;
	int r = -EIO;
	for (;;) {
		ssize_t n = recv(fd, &ans, sizeof(ans), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		bool mine = false;
		/* The messages received, walked without NLMSG_OK (it mixes signedness). */
		for (size_t off = 0; off + sizeof(struct nlmsghdr) <= (size_t)n;
		     off += NLMSG_ALIGN(((struct nlmsghdr *)(ans.buf + off))->nlmsg_len)) {
			struct nlmsghdr *nh = (struct nlmsghdr *)(ans.buf + off);
			if (nh->nlmsg_len < sizeof(*nh) || nh->nlmsg_len > (size_t)n - off)
				break;
			if (nh->nlmsg_seq != req.nh.nlmsg_seq)
				continue;
			mine = true;
			if (nh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(nh);
				if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					break;
				/*
				 * No route (or an unreachable, prohibit or
				 * blackhole one), or no such family in this
				 * kernel (IPv6 off): nothing here takes it.
				 */
				if (e->error == -ENETUNREACH || e->error == -EHOSTUNREACH ||
				    e->error == -EACCES || e->error == -EINVAL ||
				    e->error == -EAFNOSUPPORT)
					r = 0;
				else
					r = e->error < 0 ? e->error : -EIO;
			} else if (nh->nlmsg_type == RTM_NEWROUTE &&
				   nh->nlmsg_len >= NLMSG_LENGTH(sizeof(struct rtmsg))) {
				const struct rtmsg *rt = NLMSG_DATA(nh);
				r = rt->rtm_type == RTN_LOCAL ? 1 : 0;
			}
			break;
		}
		if (mine)
			break;
	}
	close(fd);
	return r;
}
#else /* !__linux__ */

/*
 * macOS would ask its routing socket (PF_ROUTE, RTM_GET) and read
 * RTF_LOCAL; that is not built, so no address can be told to be remote
 * and the callers refuse it (see localroute.h: an error counts as local).
 */
int cd_route_is_local(const struct cd_ipaddr *a)
{
	(void)a;
	return -ENOTSUP;
}
#endif

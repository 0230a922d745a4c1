/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/netaddr.h"
#include "core/socks5.h"
#include "core/util.h"
#include "net/audit.h"
#include "net/localroute.h"
#include "net/proxy.h"
#include "serve/loop.h"
#include "serve/workq.h"
#include "shared/fd-util.h"
#include "shared/log.h"

#define RELAY_BUF  (256 * 1024) /* each way: 512 KiB a tunnel */
#define MAX_ADDRS  16
#define METHOD_MAX 32	      /* bytes of a request method (the longest registered: 17) */
#define DRAIN_MAX  (4u << 20) /* bytes read and dropped after a refusal */
#define DRAIN_MS   2000	      /* ...or this long, so the client reads the refusal */

enum state {
	ST_HEAD,       /* reading the request head (or the SOCKS5 greeting and request) */
	ST_RESOLVING,  /* the lookup runs on a worker */
	ST_CONNECTING, /* non-blocking connect to the checked address */
	ST_RELAY,      /* bytes both ways */
	ST_REFUSING,   /* writing a refusal, then draining the client */
};

struct resolve_job;

struct pconn {
	struct cd_proxy *p;
	struct pconn *prev, *next;
	int cfd, ufd;
	struct cd_watch *cw, *uw;
	cd_loop_events cev, uev; /* what the watches ask for now (relay) */
	struct cd_timer *timer;
	enum state st;
	uint64_t last_ms; /* last byte relayed (idle timeout) */

	/* the client's bytes before the relay: the head, then what followed it */
	char *in;
	size_t in_len;
	bool socks5;
	bool socks_greeted; /* the method choice was answered */

	/* the request */
	char *method;
	char *host; /* normalised name or address text */
	unsigned port;
	bool host_is_ip;
	struct cd_ipaddr ip;
	bool allowed;
	char *rule;
	int status;
	char address[64];
	struct resolve_job *job;
	struct cd_strbuf fwd; /* what the upstream gets first (plain HTTP: the rewritten head) */
	bool http_plain;
	bool method_override; /* a method-override field (X-HTTP-Method-Override...) */
	uint64_t body_left;   /* plain HTTP: request body bytes still to forward */

	/* the relay: up is client -> upstream, down is upstream -> client */
	char *up, *down;
	size_t up_off, up_len, down_off, down_len;
	bool c_eof, u_eof, up_shut, down_shut;
	uint64_t sent, received;

	/* the refusal */
	struct cd_strbuf out;
	size_t out_off;
	size_t drained;
};

struct cd_proxy {
	struct cd_loop *loop;
	struct cd_workq *q;
	int lfd;
	struct cd_watch *lw;
	struct cd_timer *accept_retry;
	struct cd_proxy_opts o;
	struct sockaddr_storage self;
	unsigned n;
	struct pconn *conns;
};

struct resolve_job {
	struct cd_work work; /* first: the pool hands this back */
	struct pconn *c;     /* NULL once the connection went away */
	char *host;
	const char *map;
	bool self_wildcard; /* the proxy listens on a wildcard address */
	int err;	    /* 0, or an EAI_ code */
	size_t n;
	struct cd_ipaddr addrs[MAX_ADDRS];
	size_t n_local;
	struct cd_ipaddr *local; /* those of addrs the kernel routes to this host */
	int local_err;		 /* errno of a route that could not be asked */
};

static void conn_close(struct pconn *c);
static void on_client(struct cd_loop *l, int fd, cd_loop_events ev, void *data);
static void on_upstream(struct cd_loop *l, int fd, cd_loop_events ev, void *data);
static void relay_update(struct pconn *c);

void cd_proxy_opts_init(struct cd_proxy_opts *o)
{
	*o = (struct cd_proxy_opts){
		.max_header = 32 * 1024,
		.header_timeout_ms = 10000,
		.connect_timeout_ms = 10000,
		.idle_timeout_ms = 300000,
		.max_conns = 512,
	};
}

unsigned cd_proxy_connections(const struct cd_proxy *p)
{
	return p->n;
}

/* ---- addresses ---- */

static bool to_ipaddr(const struct sockaddr *sa, struct cd_ipaddr *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (sa->sa_family == AF_INET) {
		ret->family = 4;
		memcpy(ret->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		ret->family = 6;
		memcpy(ret->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return true;
	}
	return false;
}

static socklen_t to_sockaddr(const struct cd_ipaddr *a, unsigned port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == 4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		memcpy(&s4->sin_addr, a->b, 4);
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons((uint16_t)port);
	memcpy(&s6->sin6_addr, a->b, 16);
	return sizeof(*s6);
}

static bool same_ip(const struct cd_ipaddr *a, const struct cd_ipaddr *b)
{
	struct cd_ipaddr a4, b4;
	if (cd_ipaddr_embedded_v4(a, &a4))
		a = &a4;
	if (cd_ipaddr_embedded_v4(b, &b4))
		b = &b4;
	return a->family == b->family && memcmp(a->b, b->b, a->family == 4 ? 4 : 16) == 0;
}

static bool is_wildcard(const struct cd_ipaddr *a)
{
	static const unsigned char zero[16] = { 0 };
	return memcmp(a->b, zero, a->family == 4 ? 4 : 16) == 0;
}

/*
 * Why the proxy may not connect to a:port (a static string), or NULL.
 * local: those of the candidates that are this host's (resolve_run).
 */
static const char *addr_refusal(const struct cd_proxy *p, const struct cd_ipaddr *a, unsigned port,
				const struct cd_ipaddr *local, size_t n_local, bool *ret_by_cidr)
{
	struct cd_ipaddr self, v4;
	bool loopback = false;
	const char *why = cd_ipaddr_special(a, &loopback);
	bool is_local = loopback;
	/* ::ffff:0.0.0.0 connects to 0.0.0.0 as well */
	const struct cd_ipaddr *u = cd_ipaddr_embedded_v4(a, &v4) ? &v4 : a;

	*ret_by_cidr = false;
	/* 0.0.0.0 and :: reach this host: whatever a CIDR says (0.0.0.0/0...) */
	if (is_wildcard(u) || (u->family == 4 && u->b[0] == 0))
		return "an unspecified address (it reaches this host)";
	for (size_t i = 0; i < n_local && !is_local; i++)
		is_local = same_ip(&local[i], a);
	if (to_ipaddr((const struct sockaddr *)&p->self, &self)) {
		unsigned self_port =
			ntohs(p->self.ss_family == AF_INET
				      ? ((const struct sockaddr_in *)&p->self)->sin_port
				      : ((const struct sockaddr_in6 *)&p->self)->sin6_port);
		if (port == self_port && (same_ip(&self, a) || (is_wildcard(&self) && is_local)))
			return "the proxy's own listening address";
	}
	if (cd_netpolicy_cidr_for(p->o.policy, a)) {
		*ret_by_cidr = true;
		return NULL;
	}
	if (why)
		return why;
	if (is_local)
		return "an address of this host";
	return NULL;
}

/* ---- connections ---- */

static void on_timer(struct cd_loop *l, void *data);

static void arm_timer(struct pconn *c, uint64_t ms)
{
	if (c->timer)
		cd_loop_cancel_timer(c->p->loop, c->timer);
	c->timer = cd_loop_add_timer(c->p->loop, ms, on_timer, c);
}

static void set_events(struct cd_loop *l, struct cd_watch *w, cd_loop_events ev)
{
	if (w)
		cd_loop_mod_fd(l, w, ev);
}

static void conn_close(struct pconn *c)
{
	struct cd_proxy *p = c->p;
	struct cd_proxy_audit a = {
		.allowed = c->allowed,
		.socks5 = c->socks5,
		.method = c->method,
		.host = c->host,
		.port = c->port,
		.address = c->address[0] ? c->address : NULL,
		.rule = c->rule,
		.status = c->status,
		.sent = c->sent,
		.received = c->received,
		.tag = p->o.audit_tag,
	};
	/* a client that went away without asking anything decided nothing */
	if (c->method || c->status >= 0)
		cd_proxy_audit_write(&a, p->o.json_audit);

	if (c->timer)
		cd_loop_cancel_timer(p->loop, c->timer);
	cd_loop_del_fd(p->loop, c->cw);
	cd_loop_del_fd(p->loop, c->uw);
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	if (c->job)
		c->job->c = NULL; /* its done frees it */
	free(c->in);
	free(c->method);
	free(c->host);
	free(c->rule);
	free(c->fwd.buf);
	free(c->out.buf);
	free(c->up);
	free(c->down);
	if (c->prev)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	p->n--;
	free(c);
}

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 411:
		return "Length Required";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Error";
	}
}

static void http_refusal(struct cd_strbuf *sb, int status, const char *reason)
{
	cd_strbuf_printf(sb,
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\ncordon proxy: %s\n",
			 status, status_text(status), strlen(reason) + strlen("cordon proxy: \n"),
			 reason);
}

/*
 * Refuse: the answer (an HTTP status, or a SOCKS5 reply code when the
 * client speaks SOCKS5), then the client's further bytes are read and
 * dropped for a while so that it reads the answer (a close with unread
 * bytes would reset the connection). rule: what the audit line names
 * (NULL: the reason). Both copied.
 */
static void refuse(struct pconn *c, int status, int socks_reply, const char *reason,
		   const char *rule)
{
	char *copy = cd_xstrdup(rule ? rule : reason); /* rule may be c->rule */
	free(c->rule);
	c->rule = copy;
	c->allowed = false;
	if (c->job) {
		c->job->c = NULL; /* its done frees it */
		c->job = NULL;
	}
	c->out.len = 0;
	if (c->socks5) {
		c->status = socks_reply;
		if (c->socks_greeted) {
			const char r[10] = { 5, (char)socks_reply, 0, 1, 0, 0, 0, 0, 0, 0 };
			cd_strbuf_append_n(&c->out, r, sizeof(r));
		} else {
			cd_strbuf_append_n(&c->out, "\x05\xff", 2);
		}
	} else {
		c->status = status;
		http_refusal(&c->out, status, reason);
	}
	c->out_off = 0;
	c->st = ST_REFUSING;
	cd_loop_del_fd(c->p->loop, c->uw);
	c->uw = NULL;
	if (c->ufd >= 0) {
		close(c->ufd);
		c->ufd = -1;
	}
	set_events(c->p->loop, c->cw, CD_LOOP_OUT);
	arm_timer(c, DRAIN_MS);
}

static void refusing_io(struct pconn *c, cd_loop_events ev)
{
	if (c->out_off < c->out.len) {
		ssize_t w = write(c->cfd, c->out.buf + c->out_off, c->out.len - c->out_off);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (w <= 0) {
			conn_close(c);
			return;
		}
		c->out_off += (size_t)w;
		if (c->out_off < c->out.len)
			return;
		shutdown(c->cfd, SHUT_WR);
		set_events(c->p->loop, c->cw, CD_LOOP_IN);
		return;
	}
	if (ev & (CD_LOOP_IN | CD_LOOP_HUP)) {
		char buf[16384];
		ssize_t r = read(c->cfd, buf, sizeof(buf));
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r <= 0 || (c->drained += (size_t)r) > DRAIN_MAX)
			conn_close(c);
	}
}

static void on_timer(struct cd_loop *l, void *data)
{
	struct pconn *c = data;
	c->timer = NULL;
	switch (c->st) {
	case ST_HEAD:
		if (c->socks5) {
			refuse(c, 408, 1, "the SOCKS5 request was not complete in time",
			       "header timeout");
			return;
		}
		refuse(c, 408, 1, "the request head was not complete in time", "header timeout");
		return;
	case ST_RESOLVING:
	case ST_CONNECTING: {
		char *why = cd_xasprintf("%s:%u: no connection within %u ms", c->host, c->port,
					 c->p->o.connect_timeout_ms);
		refuse(c, 504, 6, why, NULL);
		free(why);
		return;
	}
	case ST_RELAY: {
		uint64_t idle = cd_loop_now_ms() - c->last_ms;
		if (idle < c->p->o.idle_timeout_ms) {
			arm_timer(c, c->p->o.idle_timeout_ms - idle);
			return;
		}
		conn_close(c);
		return;
	}
	case ST_REFUSING:
		conn_close(c);
		return;
	}
}

/* ---- the relay ---- */

static void relay_start(struct pconn *c)
{
	size_t cap = RELAY_BUF + c->fwd.len + c->in_len;
	c->st = ST_RELAY;
	c->allowed = true;
	c->up = cd_xmalloc(cap);
	c->down = cd_xmalloc(RELAY_BUF);
	c->up_len = 0;
	/* what the upstream gets first: the rewritten head (plain HTTP) */
	memcpy(c->up, c->fwd.buf ? c->fwd.buf : "", c->fwd.len);
	c->up_len = c->fwd.len;
	/* the client's bytes after its head or SOCKS5 request */
	size_t early = c->in_len;
	if (c->http_plain && early > c->body_left)
		early = c->body_left; /* past the body: not forwarded (one request a connection) */
	memcpy(c->up + c->up_len, c->in, early);
	c->up_len += early;
	if (c->http_plain)
		c->body_left -= early;
	c->in_len = 0;
	free(c->in); /* the head is done with */
	c->in = NULL;
	if (!c->http_plain) {
		/* the answer the client waits for */
		if (c->socks5) {
			const char r[10] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
			memcpy(c->down, r, sizeof(r));
			c->down_len = sizeof(r);
			c->status = 0;
		} else {
			static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
			memcpy(c->down, ok, strlen(ok));
			c->down_len = strlen(ok);
			c->status = 200;
		}
	}
	c->last_ms = cd_loop_now_ms();
	arm_timer(c, c->p->o.idle_timeout_ms);
	c->cev = c->uev = (cd_loop_events)~0u; /* unknown: set both */
	relay_update(c);
}

static bool reading_client(const struct pconn *c)
{
	return !c->c_eof && c->up_len == 0 && (!c->http_plain || c->body_left > 0);
}

static void relay_update(struct pconn *c)
{
	struct cd_loop *l = c->p->loop;
	/* a direction ends once its source ended and its buffer is written */
	if (c->c_eof && c->up_len == 0 && !c->up_shut) {
		shutdown(c->ufd, SHUT_WR);
		c->up_shut = true;
	}
	if (c->u_eof && c->down_len == 0 && !c->down_shut) {
		shutdown(c->cfd, SHUT_WR);
		c->down_shut = true;
	}
	/* plain HTTP: one request, so the answer's end is the connection's */
	if ((c->up_shut || c->http_plain) && c->down_shut) {
		conn_close(c);
		return;
	}
	/* only what changed: an epoll_ctl per event would halve the throughput */
	cd_loop_events cev = (reading_client(c) ? CD_LOOP_IN : 0) | (c->down_len ? CD_LOOP_OUT : 0);
	cd_loop_events uev =
		(!c->u_eof && c->down_len == 0 ? CD_LOOP_IN : 0) | (c->up_len ? CD_LOOP_OUT : 0);
	if (cev != c->cev) {
		set_events(l, c->cw, cev);
		c->cev = cev;
	}
	if (uev != c->uev) {
		set_events(l, c->uw, uev);
		c->uev = uev;
	}
}

/* 1: progress, 0: would block, -1: the connection is to be closed. */
static int relay_read(struct pconn *c, int fd, char *buf, size_t *len, size_t max, bool *eof)
{
	ssize_t r = read(fd, buf, max);
	if (r < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (r == 0)
		*eof = true;
	*len = (size_t)r;
	return 1;
}

static int relay_write(int fd, char *buf, size_t *off, size_t *len, uint64_t *count)
{
	ssize_t w = send(fd, buf + *off, *len - *off, MSG_NOSIGNAL);
	if (w < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	*off += (size_t)w;
	if (count)
		*count += (uint64_t)w;
	if (*off == *len)
		*off = *len = 0;
	return 1;
}

/*
 * Read from one side and write through to the other at once, a few times
 * while the other side takes it all: a round of the loop per chunk would
 * cost a third of the throughput. Bounded, so that a fast tunnel leaves
 * the loop to the other connections.
 */
#define RELAY_ROUNDS 8

static void relay_io(struct pconn *c, int fd, cd_loop_events ev)
{
	int r = 1;
	bool client = fd == c->cfd;

	if (client) {
		for (int k = 0;
		     k < RELAY_ROUNDS && (ev & (CD_LOOP_IN | CD_LOOP_HUP)) && reading_client(c);
		     k++) {
			size_t max = RELAY_BUF;
			if (c->http_plain && c->body_left < max)
				max = (size_t)c->body_left;
			r = relay_read(c, fd, c->up, &c->up_len, max, &c->c_eof);
			if (r <= 0 || c->up_len == 0)
				break;
			if (c->http_plain)
				c->body_left -= c->up_len;
			r = relay_write(c->ufd, c->up, &c->up_off, &c->up_len, &c->sent);
			if (r <= 0)
				break;
		}
		if (r >= 0 && (ev & CD_LOOP_OUT) && c->down_len)
			r = relay_write(fd, c->down, &c->down_off, &c->down_len, NULL);
	} else {
		for (int k = 0; k < RELAY_ROUNDS && (ev & (CD_LOOP_IN | CD_LOOP_HUP)) &&
				!c->u_eof && c->down_len == 0;
		     k++) {
			r = relay_read(c, fd, c->down, &c->down_len, RELAY_BUF, &c->u_eof);
			if (r <= 0 || c->down_len == 0)
				break;
			c->received += c->down_len;
			r = relay_write(c->cfd, c->down, &c->down_off, &c->down_len, NULL);
			if (r <= 0)
				break;
		}
		if (r >= 0 && (ev & CD_LOOP_OUT) && c->up_len)
			r = relay_write(fd, c->up, &c->up_off, &c->up_len, &c->sent);
	}
	if (r < 0) {
		conn_close(c);
		return;
	}
	c->last_ms = cd_loop_now_ms();
	relay_update(c);
}

/* ---- connecting ---- */

static void connect_done(struct pconn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		char *why = cd_xasprintf("%s:%u: connecting to %s failed: %s", c->host, c->port,
					 c->address, strerror(err));
		refuse(c, 502, err == ECONNREFUSED ? 5 : 4, why, NULL);
		free(why);
		return;
	}
	relay_start(c);
}

static void on_upstream(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct pconn *c = data;
	if (c->st == ST_CONNECTING)
		connect_done(c);
	else if (c->st == ST_RELAY)
		relay_io(c, fd, ev);
}

static void start_connect(struct pconn *c, const struct cd_ipaddr *a)
{
	struct sockaddr_storage ss;
	socklen_t len = to_sockaddr(a, c->port, &ss);
	int one = 1;

	cd_ipaddr_format(a, c->address, sizeof(c->address));
	c->ufd = cd_socket(ss.ss_family, SOCK_STREAM, 0, true);
	if (c->ufd < 0) {
		char *why = cd_xasprintf("socket: %s", strerror(errno));
		refuse(c, 502, 1, why, NULL);
		free(why);
		return;
	}
	setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->st = ST_CONNECTING;
	if (connect(c->ufd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		char *why = cd_xasprintf("%s:%u: connecting to %s failed: %s", c->host, c->port,
					 c->address, strerror(errno));
		refuse(c, 502, errno == ECONNREFUSED ? 5 : 4, why, NULL);
		free(why);
		return;
	}
	c->uw = cd_loop_add_fd(c->p->loop, c->ufd, CD_LOOP_OUT, on_upstream, c);
	set_events(c->p->loop, c->cw, 0);
	if (!c->uw) {
		refuse(c, 502, 1, "cannot watch the upstream connection", NULL);
		return;
	}
}

/* ---- resolving ---- */

static void lookup_map(struct resolve_job *j)
{
	/* "NAME=ADDR[+ADDR...],NAME=..." */
	size_t hl = strlen(j->host);
	const char *s = j->map;
	j->err = EAI_NONAME;
	while (*s) {
		const char *end = strchr(s, ',');
		size_t n = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', n);
		if (eq && (size_t)(eq - s) == hl && strncasecmp(s, j->host, hl) == 0) {
			const char *a = eq + 1, *stop = s + n;
			j->err = 0;
			while (a < stop && j->n < MAX_ADDRS) {
				const char *plus = memchr(a, '+', (size_t)(stop - a));
				size_t al = plus ? (size_t)(plus - a) : (size_t)(stop - a);
				char buf[64];
				if (al < sizeof(buf)) {
					memcpy(buf, a, al);
					buf[al] = '\0';
					if (cd_ipaddr_parse(buf, &j->addrs[j->n]) == 0)
						j->n++;
				}
				a += al + (plus ? 1 : 0);
			}
			if (j->n == 0)
				j->err = EAI_NONAME;
			return;
		}
		s += n + (end ? 1 : 0);
	}
}

static void resolve_run(struct cd_work *w)
{
	struct resolve_job *j = (struct resolve_job *)w;

	if (j->n == 0) { /* a name (an IP literal comes with its address) */
		if (j->map) {
			lookup_map(j);
		} else {
			struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
						  .ai_flags = AI_ADDRCONFIG };
			struct addrinfo *res = NULL;
			j->err = getaddrinfo(j->host, NULL, &hints, &res);
			for (struct addrinfo *ai = res; ai && j->n < MAX_ADDRS; ai = ai->ai_next)
				if (to_ipaddr(ai->ai_addr, &j->addrs[j->n]))
					j->n++;
			if (res)
				freeaddrinfo(res);
			if (j->err == 0 && j->n == 0)
				j->err = EAI_NONAME;
		}
	}
	/*
	 * Which of them are this host's, as the kernel routes them (a local
	 * route: an interface's address, or any of a range a local route
	 * covers, AnyIP, which no interface lists): that matters for a
	 * public address (one of ours is refused) and for the proxy's own
	 * port behind a wildcard listener; the special ranges are refused
	 * (or allowed by a CIDR) anyway.
	 */
	for (size_t i = 0; i < j->n && !j->local_err; i++) {
		if (!j->self_wildcard && cd_ipaddr_special(&j->addrs[i], NULL))
			continue;
		int r = cd_route_is_local(&j->addrs[i]);
		if (r < 0) {
			/* Refused below: one of ours would pass for a public address. */
			j->local_err = -r;
		} else if (r > 0) {
			j->local = cd_xreallocarray(j->local, j->n_local + 1, sizeof(*j->local));
			j->local[j->n_local++] = j->addrs[i];
		}
	}
}

static void resolve_done(struct cd_work *w)
{
	struct resolve_job *j = (struct resolve_job *)w;
	struct pconn *c = j->c;
	const char *first_why = NULL;
	size_t first_i = 0;

	if (!c)
		goto out;
	c->job = NULL;
	if (!w->ran) {
		refuse(c, 502, 1, "the proxy is stopping", NULL);
		goto out;
	}
	if (j->err) {
		char *why = cd_xasprintf("%s does not resolve: %s", c->host, gai_strerror(j->err));
		refuse(c, 502, 4, why, NULL);
		free(why);
		goto out;
	}
	if (j->local_err) {
		/* Fail closed: a destination that may be this host cannot be judged. */
		char *why = cd_xasprintf("the kernel's route to %s cannot be asked (%s), so it "
					 "cannot be told apart from this host's own addresses",
					 c->host, strerror(j->local_err));
		refuse(c, 502, 1, why, NULL);
		free(why);
		goto out;
	}
	for (size_t i = 0; i < j->n; i++) {
		bool by_cidr = false;
		const char *why =
			addr_refusal(c->p, &j->addrs[i], c->port, j->local, j->n_local, &by_cidr);
		if (!why) {
			if (by_cidr) {
				char buf[64];
				const struct cd_cidr *cidr =
					cd_netpolicy_cidr_for(c->p->o.policy, &j->addrs[i]);
				char *r = c->host_is_ip
						  ? cd_xasprintf("allow-cidr %s/%u",
								 cd_ipaddr_format(&cidr->addr, buf,
										  sizeof(buf)),
								 cidr->prefix)
						  : cd_xasprintf("%s, allow-cidr %s/%u", c->rule,
								 cd_ipaddr_format(&cidr->addr, buf,
										  sizeof(buf)),
								 cidr->prefix);
				free(c->rule);
				c->rule = r;
			}
			start_connect(c, &j->addrs[i]);
			goto out;
		}
		if (!first_why) {
			first_why = why;
			first_i = i;
		}
	}
	{
		char buf[64];
		cd_ipaddr_format(&j->addrs[first_i], buf, sizeof(buf));
		char *why = c->host_is_ip ? cd_xasprintf("%s is %s", buf, first_why)
					  : cd_xasprintf("%s resolves to %s, %s", c->host, buf,
							 first_why);
		char *rule = cd_xasprintf("address %s: %s", buf, first_why);
		snprintf(c->address, sizeof(c->address), "%s", buf);
		refuse(c, 403, 2, why, rule);
		free(why);
		free(rule);
	}
out:
	free(j->host);
	free(j->local);
	free(j);
}

static void start_resolve(struct pconn *c)
{
	struct resolve_job *j = cd_xcalloc(1, sizeof(*j));
	j->work.run = resolve_run;
	j->work.done = resolve_done;
	j->c = c;
	j->host = cd_xstrdup(c->host);
	j->map = c->p->o.resolve_map;
	struct cd_ipaddr self;
	j->self_wildcard =
		to_ipaddr((const struct sockaddr *)&c->p->self, &self) && is_wildcard(&self);
	if (c->host_is_ip) {
		j->addrs[0] = c->ip;
		j->n = 1;
	}
	c->st = ST_RESOLVING;
	set_events(c->p->loop, c->cw, 0);
	if (cd_workq_submit(c->p->q, &j->work) < 0) {
		free(j->host);
		free(j);
		refuse(c, 502, 1, "no worker thread for the lookup", NULL);
		return;
	}
	c->job = j;
	arm_timer(c, c->p->o.connect_timeout_ms);
}

/* ---- the decision ---- */

/* X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override: a method for the server to act on. */
static bool is_method_override(const char *name, size_t n)
{
	static const char *const fields[] = { "x-http-method-override", "x-http-method",
					      "x-method-override" };
	return cd_name_in(name, n, fields, CD_ARRAY_SIZE(fields));
}

/* The policy's verdict on c->host (set, normalised) and c->port. */
static void decide(struct pconn *c)
{
	const struct cd_netpolicy *pol = c->p->o.policy;
	struct in_addr legacy;

	if (pol->mode == CD_NETMODE_LIMITED) {
		if (c->socks5 || cd_streq(c->method, "CONNECT")) {
			refuse(c, 403, 2,
			       "mode limited: tunnels (CONNECT, SOCKS5) are refused, the proxy "
			       "cannot "
			       "see the methods inside them",
			       "mode limited");
			return;
		}
		/* The method a server acts on may be another one, named in a field. */
		if (c->method_override) {
			refuse(c, 403, 2,
			       "mode limited: a method-override field (X-HTTP-Method-Override "
			       "and the like) is refused",
			       "mode limited");
			return;
		}
		if (!cd_streq(c->method, "GET") && !cd_streq(c->method, "HEAD") &&
		    !cd_streq(c->method, "OPTIONS")) {
			char *why =
				cd_xasprintf("mode limited: method %s is refused (GET, HEAD and "
					     "OPTIONS only)",
					     c->method);
			refuse(c, 403, 2, why, "mode limited");
			free(why);
			return;
		}
	}
	if (c->port == 0) {
		refuse(c, 400, 1, "port 0", NULL);
		return;
	}
	if (c->host_is_ip) {
		const struct cd_cidr *cidr = cd_netpolicy_cidr_for(pol, &c->ip);
		if (!cidr) {
			char *why =
				cd_xasprintf("%s: an IP address is refused unless an allow-cidr "
					     "covers it",
					     c->host);
			refuse(c, 403, 2, why, "ip-literal (no allow-cidr)");
			free(why);
			return;
		}
		start_resolve(c);
		return;
	}
	if (inet_aton(c->host, &legacy)) {
		char *why = cd_xasprintf("%s: an IPv4 address in a legacy form", c->host);
		refuse(c, 400, 1, why, NULL);
		free(why);
		return;
	}
	char *rule = NULL;
	bool ok = cd_netpolicy_allows_name(pol, c->host, &rule);
	free(c->rule);
	c->rule = rule;
	if (!ok) {
		char *why = cd_xasprintf("%s is not allowed: %s", c->host, rule);
		refuse(c, 403, 2, why, rule);
		free(why);
		return;
	}
	start_resolve(c);
}

/* Set c->host (and ip) from a target host (IP literal in brackets for IPv6). */
static int set_host(struct pconn *c, const char *h, size_t n, const char **reterr)
{
	char buf[64];
	/*
	 * A SOCKS5 name carries its length, so it may hold a NUL; read as a C
	 * string it would be another name ("127.0.0.1\0x.com" an address).
	 */
	if (memchr(h, '\0', n)) {
		*reterr = "a name with a NUL byte";
		return -EINVAL;
	}
	if (n > 0 && h[0] == '[') {
		if (n < 3 || h[n - 1] != ']' || n - 2 >= sizeof(buf)) {
			*reterr = "a malformed IPv6 literal";
			return -EINVAL;
		}
		memcpy(buf, h + 1, n - 2);
		buf[n - 2] = '\0';
		if (cd_ipaddr_parse(buf, &c->ip) < 0 || c->ip.family != 6) {
			*reterr = "a malformed IPv6 literal";
			return -EINVAL;
		}
		c->host_is_ip = true;
		c->host = cd_xstrdup(cd_ipaddr_format(&c->ip, buf, sizeof(buf)));
		return 0;
	}
	if (n < sizeof(buf)) {
		memcpy(buf, h, n);
		buf[n] = '\0';
		if (!strchr(buf, ':') && cd_ipaddr_parse(buf, &c->ip) == 0) {
			c->host_is_ip = true;
			c->host = cd_xstrdup(buf);
			return 0;
		}
	}
	return cd_hostname_normalize(h, n, &c->host, reterr);
}

/* "host:port" or "host" (port: def, or required when def is 0). */
static int split_authority(const char *s, size_t n, unsigned def, size_t *ret_hostlen,
			   unsigned *ret_port)
{
	size_t hl = n;
	const char *colon = NULL;
	if (n > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb)
			return -EINVAL;
		hl = (size_t)(rb - s) + 1;
		if (hl < n) {
			if (s[hl] != ':')
				return -EINVAL;
			colon = s + hl;
		}
	} else {
		colon = memchr(s, ':', n);
		if (colon)
			hl = (size_t)(colon - s);
	}
	if (!colon) {
		if (def == 0)
			return -EINVAL;
		*ret_hostlen = hl;
		*ret_port = def;
		return 0;
	}
	const char *p = colon + 1, *end = s + n;
	unsigned port = 0;
	if (p == end || end - p > 5)
		return -EINVAL;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		port = port * 10 + (unsigned)(*p - '0');
	}
	if (port == 0 || port > 65535)
		return -EINVAL;
	*ret_hostlen = hl;
	*ret_port = port;
	return 0;
}

static bool is_tchar(char ch)
{
	unsigned char c = (unsigned char)ch;
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool hop_by_hop(const char *name, size_t n)
{
	static const char *const names[] = {
		"connection",
		"proxy-connection",
		"keep-alive",
		"proxy-authorization",
		"proxy-authenticate",
		"te",
		"trailer",
		"upgrade",
	};
	return cd_name_in(name, n, names, CD_ARRAY_SIZE(names));
}

/* The field names a Connection field lists: hop-by-hop too (RFC 9110, 7.6.1). */
#define CONN_TOKENS_MAX 32
struct conn_tokens {
	const char *s[CONN_TOKENS_MAX];
	size_t n[CONN_TOKENS_MAX];
	size_t count;
};

/*
 * Collect the tokens of every Connection field of the header lines between
 * s and end (each ending in CRLF). -1 past CONN_TOKENS_MAX.
 */
static int connection_tokens(const char *s, const char *end, struct conn_tokens *t)
{
	t->count = 0;
	for (const char *eol; s < end; s = eol + 2) {
		eol = memchr(s, '\r', (size_t)(end - s));
		if (!eol)
			break;
		const char *colon = memchr(s, ':', (size_t)(eol - s));
		if (!colon || colon - s != 10 || strncasecmp(s, "connection", 10) != 0)
			continue;
		for (const char *v = colon + 1; v < eol;) {
			const char *comma = memchr(v, ',', (size_t)(eol - v));
			const char *te = comma ? comma : eol;
			while (v < te && (*v == ' ' || *v == '\t'))
				v++;
			const char *ve = te;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if (ve > v) {
				if (t->count == CONN_TOKENS_MAX)
					return -1;
				t->s[t->count] = v;
				t->n[t->count++] = (size_t)(ve - v);
			}
			v = comma ? comma + 1 : eol;
		}
	}
	return 0;
}

static bool listed_in_connection(const struct conn_tokens *t, const char *name, size_t n)
{
	for (size_t i = 0; i < t->count; i++)
		if (t->n[i] == n && strncasecmp(t->s[i], name, n) == 0)
			return true;
	return false;
}

/* Parse the head (len bytes of c->in, its blank line included); refuse or decide. */
static void handle_head(struct pconn *c, size_t len)
{
	const char *s = c->in, *end = c->in + len;
	const char *eol = memchr(s, '\r', len);
	const char *err = NULL;
	size_t host_hdrs = 0, cl_hdrs = 0;
	const char *hostv = NULL;
	size_t hostv_len = 0;
	bool te = false;
	uint64_t cl = 0;
	bool http10;

	/* the request line: METHOD SP TARGET SP HTTP/1.x */
	const char *sp1 = memchr(s, ' ', (size_t)(eol - s));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == s || sp2 == sp1 + 1) {
		refuse(c, 400, 1, "a malformed request line", NULL);
		return;
	}
	for (const char *p = s; p < sp1; p++)
		if (!is_tchar(*p)) {
			refuse(c, 400, 1, "a malformed method", NULL);
			return;
		}
	/*
	 * The longest registered method has 17 bytes. A longer one is no
	 * method a server implements, and would crowd the audit line's host
	 * and rule out of its bounded length.
	 */
	if (sp1 - s > METHOD_MAX) {
		refuse(c, 501, 1, "a method longer than 32 bytes", NULL);
		return;
	}
	c->method = cd_xstrndup(s, (size_t)(sp1 - s));
	const char *target = sp1 + 1;
	size_t tlen = (size_t)(sp2 - target);
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f) {
			refuse(c, 400, 1, "a malformed request target", NULL);
			return;
		}
	size_t vlen = (size_t)(eol - sp2 - 1);
	if (vlen == 8 && memcmp(sp2 + 1, "HTTP/1.1", 8) == 0) {
		http10 = false;
	} else if (vlen == 8 && memcmp(sp2 + 1, "HTTP/1.0", 8) == 0) {
		http10 = true;
	} else {
		refuse(c, 400, 1, "not HTTP/1.1 or HTTP/1.0", NULL);
		return;
	}

	/* the target */
	bool connect = cd_streq(c->method, "CONNECT");
	const char *path = NULL;
	size_t path_len = 0, hl = 0;
	unsigned port = 0;
	if (connect) {
		if (split_authority(target, tlen, 0, &hl, &port) < 0) {
			refuse(c, 400, 1, "CONNECT needs HOST:PORT", NULL);
			return;
		}
		if (set_host(c, target, hl, &err) < 0) {
			char *why = cd_xasprintf("the target is %s", err);
			refuse(c, 400, 1, why, NULL);
			free(why);
			return;
		}
	} else {
		if (tlen >= 8 && strncasecmp(target, "https://", 8) == 0) {
			refuse(c, 400, 1, "an https:// target (TLS goes through CONNECT)", NULL);
			return;
		}
		if (tlen < 7 || strncasecmp(target, "http://", 7) != 0) {
			refuse(c, 400, 1,
			       "not a proxy request (an absolute http:// target or CONNECT "
			       "expected)",
			       NULL);
			return;
		}
		const char *auth = target + 7, *tend = target + tlen, *p = auth;
		while (p < tend && *p != '/' && *p != '?' && *p != '#')
			p++;
		if (memchr(auth, '@', (size_t)(p - auth))) {
			refuse(c, 400, 1, "user information in the target", NULL);
			return;
		}
		if (split_authority(auth, (size_t)(p - auth), 80, &hl, &port) < 0) {
			refuse(c, 400, 1, "a malformed host or port in the target", NULL);
			return;
		}
		if (set_host(c, auth, hl, &err) < 0) {
			char *why = cd_xasprintf("the target is %s", err);
			refuse(c, 400, 1, why, NULL);
			free(why);
			return;
		}
		path = p;
		path_len = (size_t)(tend - p);
		const char *hash = memchr(path, '#', path_len);
		if (hash)
			path_len = (size_t)(hash - path);
	}
	c->port = port;

	/* the header fields */
	struct conn_tokens listed;
	if (connection_tokens(eol + 2, end - 2, &listed) < 0) {
		refuse(c, 400, 1, "more than 32 field names listed in Connection", NULL);
		return;
	}
	struct cd_strbuf kept = { 0 };
	for (s = eol + 2; s < end - 2; s = eol + 2) {
		eol = memchr(s, '\r', (size_t)(end - s));
		if (*s == ' ' || *s == '\t') {
			err = "a folded header line (obs-fold)";
			break;
		}
		const char *colon = memchr(s, ':', (size_t)(eol - s));
		if (!colon || colon == s) {
			err = "a malformed header line";
			break;
		}
		for (const char *p = s; p < colon && !err; p++)
			if (!is_tchar(*p))
				err = "a malformed header name (whitespace before ':'?)";
		if (err)
			break;
		const char *v = colon + 1, *ve = eol;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		for (const char *p = v; p < ve && !err; p++)
			if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
				err = "a control character in a header value";
		if (err)
			break;
		size_t nl = (size_t)(colon - s), vl = (size_t)(ve - v);
		if (nl == 4 && strncasecmp(s, "host", 4) == 0) {
			host_hdrs++;
			hostv = v;
			hostv_len = vl;
		} else if (nl == 14 && strncasecmp(s, "content-length", 14) == 0) {
			uint64_t x = 0;
			if (vl == 0 || vl > 15) {
				err = "a malformed Content-Length";
				break;
			}
			for (const char *p = v; p < ve; p++) {
				if (*p < '0' || *p > '9') {
					err = "a malformed Content-Length";
					break;
				}
				x = x * 10 + (uint64_t)(*p - '0');
			}
			if (err)
				break;
			if (cl_hdrs++ > 0 && x != cl) {
				err = "Content-Length fields that differ (request smuggling)";
				break;
			}
			cl = x;
			if (cl_hdrs > 1)
				continue; /* one copy goes upstream */
		} else if (nl == 17 && strncasecmp(s, "transfer-encoding", 17) == 0) {
			te = true;
		} else if (is_method_override(s, nl)) {
			c->method_override = true;
		}
		if (hop_by_hop(s, nl) || listed_in_connection(&listed, s, nl))
			continue;
		cd_strbuf_append_n(&kept, s, (size_t)(eol - s));
		cd_strbuf_append(&kept, "\r\n");
	}
	if (!err && te && cl_hdrs)
		err = "both Content-Length and Transfer-Encoding (request smuggling)";
	if (!err && host_hdrs > 1)
		err = "more than one Host field";
	if (!err && host_hdrs == 0 && !http10 && !connect)
		err = "no Host field";
	if (!err && host_hdrs == 1) {
		/* the Host field must name the target */
		size_t hhl = 0;
		unsigned hport = 0;
		struct pconn tmp = { 0 };
		const char *herr = NULL;
		if (split_authority(hostv, hostv_len, connect ? port : 80, &hhl, &hport) < 0 ||
		    set_host(&tmp, hostv, hhl, &herr) < 0 || !cd_streq(tmp.host, c->host) ||
		    hport != port)
			err = "a Host field that does not name the request target";
		free(tmp.host);
	}
	if (err) {
		free(kept.buf);
		refuse(c, 400, 1, err, NULL);
		return;
	}
	if (te && !connect) {
		free(kept.buf);
		refuse(c, 411, 1, "a request body without Content-Length (not supported)", NULL);
		return;
	}

	/* what goes upstream: the origin-form request, Connection: close */
	if (!connect) {
		c->http_plain = true;
		c->body_left = cl;
		cd_strbuf_printf(&c->fwd, "%s ", c->method);
		if (path_len == 0 || path[0] == '?')
			cd_strbuf_append_c(&c->fwd, '/');
		cd_strbuf_append_n(&c->fwd, path, path_len);
		cd_strbuf_printf(&c->fwd, " HTTP/1.%c\r\n", http10 ? '0' : '1');
		if (host_hdrs == 0)
			cd_strbuf_printf(&c->fwd,
					 c->ip.family == 6 ? "Host: [%s]:%u\r\n"
							   : "Host: %s:%u\r\n",
					 c->host, port);
		cd_strbuf_append_n(&c->fwd, kept.buf ? kept.buf : "", kept.len);
		cd_strbuf_append(&c->fwd, "Connection: close\r\n\r\n");
	}
	free(kept.buf);

	/* keep what followed the head */
	memmove(c->in, c->in + len, c->in_len - len);
	c->in_len -= len;
	decide(c);
}

/*
 * SOCKS5 (RFC 1928, core/socks5.h): no authentication, CONNECT, a name
 * (socks5h) or an address; the same decision as an HTTP CONNECT.
 */
static void handle_socks(struct pconn *c)
{
	const char *err = NULL;
	char cmdbuf[16];
	if (!c->socks_greeted) {
		int used = cd_socks5_parse_greeting(c->in, c->in_len, &err);
		if (used == 0)
			return;
		if (used < 0) {
			refuse(c, 0, CD_SOCKS5_NO_ACCEPTABLE_METHOD, err, NULL);
			return;
		}
		/* two bytes on a fresh socket: they fit its buffer */
		if (send(c->cfd, "\x05\x00", 2, MSG_NOSIGNAL) != 2) {
			conn_close(c);
			return;
		}
		c->socks_greeted = true;
		memmove(c->in, c->in + used, c->in_len - (size_t)used);
		c->in_len -= (size_t)used;
	}
	struct cd_socks5_request rq;
	uint8_t reply = 0;
	int need = cd_socks5_parse_request(c->in, c->in_len, &rq, &reply, &err);
	if (need == 0)
		return;
	if (need < 0 && need != -EOPNOTSUPP) {
		refuse(c, 0, reply, err, NULL);
		return;
	}
	/* a refused command still names its target in the audit line */
	c->method = cd_xstrdup(cd_socks5_command_name(rq.cmd, cmdbuf, sizeof(cmdbuf)));
	c->port = rq.port;
	if (rq.atyp == CD_SOCKS5_ATYP_DOMAIN) {
		const char *herr = NULL;
		if (set_host(c, rq.name, rq.name_len, &herr) < 0) {
			if (need < 0) {
				refuse(c, 0, reply, err, NULL);
				return;
			}
			char *why = cd_xasprintf("SOCKS5: the target is %s", herr);
			refuse(c, 0, CD_SOCKS5_REP_NOT_ALLOWED, why, NULL);
			free(why);
			return;
		}
	} else {
		char buf[64];
		memset(&c->ip, 0, sizeof(c->ip));
		c->ip.family = rq.atyp == CD_SOCKS5_ATYP_IPV4 ? 4 : 6;
		memcpy(c->ip.b, rq.addr, rq.atyp == CD_SOCKS5_ATYP_IPV4 ? 4 : 16);
		c->host_is_ip = true;
		c->host = cd_xstrdup(cd_ipaddr_format(&c->ip, buf, sizeof(buf)));
	}
	if (need < 0) {
		refuse(c, 0, reply, err, NULL);
		return;
	}
	memmove(c->in, c->in + need, c->in_len - (size_t)need);
	c->in_len -= (size_t)need;
	decide(c);
}

/* Where the head ends (its blank line included), 0 when not yet, -1 on a bare LF. */
static ssize_t head_end(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\r' && i + 1 < n && s[i + 1] != '\n')
			return -1;
		if (s[i] != '\n')
			continue;
		if (i == 0 || s[i - 1] != '\r')
			return -1;
		if (i >= 3 && s[i - 2] == '\n' && s[i - 3] == '\r')
			return (ssize_t)i + 1;
	}
	return 0;
}

static void head_io(struct pconn *c)
{
	size_t cap = c->p->o.max_header + 1;
	ssize_t r = read(c->cfd, c->in + c->in_len, cap - c->in_len);
	if (r < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(c);
		return;
	}
	if (r == 0) {
		conn_close(c); /* went away before asking anything */
		return;
	}
	c->in_len += (size_t)r;
	if (c->in_len > 0 && (unsigned char)c->in[0] == 5) {
		if (!c->p->o.socks5) {
			refuse(c, 400, 1, "not an HTTP request (SOCKS5 is not enabled)", NULL);
			return;
		}
		c->socks5 = true;
	}
	if (c->socks5) {
		handle_socks(c);
		return;
	}
	if (!is_tchar(c->in[0])) {
		refuse(c, 400, 1, "not an HTTP request", NULL);
		return;
	}
	ssize_t e = head_end(c->in, c->in_len);
	if (e < 0) {
		refuse(c, 400, 1, "a CR or LF outside a CRLF line end", NULL);
		return;
	}
	if (e == 0) {
		if (c->in_len >= cap - 1) {
			char *why = cd_xasprintf("a request head larger than %zu bytes",
						 c->p->o.max_header);
			refuse(c, 431, 1, why, NULL);
			free(why);
		}
		return;
	}
	handle_head(c, (size_t)e);
}

static void on_client(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct pconn *c = data;
	switch (c->st) {
	case ST_HEAD:
		head_io(c);
		return;
	case ST_RELAY:
		relay_io(c, fd, ev);
		return;
	case ST_REFUSING:
		refusing_io(c, ev);
		return;
	case ST_RESOLVING:
	case ST_CONNECTING:
		return;
	}
}

/* ---- accepting ---- */

static void on_listen(struct cd_loop *l, int fd, cd_loop_events ev, void *data);

static void accept_resume(struct cd_loop *l, void *data)
{
	struct cd_proxy *p = data;
	p->accept_retry = NULL;
	set_events(l, p->lw, CD_LOOP_IN);
}

static void over_cap(struct cd_proxy *p, int fd)
{
	struct cd_strbuf sb = { 0 };
	char *why = cd_xasprintf("too many connections (%u at once)", p->o.max_conns);
	http_refusal(&sb, 503, why);
	(void)!send(fd, sb.buf, sb.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
	struct cd_proxy_audit a = { .rule = why, .status = 503, .tag = p->o.audit_tag };
	cd_proxy_audit_write(&a, p->o.json_audit);
	free(sb.buf);
	free(why);
}

static void on_listen(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	struct cd_proxy *p = data;
	for (int i = 0; i < 64; i++) {
		int cfd = cd_accept_nonblock(fd, NULL, NULL);
		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* out of descriptors: pause accepting rather than spin */
				set_events(l, p->lw, 0);
				if (!p->accept_retry)
					p->accept_retry =
						cd_loop_add_timer(l, 100, accept_resume, p);
			}
			return;
		}
		if (p->n >= p->o.max_conns) {
			over_cap(p, cfd);
			continue;
		}
		struct pconn *c = cd_xcalloc(1, sizeof(*c));
		int one = 1;
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->p = p;
		c->cfd = cfd;
		c->ufd = -1;
		c->status = -1;
		c->st = ST_HEAD;
		c->in = cd_xmalloc(p->o.max_header + 1);
		c->cw = cd_loop_add_fd(l, cfd, CD_LOOP_IN, on_client, c);
		c->next = p->conns;
		if (p->conns)
			p->conns->prev = c;
		p->conns = c;
		p->n++;
		if (!c->cw) {
			conn_close(c);
			continue;
		}
		arm_timer(c, p->o.header_timeout_ms);
	}
}

struct cd_proxy *cd_proxy_new(struct cd_loop *l, struct cd_workq *q, int listen_fd,
			      const struct cd_proxy_opts *o)
{
	struct cd_proxy *p = cd_xcalloc(1, sizeof(*p));
	socklen_t len = sizeof(p->self);
	p->loop = l;
	p->q = q;
	p->lfd = listen_fd;
	p->o = *o;
	if (getsockname(listen_fd, (struct sockaddr *)&p->self, &len) < 0) {
		free(p);
		return NULL;
	}
	p->lw = cd_loop_add_fd(l, listen_fd, CD_LOOP_IN, on_listen, p);
	if (!p->lw) {
		free(p);
		return NULL;
	}
	return p;
}

void cd_proxy_free(struct cd_proxy *p)
{
	if (!p)
		return;
	while (p->conns)
		conn_close(p->conns);
	if (p->accept_retry)
		cd_loop_cancel_timer(p->loop, p->accept_retry);
	cd_loop_del_fd(p->loop, p->lw);
	free(p);
}

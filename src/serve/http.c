/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef CD_HTTP
#include <curl/curl.h>
#endif

#include "core/netaddr.h"
#include "net/localroute.h"
#include "serve/budget.h"
#include "serve/http.h"
#include "serve/intent.h"
#include "serve/server.h"
#include "serve/testhook.h"
#include "shared/clock.h"
#include "shared/fd-util.h"
#include "shared/log.h"

/*
 * http/request (see http.h). The params are decoded here in every build,
 * with the released exec-server's messages; the transfer itself needs
 * libcurl, which only the dynamically linked server program (cordon-ws,
 * src/local.mk) has: `cordon serve --allow-http-request` executes it.
 */

/* ---- params ---- */

enum redirect_policy {
	REDIRECT_FOLLOW,
	REDIRECT_STOP,
};

struct http_params {
	const struct cd_json *method, *url, *headers, *body, *request_id;
	bool has_timeout;
	uint64_t timeout_ms;
	bool stream;
	enum redirect_policy redirect;
};

static void invalid(struct cd_conn *c, const char *id, char *msg)
{
	cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, msg);
	free(msg);
}

/*
 * "invalid type: ..., expected exp": the reference server decodes these
 * params from a JSON value, which names every number just "number".
 */
static char *bad_type(const struct cd_json *v, const char *exp)
{
	if (v->type == CD_JSON_NUMBER)
		return cd_xasprintf("invalid type: number, expected %s", exp);
	return cd_param_invalid(v, exp, NULL);
}

static int member_string(const struct cd_json *obj, const char *key, char **err)
{
	const struct cd_json *v = cd_json_get(obj, key);
	if (!v) {
		*err = cd_param_missing(key);
		return -EINVAL;
	}
	if (v->type != CD_JSON_STRING) {
		*err = bad_type(v, "a string");
		return -EINVAL;
	}
	return 0;
}

/* RFC 9110 tchar: what a method and a header name are made of. */
static bool is_token(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= 'A' && ch <= 'Z'))
			continue;
		if (!strchr("!#$%&'*+-.^_`|~", ch) || ch == 0)
			return false;
	}
	return true;
}

/* A header value as the reference server takes it: no control byte but tab. */
static bool is_header_value(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return false;
	}
	return true;
}

static int decode_headers(const struct cd_json *v, char **err)
{
	if (v->type != CD_JSON_ARRAY) {
		*err = bad_type(v, "a sequence");
		return -EINVAL;
	}
	for (size_t i = 0; i < v->u.arr.n; i++) {
		const struct cd_json *h = v->u.arr.items[i];
		if (h->type != CD_JSON_OBJECT) {
			*err = bad_type(h, "struct HttpHeader");
			return -EINVAL;
		}
		if (member_string(h, "name", err) < 0 || member_string(h, "value", err) < 0)
			return -EINVAL;
	}
	return 0;
}

/* The base64 decoder's first complaint, in the reference server's words. */
static char *base64_complaint(const char *s, size_t n)
{
	size_t pad = n; /* where the padding starts */
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			  (ch >= '0' && ch <= '9') || ch == '+' || ch == '/';
		if (ch == '=' && pad == n) {
			pad = i;
			continue;
		}
		if (ok && pad < n) /* data after padding: the padding is the bad symbol */
			return cd_xasprintf("Invalid symbol %u, offset %zu.", '=', pad);
		if (!ok && ch != '=')
			return cd_xasprintf("Invalid symbol %u, offset %zu.", ch, i);
	}
	if (n % 4 == 1)
		return cd_xstrdup("Invalid input length.");
	return cd_xstrdup("Invalid padding");
}

/*
 * Decode the members in the order they came (the reference server's serde
 * derive reports the first bad one), then the missing required ones.
 */
static int decode_params(const struct cd_json *params, struct http_params *p, char **err)
{
	memset(p, 0, sizeof(*p));
	if (cd_param_object(params, "struct HttpRequestParams", err) < 0)
		return -EINVAL;
	for (size_t i = 0; i < params->u.obj.n; i++) {
		const char *key = params->u.obj.members[i].key;
		const struct cd_json *v = params->u.obj.members[i].value;
		if (cd_streq(key, "method") || cd_streq(key, "url") || cd_streq(key, "requestId")) {
			if (v->type != CD_JSON_STRING) {
				*err = bad_type(v, "a string");
				return -EINVAL;
			}
			if (cd_streq(key, "method"))
				p->method = v;
			else if (cd_streq(key, "url"))
				p->url = v;
			else
				p->request_id = v;
		} else if (cd_streq(key, "headers")) {
			if (decode_headers(v, err) < 0)
				return -EINVAL;
			p->headers = v;
		} else if (cd_streq(key, "bodyBase64")) {
			if (v->type == CD_JSON_NULL)
				continue;
			if (v->type != CD_JSON_STRING) {
				*err = bad_type(v, "a string");
				return -EINVAL;
			}
			/* Decoded as it comes: a bad body beats a missing member. */
			unsigned char *data = NULL;
			size_t len = 0;
			if (cd_base64_decode(v->u.str.s, v->u.str.len, &data, &len) < 0) {
				*err = base64_complaint(v->u.str.s, v->u.str.len);
				return -EINVAL;
			}
			free(data);
			p->body = v;
		} else if (cd_streq(key, "timeoutMs")) {
			if (v->type == CD_JSON_NULL) {
				p->has_timeout = false;
				continue;
			}
			if (v->type != CD_JSON_NUMBER) {
				*err = bad_type(v, "u64");
				return -EINVAL;
			}
			if (cd_json_uint64(v, &p->timeout_ms) < 0) {
				*err = cd_xstrdup("invalid number");
				return -EINVAL;
			}
			p->has_timeout = true;
		} else if (cd_streq(key, "streamResponse")) {
			if (v->type != CD_JSON_TRUE && v->type != CD_JSON_FALSE) {
				*err = bad_type(v, "a boolean");
				return -EINVAL;
			}
			p->stream = v->type == CD_JSON_TRUE;
		} else if (cd_streq(key, "redirectPolicy")) {
			if (v->type != CD_JSON_STRING) {
				*err = bad_type(v, "string or map");
				return -EINVAL;
			}
			if (cd_streq(v->u.str.s, "follow") && !cd_json_string_has_nul(v)) {
				p->redirect = REDIRECT_FOLLOW;
			} else if (cd_streq(v->u.str.s, "stop") && !cd_json_string_has_nul(v)) {
				p->redirect = REDIRECT_STOP;
			} else {
				struct cd_strbuf sb = { 0 };
				cd_strbuf_append(&sb, "unknown variant `");
				cd_strbuf_append_n(&sb, v->u.str.s,
						   strnlen(v->u.str.s, v->u.str.len));
				cd_strbuf_append(&sb, "`, expected `follow` or `stop`");
				*err = cd_strbuf_steal(&sb);
				return -EINVAL;
			}
		}
		/* Unknown members are ignored, as the reference server does. */
	}
	if (!p->method) {
		*err = cd_param_missing("method");
		return -EINVAL;
	}
	if (!p->url) {
		*err = cd_param_missing("url");
		return -EINVAL;
	}
	if (!p->request_id) {
		*err = cd_param_missing("requestId");
		return -EINVAL;
	}
	if (!is_token(p->method->u.str.s, p->method->u.str.len)) {
		*err = cd_xstrdup("http/request method is invalid: invalid HTTP method");
		return -EINVAL;
	}
	return 0;
}

/* The checks after the URL's: header names and values. */
static int check_headers(const struct cd_json *headers, char **err)
{
	for (size_t i = 0; headers && i < headers->u.arr.n; i++) {
		const struct cd_json *name = cd_json_get(headers->u.arr.items[i], "name");
		const struct cd_json *value = cd_json_get(headers->u.arr.items[i], "value");
		if (!is_token(name->u.str.s, name->u.str.len)) {
			*err = cd_xstrdup(
				"http/request header name is invalid: invalid HTTP header "
				"name");
			return -EINVAL;
		}
		if (!is_header_value(value->u.str.s, value->u.str.len)) {
			struct cd_strbuf sb = { 0 };
			cd_strbuf_append(&sb, "http/request header value is invalid for ");
			cd_strbuf_append_n(&sb, name->u.str.s, name->u.str.len);
			cd_strbuf_append(&sb, ": failed to parse header value");
			*err = cd_strbuf_steal(&sb);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- the network policy ---- */

/*
 * Why a request may not connect to this address (a static string), or
 * NULL. Loopback only with --http-allow-loopback; the rest never. The
 * ranges are core/netaddr.c's, shared with the managed network's proxy.
 */
static const char *v4_refusal(uint32_t a, bool allow_loopback)
{
	bool loopback = false;
	const char *why = cd_ipv4_special(a, &loopback);
	if (loopback)
		return allow_loopback ? NULL
				      : "a loopback address (127.0.0.0/8; --http-allow-loopback "
					"allows it)";
	return why;
}

static const char *v6_refusal(const unsigned char *b, bool allow_loopback)
{
	bool loopback = false;
	const char *why = cd_ipv6_special(b, &loopback);
	if (!loopback)
		return why;
	if (!allow_loopback && why && cd_startswith(why, "a loopback address (127."))
		return "a loopback address (127.0.0.0/8; --http-allow-loopback allows it)";
	return allow_loopback ? NULL : "a loopback address (::1; --http-allow-loopback allows it)";
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

static bool is_wildcard(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &in6addr_any, 16) == 0;
}

static uint16_t port_of(const struct sockaddr *a)
{
	return ntohs(a->sa_family == AF_INET ? ((const struct sockaddr_in *)a)->sin_port
					     : ((const struct sockaddr_in6 *)a)->sin6_port);
}

/*
 * a with an IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address
 * it reaches, in out; other addresses as they are.
 */
static const struct sockaddr *unmapped(const struct sockaddr *a, struct sockaddr_storage *out)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
	struct sockaddr_in *s4 = (struct sockaddr_in *)out;
	if (a->sa_family != AF_INET6 || memcmp(s6->sin6_addr.s6_addr, mapped, 12) != 0)
		return a;
	memset(out, 0, sizeof(*out));
	s4->sin_family = AF_INET;
	s4->sin_port = s6->sin6_port;
	memcpy(&s4->sin_addr, s6->sin6_addr.s6_addr + 12, 4);
	return (const struct sockaddr *)out;
}

/*
 * Whether a (unmapped) reaches this host: a loopback address (all of
 * 127.0.0.0/8 reaches a wildcard listener, not only lo's 127.0.0.1), or
 * one the kernel routes to this host: an interface's address, or any of a
 * range a local route covers (AnyIP), which no interface lists. One
 * RTM_GETROUTE, answered at once. When the kernel cannot be asked: taken
 * for ours.
 */
static bool is_local(const struct sockaddr *a)
{
	bool found = false;
	struct cd_ipaddr ip = { 0 };
	if (a->sa_family == AF_INET) {
		cd_ipv4_special(ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr), &found);
		ip.family = 4;
		memcpy(ip.b, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else {
		cd_ipv6_special(((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr, &found);
		ip.family = 6;
		memcpy(ip.b, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
	return found || cd_route_is_local(&ip) != 0;
}

/*
 * Why a connection to sa is refused (a static string), or NULL. The
 * server's own WebSocket listener is refused whatever the options: a
 * request must not come back in as a client.
 */
static const char *addr_refusal(const struct cd_server *s, const struct sockaddr *sa)
{
	const char *why = NULL;
	if (sa->sa_family == AF_INET) {
		why = v4_refusal(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr),
				 s->opts.http_allow_loopback);
	} else if (sa->sa_family == AF_INET6) {
		why = v6_refusal(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr,
				 s->opts.http_allow_loopback);
	} else {
		return "not an internet address";
	}
	if (why)
		return why;
	/*
	 * An address of one of this host's interfaces reaches its local
	 * services (one bound to 0.0.0.0 answers on every address), as
	 * loopback does, and is refused with it.
	 */
	struct sockaddr_storage hs;
	if (!s->opts.http_allow_loopback && is_local(unmapped(sa, &hs)))
		return "an address of this host (its local services answer there)";
	/*
	 * The address bound (the options may say port 0), both compared
	 * in the IPv4 form of an IPv4-mapped address: ::ffff:127.0.0.1
	 * reaches a listener on 127.0.0.1.
	 */
	struct sockaddr_storage ss, lu, au;
	socklen_t len = sizeof(ss);
	const struct sockaddr *l = (const struct sockaddr *)&ss;
	if (s->opts.listen != CD_LISTEN_WS || s->listen_fd < 0 ||
	    getsockname(s->listen_fd, (struct sockaddr *)&ss, &len) < 0 ||
	    (l->sa_family != AF_INET && l->sa_family != AF_INET6) || port_of(l) != port_of(sa))
		return NULL;
	l = unmapped(l, &lu);
	sa = unmapped(sa, &au);
	if (same_addr(l, sa) || (is_wildcard(l) && is_local(sa)))
		return "this server's own listening address";
	return NULL;
}

#ifndef CD_HTTP

/* ---- without libcurl: decode, then refuse ---- */

/* Without a URL parser: the scheme (RFC 3986), which must be http or https. */
static int check_scheme(const struct cd_json *url, char **err)
{
	const char *u = url->u.str.s;
	size_t n = 0;
	while ((u[n] >= 'a' && u[n] <= 'z') || (u[n] >= 'A' && u[n] <= 'Z') ||
	       (n > 0 &&
		((u[n] >= '0' && u[n] <= '9') || u[n] == '+' || u[n] == '-' || u[n] == '.')))
		n++;
	if (n == 0 || u[n] != ':') {
		*err = cd_xstrdup("http/request url is invalid: relative URL without a base");
		return -EINVAL;
	}
	char *scheme = cd_xstrndup(u, n);
	for (size_t i = 0; i < n; i++)
		if (scheme[i] >= 'A' && scheme[i] <= 'Z')
			scheme[i] = (char)(scheme[i] - 'A' + 'a');
	if (!cd_streq(scheme, "http") && !cd_streq(scheme, "https")) {
		*err = cd_xasprintf("http/request only supports http and https URLs, got %s",
				    scheme);
		free(scheme);
		return -EINVAL;
	}
	free(scheme);
	return 0;
}

void cd_http_request(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct http_params p;
	char *err = NULL;
	if (decode_params(params, &p, &err) < 0 || check_scheme(p.url, &err) < 0 ||
	    check_headers(p.headers, &err) < 0) {
		invalid(c, id, err);
		return;
	}
	(void)addr_refusal;
	cd_conn_error(c, id, CD_RPC_INTERNAL,
		      "http/request failed: executor-side HTTP is off in this server (start "
		      "`cordon serve` with --allow-http-request to allow requests to public "
		      "addresses)");
}

void cd_http_conn_release(struct cd_conn *c)
{
}

void cd_http_conn_paused(struct cd_conn *c, bool paused)
{
}

void cd_http_server_stop(struct cd_server *s)
{
}

int cd_http_server_start(struct cd_server *s, char **err)
{
	return 0; /* this program refuses the requests themselves (cordon-ws serves them) */
}

#else /* CD_HTTP */

/* ---- with libcurl ---- */

struct http_req {
	struct http_req *prev, *next; /* H.reqs */
	struct cd_conn *conn;	      /* NULL: its connection is gone (removed after the call) */
	CURL *easy;
	CURLU *curlu;
	char *id;  /* the JSON-RPC id, as JSON text (owned) */
	char *rid; /* requestId (owned, decoded; may hold NULs) */
	size_t rid_len;
	bool stream;
	bool follow;
	bool answered;	  /* the response (or an error) was sent */
	bool head_done;	  /* the final response's header block ended */
	bool location;	  /* the header block being read has a Location */
	bool redirecting; /* the response is a redirect this request follows (r->next_u) */
	bool paused;	  /* the transfer was paused for back-pressure */
	bool too_big;	  /* a buffered body went over CD_HTTP_MAX_BODY or the memory budget */
	bool head_big;	  /* the headers went over CD_HTTP_MAX_HEADERS */
	bool finished;	  /* libcurl is done with it: freed by the next sweep */
	long status;
	struct cd_strbuf hraw; /* the header block being read: lower-case names and values */
	struct {
		size_t name, name_len, value, value_len; /* offsets into hraw */
	} hdr[CD_HTTP_MAX_HEADER_COUNT];
	unsigned n_hdr;
	size_t header_bytes;
	size_t mem;	    /* charged to the memory budget (buf) */
	unsigned char *buf; /* body bytes not sent yet (owned) */
	size_t len, cap;
	uint64_t seq; /* deltas sent */
	struct curl_slist *slist;
	unsigned char *body; /* the request body (owned) */
	size_t body_len;
	size_t body_mem;     /* charged to the memory budget (body) */
	char *method;	     /* the method of the next request made (owned) */
	char *location_sent; /* the Location of the response being read, as sent (owned) */
	CURLU *next_u;	     /* it, made absolute: where a followed redirect leads (owned) */
	unsigned redirects;
	uint64_t deadline_ms; /* timeoutMs: when the request as a whole fails; 0 for none */
	char *url;	      /* the URL as parsed, for messages (curl_free) */
	char refused[256];    /* why the policy refused a connection, or empty */
	char errbuf[CURL_ERROR_SIZE];
};

static struct {
	struct cd_server *srv;
	CURLM *multi;
	struct cd_timer *timer;
	struct http_req *reqs;
	unsigned in_curl; /* > 0: inside a libcurl call; handles are not removed then */
	bool resume;	  /* a connection's back-pressure ended inside a libcurl call */
} H;

static void free_req(struct http_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		H.reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	if (r->easy) {
		curl_multi_remove_handle(H.multi, r->easy);
		curl_easy_cleanup(r->easy);
	}
	curl_url_cleanup(r->curlu);
	curl_slist_free_all(r->slist);
	curl_free(r->url);
	cd_strbuf_done(&r->hraw);
	cd_mem_set(CD_MEM_FILES, &r->mem, 0);
	cd_mem_set(CD_MEM_FILES, &r->body_mem, 0);
	free(r->buf);
	free(r->body);
	free(r->method);
	free(r->location_sent);
	curl_url_cleanup(r->next_u);
	free(r->id);
	free(r->rid);
	free(r);
}

static void queue(struct cd_conn *c, struct cd_strbuf *sb)
{
	memcpy(cd_conn_out_reserve(c, sb->len), sb->buf, sb->len);
	cd_conn_out_commit(c, sb->len);
	cd_conn_kick(c);
}

static bool same_name(const struct http_req *r, unsigned i, unsigned j)
{
	return r->hdr[i].name_len == r->hdr[j].name_len &&
	       memcmp(r->hraw.buf + r->hdr[i].name, r->hraw.buf + r->hdr[j].name,
		      r->hdr[i].name_len) == 0;
}

/*
 * The headers as a JSON array, grouped by name in the order each name
 * first came, each name's values in order: as the reference server's
 * header map lists them.
 */
static void append_headers(struct cd_strbuf *sb, const struct http_req *r)
{
	bool first = true;
	cd_strbuf_append_c(sb, '[');
	for (unsigned i = 0; i < r->n_hdr; i++) {
		bool seen = false;
		for (unsigned j = 0; j < i && !seen; j++)
			seen = same_name(r, i, j);
		if (seen)
			continue;
		for (unsigned k = i; k < r->n_hdr; k++) {
			if (!same_name(r, i, k))
				continue;
			cd_strbuf_append(sb, first ? "{\"name\":" : ",{\"name\":");
			first = false;
			cd_strbuf_append_json_string(sb, r->hraw.buf + r->hdr[k].name,
						     r->hdr[k].name_len);
			cd_strbuf_append(sb, ",\"value\":");
			cd_strbuf_append_json_string(sb, r->hraw.buf + r->hdr[k].value,
						     r->hdr[k].value_len);
			cd_strbuf_append_c(sb, '}');
		}
	}
	cd_strbuf_append_c(sb, ']');
}

/* {"status":N,"headers":[...],"bodyBase64":"<body>"} as the request's result. */
static void send_result(struct http_req *r, const unsigned char *body, size_t n)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_printf(&sb, "{\"status\":%ld,\"headers\":", r->status);
	append_headers(&sb, r);
	cd_strbuf_append(&sb, ",\"bodyBase64\":\"");
	cd_strbuf_reserve(&sb, cd_base64_encoded_len(n) + 3);
	sb.len += cd_base64_encode(body, n, sb.buf + sb.len);
	cd_strbuf_append(&sb, "\"}");
	cd_conn_result(r->conn, r->id, sb.buf, sb.len);
	cd_strbuf_done(&sb);
	r->answered = true;
}

static void send_error(struct http_req *r, int code, const char *msg)
{
	cd_conn_error(r->conn, r->id, code, msg);
	r->answered = true;
}

/* One http/request/bodyDelta of n bytes from the front of buf (error: NULL or the failure). */
static void send_delta(struct http_req *r, size_t n, bool done, const char *error)
{
	struct cd_strbuf sb = { 0 };
	cd_strbuf_append(&sb, "{\"method\":\"http/request/bodyDelta\",\"params\":{\"requestId\":");
	cd_strbuf_append_json_string(&sb, r->rid, r->rid_len);
	cd_strbuf_printf(&sb, ",\"seq\":%" PRIu64 ",\"deltaBase64\":\"", ++r->seq);
	cd_strbuf_reserve(&sb, cd_base64_encoded_len(n) + 3);
	sb.len += cd_base64_encode(r->buf, n, sb.buf + sb.len);
	sb.buf[sb.len] = '\0';
	cd_strbuf_printf(&sb, "\",\"done\":%s,\"error\":", done ? "true" : "false");
	cd_strbuf_append_json_cstr(&sb, error);
	cd_strbuf_append(&sb, "}}\n");
	queue(r->conn, &sb);
	cd_strbuf_done(&sb);
	memmove(r->buf, r->buf + n, r->len - n);
	r->len -= n;
}

static void flush_deltas(struct http_req *r)
{
	while (r->len > 0 && r->conn && r->answered)
		send_delta(r, r->len < CD_HTTP_MAX_DELTA ? r->len : CD_HTTP_MAX_DELTA, false, NULL);
}

/* How much more memory appending n bytes takes (the buffer grows by doubling). */
static size_t body_growth(const struct http_req *r, size_t n)
{
	if (r->len + n <= r->cap)
		return 0;
	size_t cap = r->cap ? r->cap : 16384;
	while (cap < r->len + n)
		cap *= 2;
	return cap - r->cap;
}

static bool append_body(struct http_req *r, const char *p, size_t n)
{
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap : 16384;
		while (cap < r->len + n)
			cap *= 2;
		r->buf = cd_xrealloc(r->buf, cap);
		r->cap = cap;
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	cd_mem_set(CD_MEM_FILES, &r->mem, r->cap);
	return true;
}

static void head_final(struct http_req *r)
{
	long code = 0;
	if (r->head_done)
		return;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	r->status = code;
	r->head_done = true;
	if (r->stream && !r->answered && r->conn) {
		send_result(r, NULL, 0);
		cd_testhook_event("http-response rid=%.*s", (int)r->rid_len, r->rid);
	}
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *data)
{
	struct http_req *r = data;
	size_t n = size * nmemb;
	if (!r->conn)
		return 0; /* its connection is gone: abort */
	if (r->redirecting)
		return n; /* a followed redirect's body: not the answer */
	head_final(r);
	if (r->conn->output_paused) {
		if (!r->paused)
			cd_testhook_event("http-paused rid=%.*s", (int)r->rid_len, r->rid);
		r->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	/* A buffered body is charged to the memory budget: past it, the request fails. */
	if (!r->stream && (r->len + n > CD_HTTP_MAX_BODY || !cd_mem_room(body_growth(r, n)))) {
		r->too_big = true;
		return 0;
	}
	append_body(r, p, n);
	if (r->stream)
		while (r->len >= CD_HTTP_MAX_DELTA && r->conn)
			send_delta(r, CD_HTTP_MAX_DELTA, false, NULL);
	return n;
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char ch = s[i];
		size_t k;
		uint32_t cp;
		if (ch < 0x80) {
			i++;
			continue;
		} else if ((ch & 0xe0) == 0xc0) {
			k = 1;
			cp = ch & 0x1f;
		} else if ((ch & 0xf0) == 0xe0) {
			k = 2;
			cp = ch & 0x0f;
		} else if ((ch & 0xf8) == 0xf0) {
			k = 3;
			cp = ch & 0x07;
		} else {
			return false;
		}
		if (i + k >= n)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

/*
 * The Location read (r->location_sent) made absolute against the URL asked, as
 * libcurl would, into r->next_u; whether it could be (one that cannot is
 * no redirect to follow: the response is the answer). Any scheme: one but
 * http(s) then fails the next transfer (CURLOPT_PROTOCOLS_STR).
 */
static bool resolve_location(struct http_req *r)
{
	curl_url_cleanup(r->next_u);
	r->next_u = r->location_sent ? curl_url_dup(r->curlu) : NULL;
	if (r->next_u && curl_url_set(r->next_u, CURLUPART_URL, r->location_sent,
				      CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK)
		return true;
	curl_url_cleanup(r->next_u);
	r->next_u = NULL;
	return false;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *data)
{
	struct http_req *r = data;
	size_t n = size * nmemb, len = n;
	if (r->head_done)
		return n; /* trailers */
	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* A new response: an interim one's (1xx) or a followed redirect's go. */
		r->hraw.len = 0;
		r->n_hdr = 0;
		r->header_bytes = 0;
		r->location = false;
		r->redirecting = false;
		return n;
	}
	while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	if (len == 0) {
		long code = 0;
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code / 100 == 1)
			return n;
		/*
		 * The redirects the reference's client follows, and only
		 * those (libcurl would follow any 3xx but 304): followed by
		 * follow_redirect once this response has been read, its
		 * headers and body not the answer.
		 */
		if (r->follow && r->location &&
		    (code == 301 || code == 302 || code == 303 || code == 307 || code == 308) &&
		    resolve_location(r)) {
			r->redirecting = true;
			return n;
		}
		head_final(r);
		return n;
	}
	r->header_bytes += n;
	if (r->header_bytes > CD_HTTP_MAX_HEADERS) {
		r->head_big = true;
		return 0;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon || colon == p)
		return n;
	size_t nlen = (size_t)(colon - p);
	const char *v = colon + 1, *end = p + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (nlen == 8 && strncasecmp(p, "location", 8) == 0 && !r->location) {
		r->location = true;
		free(r->location_sent);
		r->location_sent = cd_xstrndup(v, (size_t)(end - v));
	}
	/* Values that are not UTF-8 are left out, as the reference server does. */
	if (!valid_utf8((const unsigned char *)v, (size_t)(end - v)))
		return n;
	if (r->n_hdr == CD_HTTP_MAX_HEADER_COUNT) {
		r->head_big = true;
		return 0;
	}
	r->hdr[r->n_hdr].name = r->hraw.len;
	r->hdr[r->n_hdr].name_len = nlen;
	for (size_t i = 0; i < nlen; i++)
		cd_strbuf_append_c(&r->hraw,
				   (char)((p[i] >= 'A' && p[i] <= 'Z') ? p[i] - 'A' + 'a' : p[i]));
	r->hdr[r->n_hdr].value = r->hraw.len;
	r->hdr[r->n_hdr].value_len = (size_t)(end - v);
	cd_strbuf_append_n(&r->hraw, v, (size_t)(end - v));
	r->n_hdr++;
	return n;
}

static curl_socket_t on_open(void *data, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct http_req *r = data;
	const char *why = addr_refusal(H.srv, &a->addr);
	if (why) {
		char text[INET6_ADDRSTRLEN] = "?";
		const void *in =
			a->family == AF_INET
				? (const void *)&((struct sockaddr_in *)&a->addr)->sin_addr
				: (const void *)&((struct sockaddr_in6 *)&a->addr)->sin6_addr;
		if (a->family == AF_INET || a->family == AF_INET6)
			inet_ntop(a->family, in, text, sizeof(text));
		snprintf(r->refused, sizeof(r->refused), "%s is %s", text, why);
		cd_log_debug("serve: http/request %s: refused: %s", r->url, r->refused);
		cd_testhook_event("http-refused addr=%s", text);
		return CURL_SOCKET_BAD;
	}
	int fd = cd_socket(a->family, a->socktype, a->protocol, false);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* Request fields a redirect to another origin leaves out, as the reference's client does. */
static const char *const sensitive_fields[] = { "authorization", "cookie", "cookie2",
						"proxy-authorization", "www-authenticate" };
/* The body's fields, left out when a redirect turns the request into a GET. */
static const char *const body_fields[] = { "content-type", "content-length", "transfer-encoding" };

/* Leave the request's header lines named in names out from now on. 0, or -ENOMEM. */
static int drop_headers(struct http_req *r, const char *const *names, size_t n)
{
	struct curl_slist *kept = NULL;
	for (struct curl_slist *l = r->slist; l; l = l->next) {
		/* "Name: value", or "Name;" for an empty value (setup_headers) */
		if (cd_name_in(l->data, strcspn(l->data, ":;"), names, n))
			continue;
		struct curl_slist *k = curl_slist_append(kept, l->data);
		if (!k) {
			curl_slist_free_all(kept);
			return -ENOMEM;
		}
		kept = k;
	}
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, kept);
	curl_slist_free_all(r->slist);
	r->slist = kept;
	return 0;
}

/* A URL's origin: [0] scheme, [1] host, [2] port (the scheme's default when none). */
enum {
	ORIGIN_SCHEME,
	ORIGIN_HOST,
	ORIGIN_PORT,
	ORIGIN_PARTS
};

/* The origin of u (curl_free each part; NULL where it has none). */
static void origin_of(CURLU *u, char *o[ORIGIN_PARTS])
{
	static const CURLUPart parts[ORIGIN_PARTS] = { CURLUPART_SCHEME, CURLUPART_HOST,
						       CURLUPART_PORT };
	for (size_t i = 0; i < ORIGIN_PARTS; i++)
		if (curl_url_get(u, parts[i], &o[i], i == ORIGIN_PORT ? CURLU_DEFAULT_PORT : 0) !=
		    CURLUE_OK)
			o[i] = NULL;
}

/*
 * The response read was a redirect to follow (r->next_u): make the next
 * request, as the reference's client (reqwest) does: 301, 302 and 303 turn
 * a method other than GET or HEAD into a GET without the body, 307 and 308
 * keep both; another origin gets none of the credentials' fields; the
 * Referer names where it came from (not from https to http); at most
 * CD_HTTP_MAX_REDIRECTS of them, within the request's timeoutMs as a
 * whole. The policy judges each connection again (on_open). NULL, or why
 * it failed (a static string).
 */
static const char *follow_redirect(struct http_req *r)
{
	long code = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (r->redirects == CD_HTTP_MAX_REDIRECTS)
		return "http/request failed: too many redirects";
	uint64_t left_ms = 0;
	if (r->deadline_ms) {
		uint64_t now = cd_mono_ms();
		if (now >= r->deadline_ms)
			return "http/request failed: route-aware request timed out";
		left_ms = r->deadline_ms - now;
	}
	curl_multi_remove_handle(H.multi, r->easy);
	if (code <= 303 && !cd_streq(r->method, "GET") && !cd_streq(r->method, "HEAD")) {
		free(r->method);
		r->method = cd_xstrdup("GET");
		cd_mem_set(CD_MEM_FILES, &r->body_mem, 0);
		free(r->body);
		r->body = NULL;
		r->body_len = 0;
		/* No pointer to the freed body left (POSTFIELDS makes a POST: HTTPGET after). */
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, NULL);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
		curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, NULL);
		curl_easy_setopt(r->easy, CURLOPT_HTTPGET, 1L);
		if (drop_headers(r, body_fields, CD_ARRAY_SIZE(body_fields)) < 0)
			return "http/request failed: out of memory";
	}
	/* Same scheme, host and port: what may see the request's credentials again. */
	char *from[ORIGIN_PARTS], *to[ORIGIN_PARTS];
	origin_of(r->curlu, from);
	origin_of(r->next_u, to);
	bool same = true;
	for (size_t i = 0; i < ORIGIN_PARTS; i++)
		same = same && from[i] && to[i] && strcasecmp(from[i], to[i]) == 0;
	bool downgrade = from[ORIGIN_SCHEME] && to[ORIGIN_SCHEME] &&
			 strcasecmp(from[ORIGIN_SCHEME], "https") == 0 &&
			 strcasecmp(to[ORIGIN_SCHEME], "http") == 0;
	for (size_t i = 0; i < ORIGIN_PARTS; i++) {
		curl_free(from[i]);
		curl_free(to[i]);
	}
	if (!same && drop_headers(r, sensitive_fields, CD_ARRAY_SIZE(sensitive_fields)) < 0)
		return "http/request failed: out of memory";
	curl_easy_setopt(r->easy, CURLOPT_REFERER, downgrade ? NULL : r->url);
	/* The handle points at the new URL before the old is freed. */
	curl_easy_setopt(r->easy, CURLOPT_CURLU, r->next_u);
	curl_url_cleanup(r->curlu);
	r->curlu = r->next_u;
	r->next_u = NULL;
	char *u = NULL;
	if (curl_url_get(r->curlu, CURLUPART_URL, &u, 0) == CURLUE_OK) {
		curl_free(r->url);
		r->url = u;
	}
	if (left_ms)
		curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS,
				 left_ms > LONG_MAX ? LONG_MAX : (long)left_ms);
	/* The header state starts again at the next status line (on_header). */
	r->refused[0] = '\0';
	r->errbuf[0] = '\0';
	r->redirects++;
	if (curl_multi_add_handle(H.multi, r->easy) != CURLM_OK)
		return "http/request failed: out of memory";
	return NULL;
}

/* A transfer ended: answer, or follow the redirect it read. Whether it goes on. */
static bool on_done(struct http_req *r, CURLcode res)
{
	if (!r->conn)
		return false;
	if (res == CURLE_OK && r->redirecting) {
		const char *why = follow_redirect(r);
		if (!why)
			return true;
		send_error(r, CD_RPC_INTERNAL, why);
		return false;
	}
	if (res == CURLE_OK) {
		head_final(r);
		if (!r->stream) {
			send_result(r, r->buf, r->len);
			return false;
		}
		flush_deltas(r);
		send_delta(r, 0, true, NULL);
		return false;
	}
	cd_log_debug("serve: http/request %s: %s: %s", r->url, curl_easy_strerror(res), r->errbuf);
	if (r->answered) {
		/* Streaming, the response sent: the last delta says it failed. */
		flush_deltas(r);
		send_delta(r, 0, true, "error decoding response body");
		return false;
	}
	struct cd_strbuf sb = { 0 };
	if (r->too_big) {
		cd_strbuf_printf(&sb,
				 "failed to read http/request response body: the body is over "
				 "cordon serve's %u MiB limit for a buffered response, or its "
				 "memory budget (--max-memory) (use streamResponse)",
				 CD_HTTP_MAX_BODY >> 20);
	} else if (r->head_big) {
		cd_strbuf_printf(&sb,
				 "http/request failed: the response headers are over cordon "
				 "serve's limits (%u KiB, %u headers)",
				 CD_HTTP_MAX_HEADERS >> 10, CD_HTTP_MAX_HEADER_COUNT);
	} else if (r->head_done && !r->stream) {
		cd_strbuf_append(&sb, "failed to read http/request response body: error decoding "
				      "response body");
	} else if (res == CURLE_TOO_MANY_REDIRECTS) {
		cd_strbuf_append(&sb, "http/request failed: too many redirects");
	} else if (res == CURLE_OPERATION_TIMEDOUT && !r->refused[0]) {
		/* One of the reference server's two wordings of it (the other is below). */
		cd_strbuf_append(&sb, "http/request failed: route-aware request timed out");
	} else {
		cd_strbuf_printf(&sb, "http/request failed: error sending request for url (%s)",
				 r->url);
		if (r->refused[0])
			cd_strbuf_printf(&sb, ": refused by cordon serve's network policy: %s",
					 r->refused);
	}
	send_error(r, CD_RPC_INTERNAL, sb.buf);
	cd_strbuf_done(&sb);
	return false;
}

static void resume_paused(void);

/*
 * After every libcurl call: finished transfers, partial bodies, then dead
 * requests. Answering may end a connection (a failed write), whose
 * requests are then only marked (conn NULL): nothing is freed until the
 * sweep at the end, outside every libcurl call and every walk of the list.
 */
static void after_curl(void)
{
	CURLMsg *m;
	int left;
	H.in_curl++;
	while ((m = curl_multi_info_read(H.multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct http_req *r = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		if (!on_done(r, m->data.result))
			r->finished = true;
	}
	for (struct http_req *r = H.reqs; r; r = r->next)
		if (r->conn && r->stream && !r->finished)
			flush_deltas(r);
	H.in_curl--;
	if (H.in_curl)
		return; /* the outermost call sweeps */
	for (struct http_req *r = H.reqs, *next; r; r = next) {
		next = r->next;
		if (!r->conn || r->finished)
			free_req(r);
	}
	if (H.resume) {
		H.resume = false;
		resume_paused();
	}
}

static void socket_action(curl_socket_t fd, int ev)
{
	int running;
	H.in_curl++;
	curl_multi_socket_action(H.multi, fd, ev, &running);
	H.in_curl--;
	after_curl();
}

static void on_fd(struct cd_loop *l, int fd, cd_loop_events ev, void *data)
{
	int what = 0;
	if (ev & CD_LOOP_IN)
		what |= CURL_CSELECT_IN;
	if (ev & CD_LOOP_OUT)
		what |= CURL_CSELECT_OUT;
	if (ev & CD_LOOP_HUP)
		what |= CURL_CSELECT_ERR;
	socket_action(fd, what);
}

static void on_timer(struct cd_loop *l, void *data)
{
	H.timer = NULL;
	socket_action(CURL_SOCKET_TIMEOUT, 0);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct cd_watch *w = socketp;
	struct cd_loop *loop = H.srv->loop;
	if (what == CURL_POLL_REMOVE) {
		if (w)
			cd_loop_del_fd(loop, w);
		curl_multi_assign(H.multi, fd, NULL);
		return 0;
	}
	cd_loop_events ev = 0;
	if (what & CURL_POLL_IN)
		ev |= CD_LOOP_IN;
	if (what & CURL_POLL_OUT)
		ev |= CD_LOOP_OUT;
	if (w) {
		cd_loop_mod_fd(loop, w, ev);
		return 0;
	}
	w = cd_loop_add_fd(loop, fd, ev, on_fd, NULL);
	if (!w)
		return -1;
	curl_multi_assign(H.multi, fd, w);
	return 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	if (H.timer) {
		cd_loop_cancel_timer(H.srv->loop, H.timer);
		H.timer = NULL;
	}
	if (timeout_ms >= 0)
		H.timer = cd_loop_add_timer(H.srv->loop, (uint64_t)timeout_ms, on_timer, NULL);
	return 0;
}

static int http_init(struct cd_server *s)
{
	if (H.multi)
		return 0;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	H.srv = s;
	H.multi = curl_multi_init();
	if (!H.multi)
		return -ENOMEM;
	curl_multi_setopt(H.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(H.multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	return 0;
}

int cd_http_server_start(struct cd_server *s, char **err)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	if (!v || !(v->features & CURL_VERSION_ASYNCHDNS)) {
		*err = cd_xstrdup(
			"--allow-http-request: this libcurl resolves names synchronously, "
			"which would hold the server's event loop; build cordon against a "
			"libcurl with the threaded or c-ares resolver");
		return -1;
	}
	if (http_init(s) < 0) {
		*err = cd_xstrdup("--allow-http-request: libcurl could not be set up");
		return -1;
	}
	return 0;
}

static const char *url_complaint(CURLUcode uc, const char *url)
{
	if ((uc == CURLUE_BAD_SCHEME || uc == CURLUE_MALFORMED_INPUT || uc == CURLUE_NO_SCHEME) &&
	    !strchr(url, ':'))
		return "relative URL without a base";
	if (uc == CURLUE_NO_HOST)
		return "empty host";
	if (uc == CURLUE_BAD_HOSTNAME)
		return "invalid international domain name";
	if (uc == CURLUE_BAD_IPV6)
		return "invalid IPv6 address";
	if (uc == CURLUE_BAD_PORT_NUMBER)
		return "invalid port number";
	return curl_url_strerror(uc);
}

static unsigned conn_requests(const struct cd_conn *c)
{
	unsigned n = 0;
	for (struct http_req *r = H.reqs; r; r = r->next)
		n += r->conn == c;
	return n;
}

static bool stream_active(const struct cd_conn *c, const struct cd_json *rid)
{
	for (struct http_req *r = H.reqs; r; r = r->next)
		if (r->conn == c && r->stream && r->rid_len == rid->u.str.len &&
		    memcmp(r->rid, rid->u.str.s, r->rid_len) == 0)
			return true;
	return false;
}

static void setup_method(struct http_req *r, const struct cd_json *method)
{
	const char *m = method->u.str.s;
	if (r->body) {
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, (char *)r->body);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		if (!cd_streq(m, "POST"))
			curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, m);
	} else if (cd_streq(m, "GET")) {
		curl_easy_setopt(r->easy, CURLOPT_HTTPGET, 1L);
	} else if (cd_streq(m, "HEAD")) {
		curl_easy_setopt(r->easy, CURLOPT_NOBODY, 1L);
	} else if (cd_streq(m, "POST")) {
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	} else {
		curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, m);
	}
}

static int setup_headers(struct http_req *r, const struct cd_json *headers)
{
	bool expect = false;
	for (size_t i = 0; headers && i < headers->u.arr.n; i++) {
		const struct cd_json *name = cd_json_get(headers->u.arr.items[i], "name");
		const struct cd_json *value = cd_json_get(headers->u.arr.items[i], "value");
		/* "Name;" is libcurl's spelling of a header with an empty value. */
		char *line = value->u.str.len
				     ? cd_xasprintf("%s: %s", name->u.str.s, value->u.str.s)
				     : cd_xasprintf("%s;", name->u.str.s);
		struct curl_slist *l = curl_slist_append(r->slist, line);
		free(line);
		if (!l)
			return -ENOMEM;
		r->slist = l;
		expect = expect || strcasecmp(name->u.str.s, "expect") == 0;
	}
	/* No "Expect: 100-continue" wait of libcurl's own before a large body. */
	if (!expect) {
		struct curl_slist *l = curl_slist_append(r->slist, "Expect:");
		if (!l)
			return -ENOMEM;
		r->slist = l;
	}
	return curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->slist) == CURLE_OK ? 0 : -ENOMEM;
}

void cd_http_request(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct http_params p;
	char *err = NULL;
	struct http_req *r;
	CURLUcode uc;

	if (decode_params(params, &p, &err) < 0) {
		invalid(c, id, err);
		return;
	}
	r = cd_xcalloc(1, sizeof(*r));
	r->curlu = curl_url();
	if (!r->curlu) {
		free(r);
		cd_conn_error(c, id, CD_RPC_INTERNAL, "http/request failed: out of memory");
		return;
	}
	uc = curl_url_set(r->curlu, CURLUPART_URL, p.url->u.str.s, CURLU_NON_SUPPORT_SCHEME);
	if (uc == CURLUE_OK && cd_json_string_has_nul(p.url))
		uc = CURLUE_MALFORMED_INPUT;
	if (uc != CURLUE_OK) {
		invalid(c, id,
			cd_xasprintf("http/request url is invalid: %s",
				     url_complaint(uc, p.url->u.str.s)));
		goto fail;
	}
	char *scheme = NULL;
	if (curl_url_get(r->curlu, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
		invalid(c, id,
			cd_xstrdup("http/request url is invalid: relative URL without a base"));
		goto fail;
	}
	if (!cd_streq(scheme, "http") && !cd_streq(scheme, "https")) {
		invalid(c, id,
			cd_xasprintf("http/request only supports http and https URLs, got %s",
				     scheme));
		curl_free(scheme);
		goto fail;
	}
	curl_free(scheme);
	if (curl_url_get(r->curlu, CURLUPART_URL, &r->url, 0) != CURLUE_OK)
		r->url = NULL;
	if (check_headers(p.headers, &err) < 0) {
		invalid(c, id, err);
		goto fail;
	}
	/* The server's policy (cordon-serve(1), HTTP REQUESTS). */
	if (!c->server->opts.http_allow) {
		cd_conn_error(c, id, CD_RPC_INTERNAL,
			      "http/request failed: executor-side HTTP is off in this server "
			      "(start `cordon serve` with --allow-http-request to allow requests "
			      "to public addresses)");
		goto fail;
	}
	if (http_init(c->server) < 0) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "http/request failed: libcurl did not start");
		goto fail;
	}
	if (p.stream && stream_active(c, p.request_id)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "http/request streamResponse requestId `");
		cd_strbuf_append_n(&sb, p.request_id->u.str.s, p.request_id->u.str.len);
		cd_strbuf_append(&sb, "` is already active");
		invalid(c, id, cd_strbuf_steal(&sb));
		goto fail;
	}
	if (conn_requests(c) >= CD_HTTP_MAX_PER_CONN) {
		char *msg = cd_xasprintf("http/request failed: this connection has %u requests "
					 "in flight, cordon serve's limit",
					 CD_HTTP_MAX_PER_CONN);
		cd_conn_error(c, id, CD_RPC_INTERNAL, msg);
		free(msg);
		goto fail;
	}
	if (p.has_timeout && p.timeout_ms == 0) {
		/* What the reference server answers: it gave up before sending. */
		cd_conn_error(c, id, CD_RPC_INTERNAL,
			      "http/request failed: route-aware request timed out");
		goto fail;
	}
	if (p.body &&
	    cd_base64_decode(p.body->u.str.s, p.body->u.str.len, &r->body, &r->body_len) < 0) {
		invalid(c, id, base64_complaint(p.body->u.str.s, p.body->u.str.len));
		goto fail;
	}
	/*
	 * The body is held until the upstream has read it all, which a peer
	 * that does not read may never do: it counts as a buffered response
	 * does (16 requests a connection could hold 16 bodies of a message's
	 * size each).
	 */
	if (r->body_len && !cd_mem_room(r->body_len)) {
		char *msg = cd_xasprintf("http/request failed: the request body (%zu bytes) "
					 "exceeds what is left of the server's memory budget "
					 "(--max-memory)",
					 r->body_len);
		cd_conn_error(c, id, CD_RPC_INTERNAL, msg);
		free(msg);
		goto fail;
	}
	cd_mem_set(CD_MEM_FILES, &r->body_mem, r->body_len);
	r->easy = curl_easy_init();
	if (!r->easy) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "http/request failed: out of memory");
		goto fail;
	}
	r->conn = c;
	r->id = cd_xstrdup(id);
	r->rid = cd_xmalloc(p.request_id->u.str.len + 1);
	memcpy(r->rid, p.request_id->u.str.s, p.request_id->u.str.len + 1);
	r->rid_len = p.request_id->u.str.len;
	r->stream = p.stream;
	r->follow = p.redirect == REDIRECT_FOLLOW;

	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)r);
	curl_easy_setopt(e, CURLOPT_CURLU, r->curlu);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/* Redirects are followed by follow_redirect, those the reference follows only. */
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	/* No proxy from the environment: the policy judges the real peer. */
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	if (p.has_timeout) {
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
				 p.timeout_ms > LONG_MAX ? LONG_MAX : (long)p.timeout_ms);
		r->deadline_ms =
			cd_mono_ms() + (p.timeout_ms > UINT32_MAX ? UINT32_MAX : p.timeout_ms);
	}
	r->method = cd_xstrdup(p.method->u.str.s);
	setup_method(r, p.method);
	if (setup_headers(r, p.headers) < 0) {
		cd_conn_error(c, id, CD_RPC_INTERNAL, "http/request failed: out of memory");
		goto fail;
	}
	r->next = H.reqs;
	if (H.reqs)
		H.reqs->prev = r;
	H.reqs = r;
	if (curl_multi_add_handle(H.multi, e) != CURLM_OK) {
		r->conn = NULL;
		cd_conn_error(c, id, CD_RPC_INTERNAL, "http/request failed: out of memory");
		free_req(r);
		return;
	}
	cd_log_debug("serve: http/request %s %s%s", p.method->u.str.s, r->url,
		     r->stream ? " (streamed)" : "");
	return;
fail:
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_url_cleanup(r->curlu);
	curl_free(r->url);
	cd_mem_set(CD_MEM_FILES, &r->body_mem, 0);
	free(r->body);
	free(r->method);
	curl_slist_free_all(r->slist);
	free(r);
}

void cd_http_conn_release(struct cd_conn *c)
{
	for (struct http_req *r = H.reqs, *next; r; r = next) {
		next = r->next;
		if (r->conn != c)
			continue;
		r->conn = NULL;
		if (!H.in_curl)
			free_req(r);
	}
}

static void resume_paused(void)
{
	for (struct http_req *r = H.reqs; r; r = r->next) {
		if (!r->paused || !r->conn || r->finished || r->conn->output_paused)
			continue;
		r->paused = false;
		cd_testhook_event("http-resumed rid=%.*s", (int)r->rid_len, r->rid);
		H.in_curl++;
		curl_easy_pause(r->easy, CURLPAUSE_CONT);
		H.in_curl--;
	}
	after_curl();
}

void cd_http_conn_paused(struct cd_conn *c, bool paused)
{
	/* Pausing happens in on_body, at the next bytes; resuming, now. */
	if (paused || !H.multi)
		return;
	if (H.in_curl) {
		H.resume = true;
		return;
	}
	resume_paused();
}

void cd_http_server_stop(struct cd_server *s)
{
	if (!H.multi)
		return;
	while (H.reqs) {
		H.reqs->conn = NULL;
		free_req(H.reqs);
	}
	if (H.timer)
		cd_loop_cancel_timer(s->loop, H.timer);
	H.timer = NULL;
	curl_multi_cleanup(H.multi);
	H.multi = NULL;
	curl_global_cleanup();
}

#endif /* CD_HTTP */

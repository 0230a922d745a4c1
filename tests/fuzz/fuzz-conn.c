/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The line framing of `cordon serve` on stdio and unix sockets
 * (serve/conn.c, linked for real; the rest of the server is stubbed in
 * serve-stubs.c). Each input is fed twice, as a stdio client over two
 * pipes and as a unix-socket client over a socket pair, in chunks of
 * varying sizes, with the client reading its answers late now and then
 * (back-pressure; the queue cap is 512 bytes here). Properties:
 *  - the requests handled are exactly those a reference reading of the
 *    input finds (lines split at '\n', one '\r' before it dropped, blank
 *    lines skipped, a cut-off last line ignored, the released exec-server's
 *    JSON-RPC classification, the connection ending at a client response
 *    or an unexpected notification),
 *    in order, however the bytes were chunked;
 *  - everything written back is complete lines of valid JSON, one answer
 *    per request;
 *  - the loop settles (no busy loop) and nothing leaks.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/json.h"
#include "core/util.h"
#include "fuzz.h"
#include "serve-stubs.h"
#include "shared/log.h"

static const struct cd_json_limits serve_limits = {
	.max_bytes = CD_SERVE_MAX_LINE,
	.max_values = CD_SERVE_MAX_VALUES,
	.max_depth = CD_SERVE_MAX_DEPTH,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	signal(SIGPIPE, SIG_IGN);
	cd_log_verbosity = 0;
	return 0;
}

static bool valid_id(const struct cd_json *id)
{
	int64_t v;
	return id && (id->type == CD_JSON_STRING ||
		      (id->type == CD_JSON_NUMBER && cd_json_int64(id, &v) == 0));
}

static bool blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(" \t\r\n", s[i]) || !s[i])
			return false;
	return true;
}

static bool i64(const struct cd_json *v)
{
	int64_t x;
	return v->type == CD_JSON_NUMBER && cd_json_int64(v, &x) == 0;
}

/* An error object's "error": {code: i64, message: string, data?}, or [code, data, message]. */
static bool error_ok(const struct cd_json *e)
{
	if (e->type == CD_JSON_ARRAY)
		return e->u.arr.n == 3 && i64(e->u.arr.items[0]) &&
		       e->u.arr.items[2]->type == CD_JSON_STRING;
	if (e->type != CD_JSON_OBJECT)
		return false;
	bool code = false, message = false;
	for (size_t i = 0; i < e->u.obj.n; i++) {
		const struct cd_json_member *m = &e->u.obj.members[i];
		if (cd_streq(m->key, "code") && !(code = i64(m->value)))
			return false;
		if (cd_streq(m->key, "message") && !(message = m->value->type == CD_JSON_STRING))
			return false;
	}
	return code && message;
}

enum ref_envelope {
	REF_INVALID,
	REF_REQUEST,
	REF_NOTIFICATION,
	REF_RESPONSE
};

/*
 * What the released exec-server makes of a message (cordon-protocol(7),
 * ENVELOPE): members checked in the order sent, the first bad one making it
 * a parse error; then a request, a notification, or a client response.
 */
static enum ref_envelope envelope(const struct cd_json *v)
{
	if (v->type != CD_JSON_OBJECT)
		return REF_INVALID;
	bool method = cd_json_get(v, "method"), result = cd_json_get(v, "result");
	bool id = false, error = false;
	for (size_t i = 0; i < v->u.obj.n; i++) {
		const struct cd_json_member *m = &v->u.obj.members[i];
		if (cd_streq(m->key, "id")) {
			id = true;
			if (!valid_id(m->value))
				return REF_INVALID;
		} else if (method && cd_streq(m->key, "method")) {
			if (m->value->type != CD_JSON_STRING)
				return REF_INVALID;
		} else if (!method && !result && cd_streq(m->key, "error")) {
			error = true;
			if (!error_ok(m->value))
				return REF_INVALID;
		}
	}
	if (method)
		return id ? REF_REQUEST : REF_NOTIFICATION;
	return (result || error) && id ? REF_RESPONSE : REF_INVALID;
}

/* The requests a plain reading of the input finds, in order. */
static char **reference(const char *buf, size_t size)
{
	char **want = NULL;
	size_t pos = 0;

	for (;;) {
		const char *nl = memchr(buf + pos, '\n', size - pos);
		if (!nl)
			break;
		const char *line = buf + pos;
		size_t len = (size_t)(nl - line);
		pos += len + 1;
		if (len > 0 && line[len - 1] == '\r')
			len--;
		struct cd_json *v = NULL;
		struct cd_json_error err;
		if (blank(line, len) || cd_json_parse(line, len, &serve_limits, &v, &err) < 0)
			continue;
		bool stop = false;
		switch (envelope(v)) {
		case REF_INVALID: /* a parse error answer; the connection goes on */
			break;
		case REF_REQUEST:
			cd_strv_push(&want, cd_json_get(v, "method")->u.str.s);
			break;
		case REF_NOTIFICATION:
			stop = !cd_streq(cd_json_get(v, "method")->u.str.s, "initialized");
			break;
		case REF_RESPONSE:
			stop = true;
			break;
		}
		cd_json_free(v);
		if (stop)
			break;
	}
	return want;
}

/*
 * Every line is a JSON object; results are counted. cut: the connection
 * closed itself, dropping what the socket did not take (the end of a line
 * too).
 */
static size_t check_output(const struct cd_strbuf *out, bool cut)
{
	size_t results = 0, pos = 0;

	while (pos < out->len) {
		const char *nl = memchr(out->buf + pos, '\n', out->len - pos);
		if (!nl && cut)
			break;
		if (!nl)
			fuzz_fail("the output ends in a partial line");
		struct cd_json *v = NULL;
		struct cd_json_error err;
		size_t len = (size_t)(nl - (out->buf + pos));
		if (cd_json_parse(out->buf + pos, len, &serve_limits, &v, &err) < 0)
			fuzz_fail("an output line is not JSON: %s: %.*s", err.msg, (int)len,
				  out->buf + pos);
		fuzz_assert(v->type == CD_JSON_OBJECT && cd_json_get(v, "id"));
		if (cd_json_get(v, "result"))
			results++;
		else
			fuzz_assert(cd_json_get(v, "error"));
		cd_json_free(v);
		pos += len + 1;
	}
	return results;
}

static void run(enum cd_conn_kind kind, const uint8_t *data, size_t size, char **want)
{
	struct cd_server s;
	struct cd_strbuf out = { 0 };
	int in[2], outp[2], sv[2];

	fuzz_server_init(&s);
	if (kind == CD_CONN_STDIO) {
		fuzz_assert(pipe2(in, O_CLOEXEC | O_NONBLOCK) == 0);
		fuzz_assert(pipe2(outp, O_CLOEXEC | O_NONBLOCK) == 0);
		(void)cd_conn_new(&s, kind, in[0], outp[1]);
		fuzz_serve_feed(&s, in[1], false, outp[0], data, size, &out);
	} else {
		fuzz_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
		int buf = 4096;
		(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
		(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
		fuzz_assert(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
		(void)cd_conn_new(&s, kind, sv[0], fcntl(sv[0], F_DUPFD_CLOEXEC, 3));
		fuzz_serve_feed(&s, sv[1], true, sv[1], data, size, &out);
	}
	/* stdio ends the server and stays for it to free; a socket frees itself. */
	if (kind == CD_CONN_STDIO) {
		fuzz_assert(s.stopping && s.n_conns == 1);
		cd_conn_free(s.conns);
		close(in[0]);
		close(outp[1]);
		close(outp[0]);
	} else {
		fuzz_assert(s.n_conns == 0);
		close(sv[1]);
	}
	fuzz_server_done(&s);

	size_t n_want = cd_strv_length(want), n_got = cd_strv_length(fuzz_requests);
	if (n_got != n_want)
		fuzz_fail("%s: %zu requests handled, %zu expected",
			  kind == CD_CONN_STDIO ? "stdio" : "unix", n_got, n_want);
	for (size_t i = 0; i < n_want; i++)
		if (!cd_streq(want[i], fuzz_requests[i]))
			fuzz_fail("request %zu: method '%s' handled, '%s' expected", i,
				  fuzz_requests[i], want[i]);
	/*
	 * stdio writes everything; a socket that ended at a response or a
	 * notification drops what the client had not read yet.
	 */
	size_t results = check_output(&out, kind != CD_CONN_STDIO);
	fuzz_assert(kind == CD_CONN_STDIO ? results == n_want : results <= n_want);
	cd_strbuf_done(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char **want = reference((const char *)data, size);

	run(CD_CONN_STDIO, data, size, want);
	run(CD_CONN_UNIX, data, size, want);
	cd_strv_free(want);
	fuzz_requests = cd_strv_free(fuzz_requests);
	return 0;
}

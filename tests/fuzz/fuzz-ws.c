/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The WebSocket transport of `cordon serve` (serve/ws.c with wslay, and
 * conn.c as cordon-ws builds it; the rest of the server is stubbed in
 * serve-stubs.c): the input is what a client sends on a fresh connection,
 * the HTTP upgrade request and then frames, fed over a socket pair in
 * chunks of varying sizes. The server requires the bearer token
 * "fuzz-token". Properties:
 *  - the answer is an HTTP/1.1 status line; after a 101, only whole
 *    server frames (unmasked, no reserved bits), each text frame one JSON
 *    object, up to where the server closed the connection;
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

#define TOKEN "fuzz-token"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	signal(SIGPIPE, SIG_IGN);
	cd_log_verbosity = 0;
	return 0;
}

static void check_frames(const unsigned char *p, size_t n)
{
	static const struct cd_json_limits lim = {
		.max_bytes = CD_SERVE_MAX_LINE,
		.max_values = CD_SERVE_MAX_VALUES,
		.max_depth = CD_SERVE_MAX_DEPTH,
	};
	size_t pos = 0;

	while (n - pos >= 2) {
		unsigned op = p[pos] & 0x0f;
		fuzz_assert((p[pos] & 0x70) == 0);     /* no reserved bits */
		fuzz_assert((p[pos + 1] & 0x80) == 0); /* a server does not mask */
		uint64_t len = p[pos + 1] & 0x7f;
		size_t head = 2;
		if (len == 126) {
			if (n - pos < 4)
				return;
			len = (uint64_t)p[pos + 2] << 8 | p[pos + 3];
			head = 4;
		} else if (len == 127) {
			if (n - pos < 10)
				return;
			len = 0;
			for (int i = 0; i < 8; i++)
				len = len << 8 | p[pos + 2 + i];
			head = 10;
		}
		if (n - pos - head < len)
			return; /* cut where the server closed */
		const char *payload = (const char *)p + pos + head;
		if (op == 1) {
			struct cd_json *v = NULL;
			struct cd_json_error err;
			if (cd_json_parse(payload, (size_t)len, &lim, &v, &err) < 0)
				fuzz_fail("a text frame is not JSON: %s", err.msg);
			fuzz_assert(v->type == CD_JSON_OBJECT);
			cd_json_free(v);
		} else {
			fuzz_assert(op == 0x8 || op == 0x9 || op == 0xa);
		}
		pos += head + (size_t)len;
	}
}

static void check_answer(const struct cd_strbuf *out)
{
	if (out->len == 0)
		return; /* the request never completed */
	fuzz_assert(out->len >= 13 && !memcmp(out->buf, "HTTP/1.1 ", 9));
	for (int i = 9; i < 12; i++)
		fuzz_assert(out->buf[i] >= '0' && out->buf[i] <= '9');
	const char *end = memmem(out->buf, out->len, "\r\n\r\n", 4);
	fuzz_assert(end != NULL);
	size_t head = (size_t)(end + 4 - out->buf);
	if (!memcmp(out->buf + 9, "101", 3))
		check_frames((const unsigned char *)out->buf + head, out->len - head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cd_server s;
	struct cd_strbuf out = { 0 };
	int sv[2];

	fuzz_server_init(&s);
	s.opts.auth_token = (char *)TOKEN;
	s.opts.auth_token_len = strlen(TOKEN);
	fuzz_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	fuzz_assert(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
	int buf = 4096;
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	(void)cd_conn_new(&s, CD_CONN_WS, sv[0], fcntl(sv[0], F_DUPFD_CLOEXEC, 3));
	fuzz_serve_feed(&s, sv[1], true, sv[1], data, size, &out);
	if (s.conns)
		cd_conn_free(s.conns);
	close(sv[1]);
	fuzz_server_done(&s);
	check_answer(&out);
	cd_strbuf_done(&out);
	fuzz_requests = cd_strv_free(fuzz_requests);
	return 0;
}

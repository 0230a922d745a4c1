/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The SOCKS5 handshake parsers (core/socks5.c), fed as the proxy feeds
 * them: the input is a greeting, then a request. Each call gets a heap
 * copy of exactly the bytes it may read, so AddressSanitizer catches a
 * read past them. Properties:
 *  - a complete greeting's length is 2 + NMETHODS, it offers method 0,
 *    and every shorter prefix is "incomplete";
 *  - a request's answer is monotonic in its bytes: every prefix is
 *    "incomplete" until the first refusal or the complete length, and a
 *    refusal stays the same refusal, with the same reply code, however
 *    many more bytes arrive;
 *  - a complete request is 4 + address + 2 bytes, at most
 *    CD_SOCKS5_MAX_REQUEST, its name (if any) 1..255 bytes and NUL-ended.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/socks5.h"
#include "fuzz.h"

static int greeting(const uint8_t *d, size_t n)
{
	uint8_t *copy = malloc(n ? n : 1);
	const char *err = NULL;
	memcpy(copy, d, n);
	int r = cd_socks5_parse_greeting(copy, n, &err);
	free(copy);
	fuzz_assert(r <= (int)n);
	fuzz_assert(r >= 0 || err);
	return r;
}

static int request(const uint8_t *d, size_t n, struct cd_socks5_request *rq, uint8_t *reply)
{
	uint8_t *copy = malloc(n ? n : 1);
	const char *err = NULL;
	memcpy(copy, d, n);
	int r = cd_socks5_parse_request(copy, n, rq, reply, &err);
	free(copy);
	fuzz_assert(r <= (int)n);
	fuzz_assert(r >= 0 || err);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int g = greeting(data, size);
	if (g > 0) {
		fuzz_assert(g == 2 + data[1] && g <= CD_SOCKS5_MAX_GREETING);
		fuzz_assert(memchr(data + 2, 0, data[1]) != NULL);
		for (int k = 0; k < g; k++)
			fuzz_assert(greeting(data, (size_t)k) == 0);
	}
	if (g <= 0)
		return 0;

	const uint8_t *rq_data = data + g;
	size_t n = size - (size_t)g;
	struct cd_socks5_request rq;
	uint8_t reply = 0, first_reply = 0;
	int first = 0;
	size_t at = 0;
	for (size_t k = 0; k <= n; k++) {
		int r = request(rq_data, k, &rq, &reply);
		if (first == 0) {
			first = r;
			first_reply = reply;
			at = k;
			continue;
		}
		if (first > 0)
			fuzz_assert(r == first); /* more bytes: the same request */
		else
			fuzz_assert(r == first && reply == first_reply);
	}
	if (first > 0) {
		fuzz_assert(first <= CD_SOCKS5_MAX_REQUEST && (size_t)first == at);
		fuzz_assert(rq.cmd == CD_SOCKS5_CMD_CONNECT);
		if (rq.atyp == CD_SOCKS5_ATYP_DOMAIN)
			fuzz_assert(rq.name_len >= 1 && rq.name_len <= 255 &&
				    rq.name[rq.name_len] == '\0' &&
				    first == 4 + 1 + (int)rq.name_len + 2);
		else
			fuzz_assert((rq.atyp == CD_SOCKS5_ATYP_IPV4 && first == 10) ||
				    (rq.atyp == CD_SOCKS5_ATYP_IPV6 && first == 22));
	} else if (first < 0) {
		fuzz_assert(first == -EPROTO || first == -EAFNOSUPPORT || first == -EOPNOTSUPP);
		fuzz_assert(first_reply >= 1 && first_reply <= 8);
	}
	return 0;
}

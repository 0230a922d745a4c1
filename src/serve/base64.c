/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Standard base64 (RFC 4648, section 4) with padding. Every output byte the
 * server relays goes through the encoder, so it works on 6 input bytes per
 * step through a table of 4096 two-character pairs (12 bits -> 2 chars):
 * 4 table lookups and one 8-byte store per 8 output characters.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "serve/proc.h"

static const char alphabet[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* pairs[v] = the two characters for the 12-bit value v, in memory order. */
static char pairs[4096][2];
/* 0..63 for alphabet characters, 0xff otherwise. */
static uint8_t dec[256];
static bool tables_ready;

static void init_tables(void)
{
	if (tables_ready)
		return;
	for (unsigned v = 0; v < 4096; v++) {
		pairs[v][0] = alphabet[v >> 6];
		pairs[v][1] = alphabet[v & 63];
	}
	memset(dec, 0xff, sizeof(dec));
	for (unsigned i = 0; i < 64; i++)
		dec[(unsigned char)alphabet[i]] = (uint8_t)i;
	tables_ready = true;
}

size_t cd_base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

static inline uint64_t load_be64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return __builtin_bswap64(v);
}

size_t cd_base64_encode(const unsigned char *data, size_t n, char *out)
{
	init_tables();
	char *o = out;
	size_t i = 0;

	/* 6 bytes per step, reading 8 (the 2 extra bytes are ignored). */
	while (n - i >= 8) {
		uint64_t v = load_be64(data + i);
		char tmp[8];
		memcpy(tmp + 0, pairs[(v >> 52) & 0xfff], 2);
		memcpy(tmp + 2, pairs[(v >> 40) & 0xfff], 2);
		memcpy(tmp + 4, pairs[(v >> 28) & 0xfff], 2);
		memcpy(tmp + 6, pairs[(v >> 16) & 0xfff], 2);
		memcpy(o, tmp, 8);
		o += 8;
		i += 6;
	}
	while (n - i >= 3) {
		uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
		memcpy(o, pairs[v >> 12], 2);
		memcpy(o + 2, pairs[v & 0xfff], 2);
		o += 4;
		i += 3;
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)data[i] << 16;
		o[0] = alphabet[v >> 18];
		o[1] = alphabet[(v >> 12) & 63];
		o[2] = '=';
		o[3] = '=';
		o += 4;
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8;
		o[0] = alphabet[v >> 18];
		o[1] = alphabet[(v >> 12) & 63];
		o[2] = alphabet[(v >> 6) & 63];
		o[3] = '=';
		o += 4;
	}
	return (size_t)(o - out);
}

int cd_base64_decode(const char *s, size_t len, unsigned char **ret, size_t *ret_len)
{
	init_tables();
	if (len % 4 != 0)
		return -EINVAL;

	size_t pad = 0;
	if (len >= 4 && s[len - 1] == '=')
		pad = s[len - 2] == '=' ? 2 : 1;
	size_t outn = len / 4 * 3 - pad;
	/* One spare byte so that an empty result is still a valid allocation. */
	unsigned char *out = cd_xmalloc(outn + 1);
	unsigned char *o = out;
	const unsigned char *p = (const unsigned char *)s;
	size_t full = pad ? len - 4 : len;

	for (size_t i = 0; i < full; i += 4) {
		uint32_t a = dec[p[i]], b = dec[p[i + 1]], c = dec[p[i + 2]], d = dec[p[i + 3]];
		/* Any invalid character sets bit 7 somewhere ('=' included). */
		if ((a | b | c | d) & 0x80)
			goto bad;
		uint32_t v = a << 18 | b << 12 | c << 6 | d;
		o[0] = (unsigned char)(v >> 16);
		o[1] = (unsigned char)(v >> 8);
		o[2] = (unsigned char)v;
		o += 3;
	}
	if (pad) {
		const unsigned char *q = p + len - 4;
		uint32_t a = dec[q[0]], b = dec[q[1]];
		if ((a | b) & 0x80)
			goto bad;
		if (pad == 2) {
			/* The 4 low bits of b must be zero: anything else is non-canonical. */
			if (b & 0x0f)
				goto bad;
			o[0] = (unsigned char)(a << 2 | b >> 4);
			o += 1;
		} else {
			uint32_t c = dec[q[2]];
			if ((c & 0x80) || (c & 0x03))
				goto bad;
			uint32_t v = a << 12 | b << 6 | c;
			o[0] = (unsigned char)(v >> 10);
			o[1] = (unsigned char)(v >> 2);
			o += 2;
		}
	}
	*ret = out;
	*ret_len = (size_t)(o - out);
	return 0;
bad:
	free(out);
	return -EINVAL;
}

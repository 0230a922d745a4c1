/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for src/core/socks5.c: the SOCKS5 greeting and request
 * parsers of the managed network's proxy. Every complete input is also
 * fed one byte at a time: each prefix must be "incomplete" or the same
 * early refusal, never a read past the bytes given.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/socks5.h"
#include "core/util.h"

/* ---- the greeting ---- */

static const struct {
	const char *in;
	size_t len;
	int rc; /* > 0: length; 0: incomplete; < 0: refusal */
} greetings[] = {
	{ "\x05\x01\x00", 3, 3 },
	{ "\x05\x02\x02\x00", 4, 4 },
	{ "\x05\x03\x01\x02\x00"
	  "extra",
	  10, 5 },			/* what follows is the request's */
	{ "\x05\x01\x02", 3, -EACCES }, /* username/password only */
	{ "\x05\x00", 2, -EACCES },	/* no method at all */
	{ "\x05\x02\x00", 3, 0 },	/* a method still to come */
	{ "\x05", 1, 0 },
	{ "", 0, 0 },
	{ "\x04\x01\x00", 3, -EPROTO }, /* SOCKS4 */
	{ "G", 1, -EPROTO },
};

START_TEST(test_greeting)
{
	const char *err = NULL;
	int rc = cd_socks5_parse_greeting(greetings[_i].in, greetings[_i].len, &err);
	ck_assert_msg(rc == greetings[_i].rc, "greeting %d: %d, want %d", _i, rc, greetings[_i].rc);
	if (rc < 0)
		ck_assert_ptr_nonnull(err);
}
END_TEST

START_TEST(test_greeting_bound)
{
	/* 255 methods, "no authentication" last: the longest greeting */
	unsigned char b[CD_SOCKS5_MAX_GREETING];
	const char *err = NULL;
	b[0] = 5;
	b[1] = 255;
	memset(b + 2, 0x80, 254);
	b[256] = 0;
	for (size_t n = 0; n < sizeof(b); n++)
		ck_assert_int_eq(cd_socks5_parse_greeting(b, n, &err), 0);
	ck_assert_int_eq(cd_socks5_parse_greeting(b, sizeof(b), &err), CD_SOCKS5_MAX_GREETING);
	b[256] = 0x80;
	ck_assert_int_eq(cd_socks5_parse_greeting(b, sizeof(b), &err), -EACCES);
}
END_TEST

/* ---- the request ---- */

static const struct {
	const char *in;
	size_t len;
	int rc;
	int reply; /* when rc < 0 */
	int early; /* a refusal decided before the whole request: from this many bytes */
	unsigned char cmd, atyp;
	unsigned port;
	const char *name;
} requests[] = {
	/* CONNECT example.com:443 */
	{ "\x05\x01\x00\x03\x0b"
	  "example.com"
	  "\x01\xbb",
	  18, 18, 0, 0, 1, 3, 443, "example.com" },
	/* CONNECT 127.0.0.1:80, then early data */
	{ "\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50"
	  "GET",
	  13, 10, 0, 0, 1, 1, 80, NULL },
	/* CONNECT [::1]:22 */
	{ "\x05\x01\x00\x04"
	  "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01"
	  "\x00\x16",
	  22, 22, 0, 0, 1, 4, 22, NULL },
	/* a name of 255 bytes is checked by the proxy, not here */
	{ "\x05\x01\x00\x03\x01"
	  "a"
	  "\x00\x00",
	  8, 8, 0, 0, 1, 3, 0, "a" },
	/* BIND and UDP ASSOCIATE: command not supported, target known */
	{ "\x05\x02\x00\x03\x01"
	  "b"
	  "\x00\x15",
	  8, -EOPNOTSUPP, 7, 8, 2, 3, 21, "b" },
	{ "\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00", 10, -EOPNOTSUPP, 7, 10, 3, 1, 0, NULL },
	{ "\x05\x09\x00\x01\x01\x02\x03\x04\x00\x50", 10, -EOPNOTSUPP, 7, 10, 9, 1, 80, NULL },
	/* malformed: version, reserved byte, address type, empty name */
	{ "\x04\x01\x00\x01", 4, -EPROTO, 1, 1, 0, 0, 0, NULL },
	{ "\x05\x01\x01\x01", 4, -EPROTO, 1, 3, 0, 0, 0, NULL },
	{ "\x05\x01\x00\x02", 4, -EAFNOSUPPORT, 8, 4, 0, 0, 0, NULL },
	{ "\x05\x01\x00\x03\x00\x00\x50", 7, -EPROTO, 1, 5, 0, 0, 0, NULL },
	/* incomplete */
	{ "\x05\x01\x00\x03\x0b"
	  "example",
	  12, 0, 0, 0, 0, 0, 0, NULL },
	{ "\x05\x01\x00\x01\x7f\x00\x00\x01\x00", 9, 0, 0, 0, 0, 0, 0, NULL },
};

START_TEST(test_request)
{
	struct cd_socks5_request rq;
	const char *err = NULL;
	uint8_t reply = 0xee;
	int rc = cd_socks5_parse_request(requests[_i].in, requests[_i].len, &rq, &reply, &err);
	ck_assert_msg(rc == requests[_i].rc, "request %d: %d, want %d", _i, rc, requests[_i].rc);
	if (rc < 0) {
		ck_assert_int_eq(reply, requests[_i].reply);
		ck_assert_ptr_nonnull(err);
	}
	if (rc > 0 || rc == -EOPNOTSUPP) {
		ck_assert_int_eq(rq.cmd, requests[_i].cmd);
		ck_assert_int_eq(rq.atyp, requests[_i].atyp);
		ck_assert_uint_eq(rq.port, requests[_i].port);
		if (requests[_i].name)
			ck_assert_str_eq(rq.name, requests[_i].name);
	}
	/* every prefix: incomplete, or the same refusal once its bytes are there */
	size_t whole = rc > 0 ? (size_t)rc : requests[_i].len;
	for (size_t n = 0; n < whole; n++) {
		char *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees any read past */
		memcpy(copy, requests[_i].in, n);
		int r = cd_socks5_parse_request(copy, n, &rq, &reply, &err);
		free(copy);
		if (rc < 0 && requests[_i].early && n >= (size_t)requests[_i].early)
			ck_assert_msg(r == rc, "request %d, %zu bytes: %d, want %d", _i, n, r, rc);
		else
			ck_assert_msg(r == 0, "request %d, %zu bytes: %d, want 0", _i, n, r);
	}
}
END_TEST

START_TEST(test_longest_name)
{
	unsigned char b[CD_SOCKS5_MAX_REQUEST];
	struct cd_socks5_request rq;
	const char *err = NULL;
	uint8_t reply;
	memcpy(b, "\x05\x01\x00\x03\xff", 5);
	memset(b + 5, 'x', 255);
	b[260] = 0x01;
	b[261] = 0xbb;
	ck_assert_int_eq(cd_socks5_parse_request(b, sizeof(b) - 1, &rq, &reply, &err), 0);
	ck_assert_int_eq(cd_socks5_parse_request(b, sizeof(b), &rq, &reply, &err),
			 CD_SOCKS5_MAX_REQUEST);
	ck_assert_uint_eq(rq.name_len, 255);
	ck_assert_uint_eq(strlen(rq.name), 255);
	ck_assert_uint_eq(rq.port, 443);
}
END_TEST

START_TEST(test_command_names)
{
	char buf[16];
	ck_assert_str_eq(cd_socks5_command_name(1, buf, sizeof(buf)), "CONNECT");
	ck_assert_str_eq(cd_socks5_command_name(2, buf, sizeof(buf)), "BIND");
	ck_assert_str_eq(cd_socks5_command_name(3, buf, sizeof(buf)), "UDP-ASSOCIATE");
	ck_assert_str_eq(cd_socks5_command_name(0xab, buf, sizeof(buf)), "CMD-0xab");
}
END_TEST

static Suite *socks5_suite(void)
{
	Suite *s = suite_create("socks5");
	TCase *tc = tcase_create("greeting");
	tcase_add_loop_test(tc, test_greeting, 0, CD_ARRAY_SIZE(greetings));
	tcase_add_test(tc, test_greeting_bound);
	suite_add_tcase(s, tc);

	tc = tcase_create("request");
	tcase_add_loop_test(tc, test_request, 0, CD_ARRAY_SIZE(requests));
	tcase_add_test(tc, test_longest_name);
	tcase_add_test(tc, test_command_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(socks5_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

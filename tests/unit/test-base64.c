/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "serve/proc.h"

static const struct {
	const char *plain;
	const char *enc;
} rfc[] = {
	/* RFC 4648, section 10 */
	{ "", "" },
	{ "f", "Zg==" },
	{ "fo", "Zm8=" },
	{ "foo", "Zm9v" },
	{ "foob", "Zm9vYg==" },
	{ "fooba", "Zm9vYmE=" },
	{ "foobar", "Zm9vYmFy" },
	/* longer than the 8-byte fast path, every tail length */
	{ "foobarbaz", "Zm9vYmFyYmF6" },
	{ "foobarbazq", "Zm9vYmFyYmF6cQ==" },
	{ "foobarbazqu", "Zm9vYmFyYmF6cXU=" },
	{ "Hello, World!\n", "SGVsbG8sIFdvcmxkIQo=" },
};

START_TEST(test_rfc_vectors)
{
	const char *plain = rfc[_i].plain, *enc = rfc[_i].enc;
	size_t n = strlen(plain);
	ck_assert_uint_eq(cd_base64_encoded_len(n), strlen(enc));
	char out[64];
	memset(out, '#', sizeof(out));
	size_t w = cd_base64_encode((const unsigned char *)plain, n, out);
	ck_assert_uint_eq(w, strlen(enc));
	ck_assert_int_eq(memcmp(out, enc, w), 0);
	ck_assert_int_eq(out[w], '#'); /* no NUL, no overrun */

	unsigned char *dec = NULL;
	size_t dn = 99;
	ck_assert_int_eq(cd_base64_decode(enc, strlen(enc), &dec, &dn), 0);
	ck_assert_uint_eq(dn, n);
	ck_assert_int_eq(memcmp(dec, plain, n), 0);
	free(dec);
}
END_TEST

START_TEST(test_binary_all_bytes)
{
	unsigned char in[256];
	for (int i = 0; i < 256; i++)
		in[i] = (unsigned char)i;
	char out[400];
	size_t w = cd_base64_encode(in, sizeof(in), out);
	ck_assert_uint_eq(w, 344);
	/* Spot-check against known text: bytes 00 01 02 -> "AAEC", fd fe ff -> "/f7/". */
	ck_assert_int_eq(memcmp(out, "AAECAwQF", 8), 0);
	ck_assert_int_eq(memcmp(out + 336, "/P3+/w==", 8), 0);
	unsigned char *dec;
	size_t dn;
	ck_assert_int_eq(cd_base64_decode(out, w, &dec, &dn), 0);
	ck_assert_uint_eq(dn, 256);
	ck_assert_int_eq(memcmp(dec, in, 256), 0);
	free(dec);
}
END_TEST

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

START_TEST(test_round_trip_random)
{
	for (int iter = 0; iter < 2000; iter++) {
		size_t n = (size_t)(rng() % 300);
		unsigned char *in = cd_xmalloc(n + 1);
		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)rng();
		size_t el = cd_base64_encoded_len(n);
		char *enc = cd_xmalloc(el + 1);
		ck_assert_uint_eq(cd_base64_encode(in, n, enc), el);
		/* Only alphabet characters, '=' only at the end. */
		for (size_t i = 0; i < el; i++) {
			char c = enc[i];
			bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
				  (c >= '0' && c <= '9') || c == '+' || c == '/' ||
				  (c == '=' && i >= el - 2);
			ck_assert_msg(ok, "bad char %c at %zu", c, i);
		}
		unsigned char *dec;
		size_t dn;
		ck_assert_int_eq(cd_base64_decode(enc, el, &dec, &dn), 0);
		ck_assert_uint_eq(dn, n);
		ck_assert_int_eq(memcmp(dec, in, n), 0);
		free(dec);
		free(enc);
		free(in);
	}
}
END_TEST

static const char *const impls[] = { "scalar", "ssse3", "avx2", "avx512vbmi" };

/*
 * Selects impls[i] for the rest of the (forked) test; false, with a note,
 * when this CPU or build lacks it.
 */
static bool use_impl(int i)
{
	int r = cd_base64_use_impl(impls[i]);
	if (r == -EOPNOTSUPP) {
		fprintf(stderr, "base64: %s not supported here, not tested\n", impls[i]);
		return false;
	}
	ck_assert_int_eq(r, 0);
	ck_assert_str_eq(cd_base64_impl(), impls[i]);
	return true;
}

/* RFC 4648 bit by bit: the reference every implementation must match. */
static void ref_encode(const unsigned char *in, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t b = 0; b < n * 8; b += 6) {
		unsigned v = 0;
		for (size_t k = b; k < b + 6; k++)
			v = v << 1 | (k < n * 8 ? (in[k / 8] >> (7 - k % 8)) & 1u : 0);
		out[o++] = a[v];
	}
	while (o % 4)
		out[o++] = '=';
}

/*
 * Every length up to a few KiB, the input at the very end of its allocation
 * (so that a sanitizer build catches any read past it) and at every offset
 * modulo 64, the output at another offset and between guard bytes.
 */
START_TEST(test_encode_impl)
{
	if (!use_impl(_i))
		return;
	rng_state = 0x243f6a8885a308d3ull;
	for (size_t n = 0; n <= 4200; n++) {
		size_t in_off = n % 64, out_off = (n * 7 + 3) % 64;
		unsigned char *buf = cd_xmalloc(in_off + n + 1);
		unsigned char *in = buf + in_off;
		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)rng();
		if (n % 5 == 0) /* runs of 0x00 and 0xff: every class of the alphabet table */
			memset(in, n % 2 ? 0xff : 0, n / 2);
		size_t el = cd_base64_encoded_len(n);
		char *want = cd_xmalloc(el + 1), *obuf = cd_xmalloc(out_off + el + 16);
		char *out = obuf + out_off;
		ref_encode(in, n, want);
		memset(obuf, '#', out_off + el + 16);
		ck_assert_uint_eq(cd_base64_encode(in, n, out), el);
		ck_assert_msg(memcmp(out, want, el) == 0, "%s: length %zu differs", impls[_i], n);
		for (size_t i = 0; i < out_off; i++)
			ck_assert_int_eq(obuf[i], '#');
		for (size_t i = 0; i < 16; i++)
			ck_assert_int_eq(out[el + i], '#');
		free(want);
		free(obuf);
		free(buf);
	}
}
END_TEST

/* Every input offset modulo 64 with every length up to 512. */
START_TEST(test_encode_impl_offsets)
{
	if (!use_impl(_i))
		return;
	static unsigned char src[64 + 512];
	static char want[700], out[64 + 700];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)rng();
	for (size_t off = 0; off < 64; off++)
		for (size_t n = 0; n <= 512; n++) {
			size_t el = cd_base64_encoded_len(n);
			ref_encode(src + off, n, want);
			ck_assert_uint_eq(cd_base64_encode(src + off, n, out + (off + n) % 64), el);
			ck_assert_msg(memcmp(out + (off + n) % 64, want, el) == 0,
				      "%s: offset %zu length %zu differs", impls[_i], off, n);
		}
}
END_TEST

/* Every byte value at every position of a SIMD block. */
START_TEST(test_encode_impl_bytes)
{
	if (!use_impl(_i))
		return;
	unsigned char in[96];
	char want[128], out[128];
	for (size_t pos = 0; pos < sizeof(in); pos++)
		for (unsigned v = 0; v < 256; v++) {
			for (size_t i = 0; i < sizeof(in); i++)
				in[i] = (unsigned char)(i * 37 + v);
			in[pos] = (unsigned char)v;
			ref_encode(in, sizeof(in), want);
			cd_base64_encode(in, sizeof(in), out);
			ck_assert_msg(memcmp(out, want, 128) == 0, "%s: byte %u at %zu", impls[_i],
				      v, pos);
		}
}
END_TEST

/*
 * Decoding with each implementation: every length of valid input up to a
 * few KiB at the end of its allocation, then the same input with one
 * character replaced by each byte outside the alphabet (and by '=') at
 * positions across and between SIMD blocks: always refused, never a result.
 */
START_TEST(test_decode_impl)
{
	if (!use_impl(_i))
		return;
	rng_state = 0x13198a2e03707344ull;
	for (size_t n = 0; n <= 3000; n++) {
		unsigned char *in = cd_xmalloc(n + 1);
		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)rng();
		size_t el = cd_base64_encoded_len(n), off = n % 64;
		char *buf = cd_xmalloc(off + el + 1), *enc = buf + off;
		ref_encode(in, n, enc);
		unsigned char *dec = NULL;
		size_t dn = 0;
		ck_assert_int_eq(cd_base64_decode(enc, el, &dec, &dn), 0);
		ck_assert_uint_eq(dn, n);
		ck_assert_msg(memcmp(dec, in, n) == 0, "%s: length %zu differs", impls[_i], n);
		free(dec);
		if (el > 0 && (n < 200 || n % 97 == 0)) {
			for (unsigned v = 0; v < 256; v++) {
				if (isalnum(v) || v == '+' || v == '/')
					continue;
				size_t pos = (size_t)(rng() % el);
				char keep = enc[pos];
				enc[pos] = (char)v;
				dn = 42;
				int r = cd_base64_decode(enc, el, &dec, &dn);
				/* '=' in the last two places can still be valid padding. */
				if (!(v == '=' && pos >= el - 2))
					ck_assert_msg(r == -EINVAL && dn == 42,
						      "%s: byte %u at %zu of %zu accepted",
						      impls[_i], v, pos, el);
				else if (r == 0)
					free(dec);
				enc[pos] = keep;
			}
		}
		free(buf);
		free(in);
	}
}
END_TEST

static const char *const bad[] = {
	"A",
	"AA",
	"AAA", /* not a multiple of 4 */
	"Zg",
	"Zg=",
	"Zm9vYg", /* missing padding */
	"Zg=\n",
	" Zg=",
	"Zm9v\nYmFy", /* whitespace */
	"Zh==",
	"Zm9=",
	"Zm9vYh==", /* non-canonical padding bits */
	"====",
	"A===",
	"Z===", /* too much padding */
	"Zg==Zm9v",
	"Zm=v",
	"=Zm9", /* '=' not at the end */
	"Zm9v!mFy",
	"Zm9v-_8=",
	"Zm9\x80",	    /* outside the alphabet (url-safe too) */
	"Zm9vYmFyYmF6cQ=A", /* padding then data */
};

START_TEST(test_strict_refusals)
{
	unsigned char *dec = (unsigned char *)"untouched";
	size_t dn = 42;
	const char *s = bad[_i];
	ck_assert_msg(cd_base64_decode(s, strlen(s), &dec, &dn) == -EINVAL, "accepted %s", s);
	ck_assert_uint_eq(dn, 42);
}
END_TEST

START_TEST(test_embedded_nul)
{
	/* The length is explicit: a NUL inside is just an invalid character. */
	unsigned char *dec;
	size_t dn;
	ck_assert_int_eq(cd_base64_decode("Zm\0v", 4, &dec, &dn), -EINVAL);
}
END_TEST

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Throughput of each implementation, for the log (no threshold: machines vary). */
START_TEST(test_speed)
{
	if (!use_impl(_i))
		return;
	size_t n = 64u << 20;
	unsigned char *in = cd_xmalloc(n);
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = rng();
		memcpy(in + i, &v, 8);
	}
	char *out = cd_xmalloc(cd_base64_encoded_len(n));
	/* 1 MiB pieces as fs/readBlock encodes them, then 8 KiB as process output; best of 3. */
	double best[2] = { 1e9, 1e9 };
	for (int rep = 0; rep < 6; rep++) {
		size_t piece = rep % 2 ? 8190 : 3 * 349525;
		double t0 = seconds();
		size_t o = 0;
		for (size_t i = 0; i < n; i += piece)
			o += cd_base64_encode(in + i, n - i < piece ? n - i : piece, out + o);
		double dt = seconds() - t0;
		ck_assert_uint_eq(o, cd_base64_encoded_len(n));
		if (dt < best[rep % 2])
			best[rep % 2] = dt;
	}
	double t0 = seconds();
	unsigned char *dec;
	size_t dn;
	ck_assert_int_eq(cd_base64_decode(out, cd_base64_encoded_len(n), &dec, &dn), 0);
	double ddt = seconds() - t0;
	ck_assert_uint_eq(dn, n);
	ck_assert_int_eq(memcmp(dec, in, n), 0);
	fprintf(stderr,
		"base64 %s: encode %.2f GB/s (1 MiB pieces), %.2f GB/s (8 KiB), decode %.2f GB/s "
		"(64 MiB, input bytes)\n",
		impls[_i], (double)n / best[0] / 1e9, (double)n / best[1] / 1e9,
		(double)n / ddt / 1e9);
	free(dec);
	free(out);
	free(in);
}
END_TEST

static Suite *base64_suite(void)
{
	Suite *s = suite_create("base64");
	TCase *tc = tcase_create("vectors");
	tcase_add_loop_test(tc, test_rfc_vectors, 0, CD_ARRAY_SIZE(rfc));
	tcase_add_test(tc, test_binary_all_bytes);
	tcase_add_test(tc, test_round_trip_random);
	suite_add_tcase(s, tc);

	tc = tcase_create("strict");
	tcase_add_loop_test(tc, test_strict_refusals, 0, CD_ARRAY_SIZE(bad));
	tcase_add_test(tc, test_embedded_nul);
	suite_add_tcase(s, tc);

	tc = tcase_create("implementations");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_encode_impl, 0, CD_ARRAY_SIZE(impls));
	tcase_add_loop_test(tc, test_encode_impl_offsets, 0, CD_ARRAY_SIZE(impls));
	tcase_add_loop_test(tc, test_encode_impl_bytes, 0, CD_ARRAY_SIZE(impls));
	tcase_add_loop_test(tc, test_decode_impl, 0, CD_ARRAY_SIZE(impls));
	suite_add_tcase(s, tc);

	tc = tcase_create("speed");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_speed, 0, CD_ARRAY_SIZE(impls));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(base64_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

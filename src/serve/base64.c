/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Standard base64 (RFC 4648, section 4) with padding. Every output byte the
 * server relays goes through the encoder, and fs/readBlock and fs/readFile
 * are bound by it, so on x86-64 the bulk of the work is done with SIMD,
 * chosen once at run time from what the CPU supports:
 *
 *  - AVX-512 VBMI: 48 bytes -> 64 characters with two byte permutes and one
 *    multishift (encode only);
 *  - AVX2 and SSSE3: 24 (12) bytes -> 32 (16) characters, each 3-byte group
 *    spread into a 32-bit lane, the four 6-bit fields moved into place with
 *    16-bit multiplies, and the alphabet applied as an offset looked up by
 *    range (A-Z, a-z, 0-9, '+', '/'); decoding runs the same in reverse and
 *    checks every character with two nibble-indexed tables.
 *
 * The SIMD paths only ever read inside the input, do whole 3-byte groups (or
 * 4-character quads) and leave the rest, including padding and any invalid
 * input, to the scalar code, which therefore decides every error. The scalar
 * encoder works on 6 input bytes per step through a table of 4096
 * two-character pairs (12 bits -> 2 chars). tests/unit/test-base64.c checks
 * every implementation against the scalar one (cd_base64_use_impl()).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "serve/proc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define X86_SIMD 1
#include <immintrin.h>
/*
 * glibc (2.33 and later) answers from the CPU features it read at startup.
 * __builtin_cpu_supports would link libgcc's __cpu_indicator_init, a
 * constructor that runs a dozen CPUID instructions in every cordon process,
 * `cordon run` included, which never encodes base64; under a hypervisor
 * that traps CPUID (about 4 us each) that is 45 us of every run.
 */
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#define CPU_HAS(glibc_name, gcc_name) CPU_FEATURE_ACTIVE(glibc_name)
#endif
#endif
#ifndef CPU_HAS
#define CPU_HAS(glibc_name, gcc_name) __builtin_cpu_supports(gcc_name)
#define NEED_CPU_INIT		      1
#endif
#endif

enum impl {
	IMPL_SCALAR,
	IMPL_SSSE3,
	IMPL_AVX2,
	IMPL_AVX512VBMI,
	IMPL_COUNT,
	IMPL_INVALID = -EINVAL,
};

static const char *const impl_names[IMPL_COUNT] = {
	[IMPL_SCALAR] = "scalar",
	[IMPL_SSSE3] = "ssse3",
	[IMPL_AVX2] = "avx2",
	[IMPL_AVX512VBMI] = "avx512vbmi",
};

static const char alphabet[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* pairs[v] = the two characters for the 12-bit value v, in memory order. */
static char pairs[4096][2];
/* 0..63 for alphabet characters, 0xff otherwise. */
static uint8_t dec[256];
static bool tables_ready;
/* The implementation in use; IMPL_INVALID until the first call picks one. */
static enum impl impl = IMPL_INVALID;

static bool impl_supported(enum impl i)
{
	switch (i) {
	case IMPL_SCALAR:
		return true;
#ifdef X86_SIMD
	case IMPL_SSSE3:
		return CPU_HAS(SSSE3, "ssse3");
	case IMPL_AVX2:
		return CPU_HAS(AVX2, "avx2");
	case IMPL_AVX512VBMI:
		/* Both check that the OS saves the zmm state ("active", "supports"). */
		return CPU_HAS(AVX512_VBMI, "avx512vbmi") && CPU_HAS(AVX512BW, "avx512bw");
#else
	case IMPL_SSSE3:
	case IMPL_AVX2:
	case IMPL_AVX512VBMI:
		return false;
#endif
	case IMPL_COUNT:
	case IMPL_INVALID:
		break;
	}
	return false;
}

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
#ifdef NEED_CPU_INIT
	__builtin_cpu_init();
#endif
	if (impl == IMPL_INVALID)
		for (impl = IMPL_COUNT - 1; !impl_supported(impl); impl--)
			;
	tables_ready = true;
}

int cd_base64_use_impl(const char *name)
{
	init_tables();
	enum impl best = IMPL_COUNT - 1;
	while (!impl_supported(best))
		best--;
	if (!name) {
		impl = best;
		return 0;
	}
	for (enum impl i = 0; i < IMPL_COUNT; i++) {
		if (strcmp(name, impl_names[i]) != 0)
			continue;
		if (!impl_supported(i))
			return -EOPNOTSUPP;
		impl = i;
		return 0;
	}
	return -EINVAL;
}

const char *cd_base64_impl(void)
{
	init_tables();
	return impl_names[impl];
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

static size_t encode_scalar(const unsigned char *data, size_t n, char *out)
{
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

#ifdef X86_SIMD
/*
 * 12 bytes in the low 12 bytes of each 128-bit lane -> their 16 characters.
 * Each group (a, b, c) becomes the 32-bit lane b|a<<8|c<<16|b<<24: in its
 * low 16 bits the fields are a>>2 at bit 10 and the next one at bit 4, in its
 * high 16 bits at 6 and 0. A multiply-high by 2^6 (2^10) and a multiply-low
 * by 2^4 (2^8) move each field to the low bits of its own byte.
 */
__attribute__((target("ssse3"))) static inline __m128i enc_fields_128(__m128i in)
{
	const __m128i spread = _mm_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
	__m128i v = _mm_shuffle_epi8(in, spread);
	__m128i hi = _mm_mulhi_epu16(_mm_and_si128(v, _mm_set1_epi32(0x0fc0fc00)),
				     _mm_set1_epi32(0x04000040));
	__m128i lo = _mm_mullo_epi16(_mm_and_si128(v, _mm_set1_epi32(0x003f03f0)),
				     _mm_set1_epi32(0x01000010));
	return _mm_or_si128(hi, lo);
}

/*
 * 6-bit values -> alphabet. Values 52..63 saturate to 1..12 after
 * subtracting 51, 26..51 to 0, and 0..25 are then marked 13: a 16-entry
 * table gives the offset to add for each of these classes.
 */
__attribute__((target("ssse3"))) static inline __m128i enc_ascii_128(__m128i v)
{
	const __m128i offsets = _mm_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
					      '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
					      '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
	__m128i cls = _mm_subs_epu8(v, _mm_set1_epi8(51));
	__m128i upper = _mm_cmpgt_epi8(_mm_set1_epi8(26), v);
	cls = _mm_or_si128(cls, _mm_and_si128(upper, _mm_set1_epi8(13)));
	return _mm_add_epi8(v, _mm_shuffle_epi8(offsets, cls));
}

/* Whole groups while 16 bytes can be loaded; returns the input bytes done. */
__attribute__((target("ssse3"))) static size_t encode_ssse3(const unsigned char *data, size_t n,
							    char *out)
{
	size_t i = 0;
	for (; n - i >= 16; i += 12, out += 16) {
		__m128i in = _mm_loadu_si128((const __m128i *)(data + i));
		_mm_storeu_si128((__m128i *)out, enc_ascii_128(enc_fields_128(in)));
	}
	return i;
}

/* The same as the 128-bit versions, per lane. */
__attribute__((target("avx2"))) static inline __m256i enc_avx2(__m256i in)
{
	const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
						1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
	const __m256i offsets = _mm256_setr_epi8(
		'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
		'0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0, 'a' - 26, '0' - 52,
		'0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
		'0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
	__m256i v = _mm256_shuffle_epi8(in, spread);
	__m256i hi = _mm256_mulhi_epu16(_mm256_and_si256(v, _mm256_set1_epi32(0x0fc0fc00)),
					_mm256_set1_epi32(0x04000040));
	__m256i lo = _mm256_mullo_epi16(_mm256_and_si256(v, _mm256_set1_epi32(0x003f03f0)),
					_mm256_set1_epi32(0x01000010));
	v = _mm256_or_si256(hi, lo);
	__m256i cls = _mm256_subs_epu8(v, _mm256_set1_epi8(51));
	__m256i upper = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), v);
	cls = _mm256_or_si256(cls, _mm256_and_si256(upper, _mm256_set1_epi8(13)));
	return _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, cls));
}

/*
 * 24 bytes per step, two 16-byte loads 12 bytes apart (one per lane), so
 * 28 bytes must be readable.
 */
__attribute__((target("avx2"))) static size_t encode_avx2(const unsigned char *data, size_t n,
							  char *out)
{
	size_t i = 0;
	for (; n - i >= 28; i += 24, out += 32) {
		__m128i a = _mm_loadu_si128((const __m128i *)(data + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(data + i + 12));
		__m256i in = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
		_mm256_storeu_si256((__m256i *)out, enc_avx2(in));
	}
	return i;
}

/*
 * 48 bytes per step: a byte permute builds the same 32-bit lanes as above
 * from 16 groups, one multishift picks each 6-bit field (at bits 10, 4, 22
 * and 16 of each lane) into its own byte, and a second permute maps the low
 * 6 bits of each byte through the alphabet. 64 bytes must be readable.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static size_t
encode_avx512vbmi(const unsigned char *data, size_t n, char *out)
{
	/* clang-format off */
	static const uint8_t idx[64] = {
		1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
		13, 12, 14, 13, 16, 15, 17, 16, 19, 18, 20, 19, 22, 21, 23, 22,
		25, 24, 26, 25, 28, 27, 29, 28, 31, 30, 32, 31, 34, 33, 35, 34,
		37, 36, 38, 37, 40, 39, 41, 40, 43, 42, 44, 43, 46, 45, 47, 46,
	};
	/* clang-format on */
	const __m512i spread = _mm512_loadu_si512(idx);
	const __m512i lut = _mm512_loadu_si512(alphabet);
	const __m512i shifts = _mm512_set1_epi64(0x3036242a1016040aLL);
	size_t i = 0;
	for (; n - i >= 64; i += 48, out += 64) {
		__m512i in = _mm512_loadu_si512(data + i);
		__m512i v =
			_mm512_multishift_epi64_epi8(shifts, _mm512_permutexvar_epi8(spread, in));
		_mm512_storeu_si512(out, _mm512_permutexvar_epi8(v, lut));
	}
	return i;
}

/*
 * Decoding, 16 (32) characters -> 12 (24) bytes. A character is invalid
 * when the bits the table of its low nibble and the table of its high nibble
 * give it share one: bit 0 = high nibble 0, 1 or 8..f (nothing valid), bit 1
 * = 0x2_ other than '+' and '/', bit 2 = 0x3_ past '9', bit 3 = 0x40 and
 * 0x60, bit 4 = 0x5_ and 0x7_ past 'Z' and 'z'. The value is the character
 * plus an offset picked by high nibble, '/' moved to its own slot (1). Then
 * multiply-adds pack each 4 x 6 bits into 3 bytes, reversed by the shuffle.
 * A block with an invalid character stops the loop: the scalar code then
 * finds it and rejects the input.
 */
/* clang-format off */
#define DEC_LO_BITS 0x0b, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, \
		    0x03, 0x03, 0x07, 0x15, 0x17, 0x17, 0x17, 0x15
#define DEC_HI_BITS 0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x08, 0x10, \
		    0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01
#define DEC_OFFSETS 0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0
#define DEC_PACK    2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1
/* clang-format on */

__attribute__((target("ssse3"))) static size_t decode_ssse3(const unsigned char *in, size_t n,
							    unsigned char *out)
{
	const __m128i lo_bits = _mm_setr_epi8(DEC_LO_BITS), hi_bits = _mm_setr_epi8(DEC_HI_BITS);
	const __m128i offsets = _mm_setr_epi8(DEC_OFFSETS), pack = _mm_setr_epi8(DEC_PACK);
	const __m128i nibble = _mm_set1_epi8(0x0f);
	size_t i = 0;
	for (; n - i >= 16; i += 16, out += 12) {
		__m128i v = _mm_loadu_si128((const __m128i *)(in + i));
		__m128i hi = _mm_and_si128(_mm_srli_epi32(v, 4), nibble);
		__m128i lo = _mm_and_si128(v, nibble);
		__m128i bad =
			_mm_and_si128(_mm_shuffle_epi8(lo_bits, lo), _mm_shuffle_epi8(hi_bits, hi));
		if (_mm_movemask_epi8(_mm_cmpeq_epi8(bad, _mm_setzero_si128())) != 0xffff)
			break;
		hi = _mm_add_epi8(hi, _mm_cmpeq_epi8(v, _mm_set1_epi8('/')));
		v = _mm_add_epi8(v, _mm_shuffle_epi8(offsets, hi));
		v = _mm_maddubs_epi16(v, _mm_set1_epi32(0x01400140));
		v = _mm_madd_epi16(v, _mm_set1_epi32(0x00011000));
		v = _mm_shuffle_epi8(v, pack);
		_mm_storel_epi64((__m128i *)out, v);
		uint32_t last = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v, 8));
		memcpy(out + 8, &last, 4);
	}
	return i;
}

__attribute__((target("avx2"))) static size_t decode_avx2(const unsigned char *in, size_t n,
							  unsigned char *out)
{
	const __m256i lo_bits = _mm256_setr_epi8(DEC_LO_BITS, DEC_LO_BITS);
	const __m256i hi_bits = _mm256_setr_epi8(DEC_HI_BITS, DEC_HI_BITS);
	const __m256i offsets = _mm256_setr_epi8(DEC_OFFSETS, DEC_OFFSETS);
	const __m256i pack = _mm256_setr_epi8(DEC_PACK, DEC_PACK);
	const __m256i nibble = _mm256_set1_epi8(0x0f);
	/* The 12 bytes of each lane, made contiguous. */
	const __m256i join = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
	size_t i = 0;
	for (; n - i >= 32; i += 32, out += 24) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(in + i));
		__m256i hi = _mm256_and_si256(_mm256_srli_epi32(v, 4), nibble);
		__m256i lo = _mm256_and_si256(v, nibble);
		if (!_mm256_testz_si256(_mm256_shuffle_epi8(lo_bits, lo),
					_mm256_shuffle_epi8(hi_bits, hi)))
			break;
		hi = _mm256_add_epi8(hi, _mm256_cmpeq_epi8(v, _mm256_set1_epi8('/')));
		v = _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, hi));
		v = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140));
		v = _mm256_madd_epi16(v, _mm256_set1_epi32(0x00011000));
		v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pack), join);
		_mm_storeu_si128((__m128i *)out, _mm256_castsi256_si128(v));
		_mm_storel_epi64((__m128i *)(out + 16), _mm256_extracti128_si256(v, 1));
	}
	return i;
}
#endif

size_t cd_base64_encode(const unsigned char *data, size_t n, char *out)
{
	init_tables();
	size_t done = 0;
#ifdef X86_SIMD
	switch (impl) {
	case IMPL_AVX512VBMI:
		done = encode_avx512vbmi(data, n, out);
		break;
	case IMPL_AVX2:
		done = encode_avx2(data, n, out);
		break;
	case IMPL_SSSE3:
		done = encode_ssse3(data, n, out);
		break;
	case IMPL_SCALAR:
	case IMPL_COUNT:
	case IMPL_INVALID:
		break;
	}
#endif
	return done / 3 * 4 + encode_scalar(data + done, n - done, out + done / 3 * 4);
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
	size_t i = 0;
#ifdef X86_SIMD
	switch (impl) {
	case IMPL_AVX512VBMI:
	case IMPL_AVX2:
		i = decode_avx2(p, full, o);
		break;
	case IMPL_SSSE3:
		i = decode_ssse3(p, full, o);
		break;
	case IMPL_SCALAR:
	case IMPL_COUNT:
	case IMPL_INVALID:
		break;
	}
	o += i / 4 * 3;
#endif

	for (; i < full; i += 4) {
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

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Small OS-free helpers shared by the whole tree: allocation that dies on
 * OOM (the bwrap model: a supervisor that cannot allocate cannot do anything
 * useful), a growable string buffer, NULL-terminated string vectors and the
 * cleanup attributes.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CD_UNUSED __attribute__((unused))
/* mingw-w64 (cordon.exe) builds with its C99 stdio: check formats as GNU's. */
#ifdef __MINGW32__
#define CD_PRINTF(a, b) __attribute__((format(gnu_printf, a, b)))
#else
#define CD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#endif
#define CD_NORETURN	 __attribute__((noreturn))
#define CD_ARRAY_SIZE(x) (sizeof(x) / sizeof((x)[0]))
#define CD_CLEANUP(f)	 __attribute__((cleanup(f)))

/* Take ownership out of a variable that has a cleanup attribute. */
#define cd_steal_pointer(pp)                       \
	({                                         \
		__typeof__(*(pp)) _cd_tmp = *(pp); \
		*(pp) = NULL;                      \
		_cd_tmp;                           \
	})

void cd_cleanup_freep(void *p);
#define cleanup_free CD_CLEANUP(cd_cleanup_freep)

/* Allocators: never return NULL; print a message and abort on OOM. */
void *cd_xmalloc(size_t n);
void *cd_xcalloc(size_t nmemb, size_t size);
void *cd_xrealloc(void *p, size_t n);
/* Grow an array of nmemb elements of size: reallocarray with OOM abort. */
void *cd_xreallocarray(void *p, size_t nmemb, size_t size);
char *cd_xstrdup(const char *s);
char *cd_xstrndup(const char *s, size_t n);
char *cd_xasprintf(const char *fmt, ...) CD_PRINTF(1, 2);
char *cd_xvasprintf(const char *fmt, va_list ap) CD_PRINTF(1, 0);

static inline bool cd_streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static inline bool cd_startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Growable NUL-terminated byte buffer. Zero-initialise before use. */
struct cd_strbuf {
	char *buf;  /* NULL until the first append; always NUL-terminated after */
	size_t len; /* bytes used, excluding the terminating NUL */
	size_t cap;
};

/* Room for extra more bytes (and the NUL) without another allocation. */
void cd_strbuf_reserve(struct cd_strbuf *sb, size_t extra);
void cd_strbuf_append(struct cd_strbuf *sb, const char *s);
void cd_strbuf_append_n(struct cd_strbuf *sb, const char *s, size_t n);
void cd_strbuf_append_c(struct cd_strbuf *sb, char c);
void cd_strbuf_printf(struct cd_strbuf *sb, const char *fmt, ...) CD_PRINTF(2, 3);
/* Append s as a JSON string literal (quotes and escapes included). Bytes that
 * are not valid UTF-8 become U+FFFD, so the output is always valid JSON. */
void cd_strbuf_append_json_string(struct cd_strbuf *sb, const char *s, size_t n);
/* The NUL-terminated s as a JSON string literal, or null for NULL. */
void cd_strbuf_append_json_cstr(struct cd_strbuf *sb, const char *s);
/* A copy of s in which every byte that is not part of valid UTF-8 is
 * U+FFFD: for output that must be UTF-8 (JSON), where paths are bytes. */
char *cd_utf8_lossy(const char *s);
/* Return the buffer (never NULL, "" when empty) and reset sb. Caller frees. */
char *cd_strbuf_steal(struct cd_strbuf *sb);
void cd_strbuf_done(struct cd_strbuf *sb);

/*
 * s as it may go on a terminal or in a log line: a control character (a
 * path may hold a newline or an escape sequence) becomes \n, \t, \r or
 * \xHH, so that one entry stays one line and nothing reaches the terminal
 * as a command. Returns s itself when it has none ("" for NULL), or a copy
 * left in *hold (the previous one freed), which the caller frees.
 */
const char *cd_vis(const char *s, char **hold);

/*
 * Whether the n bytes at s (not NUL-terminated) are one of the count
 * strings of list, ASCII letters compared without case: a header field or
 * an environment variable name against the names it may be.
 */
bool cd_name_in(const char *s, size_t n, const char *const *list, size_t count);

/* NULL-terminated vector of owned strings. */
size_t cd_strv_length(char *const *v);
/* Append a copy of s; *v may be NULL. */
void cd_strv_push(char ***v, const char *s);
/* Append s taking ownership. */
void cd_strv_push_take(char ***v, char *s);
/*
 * Append s (taken) to *v, which holds *n strings: amortized O(1), where
 * cd_strv_push counts the vector first (O(n) each). *v must only ever grow
 * through this function (its capacity is implied by *n: powers of two).
 */
void cd_strv_append_take(char ***v, size_t *n, char *s);
/*
 * Room for one more element in an array of n (of size bytes each) that only
 * grows through this function: amortized O(1) (powers of two). Returns p.
 */
void *cd_grow_pow2(void *p, size_t n, size_t size);

/* A set of strings (open addressing; copies them). Zero-initialise; cd_strset_done frees. */
struct cd_strset {
	char **slot;
	size_t cap, n;
};
/* Add a copy of s: true when it was not there yet. */
bool cd_strset_add(struct cd_strset *set, const char *s);
bool cd_strset_has(const struct cd_strset *set, const char *s);
void cd_strset_done(struct cd_strset *set);
char **cd_strv_free(char **v);

/* Value of a hexadecimal digit (either case), or -1. */
int cd_unhex(unsigned char c);

/* Parse a decimal unsigned integer with full-string and overflow checks. 0 or -EINVAL/-ERANGE. */
int cd_parse_u64(const char *s, uint64_t *ret);

/* Path helpers (pure string operations; no file system access). */
/* True if path is absolute and contains no "." or ".." component and no "//". */
bool cd_path_is_normal(const char *path);
/* Join a and b with exactly one '/'. */
char *cd_path_join(const char *a, const char *b);
/* The directory of an absolute path, as a new string: "/a/b" -> "/a", "/a" -> "/". */
char *cd_path_parent(const char *path);
/*
 * An absolute path with "." components and repeated or trailing slashes
 * dropped, as a new string. ".." stays: only the file system can resolve it
 * (after a symlink before it, "x/.." is not the directory holding x).
 */
char *cd_path_tidy(const char *path);
/* Number of components: "/" = 0, "/a" = 1, "/a/b" = 2. */
size_t cd_path_depth(const char *normal_path);
/* True if child equals parent or lies below it, component-wise ("/a" is not a prefix of "/ab"). */
bool cd_path_is_beneath(const char *child, const char *parent);

/*
 * The length of the Unicode White_Space character at s (n bytes, UTF-8:
 * the ASCII ones, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000), or 0 when s starts with none.
 */
size_t cd_utf8_space_len(const unsigned char *s, size_t n);
/* Rust's str::trim on valid UTF-8: *s and *n narrowed to the text between. */
void cd_utf8_trim(const char **s, size_t *n);

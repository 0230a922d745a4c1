/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * File write streaming (the released exec-server's fileWriteStreaming):
 * fs/open's modes ("read", the default, and "replace") and fs/writeBlock.
 *
 * fs/open "replace" creates the file or truncates it, on a worker, in the
 * sandboxed helper when a sandbox context restricts the file system, as
 * any fs/open (fs.c; the open itself is op_open_write in fs-ops.c): what a
 * sandbox may not write is refused there, where fs/writeFile is refused.
 * The handle it makes shares the connection's table and its limit of 128
 * with the read handles (fs-stream.c). fs/writeBlock writes one block at
 * the offset it names (pwrite: the file grows, a gap reads as zeros), on
 * an fs worker, never on the loop, in the order the connection's block
 * and close requests came; fs/close closes the handle (on a worker), as
 * the end of the connection does.
 *
 * The params are read as the released binary reads them (serde): members
 * in the order they come, each checked as it comes (the chunk decoded
 * then, with its base64 decoder's messages), missing ones after, in the
 * struct's order; a params array is the struct's fields in order. Then:
 * the handle id's length, the block's length (1 to 1 MiB decoded), the
 * range (offset + length within the signed 64-bit file offsets), the
 * handle.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/fs-ops.h"
#include "serve/fs-stream.h"
#include "serve/fs.h"
#include "serve/intent.h"
#include "serve/proc.h"
#include "serve/server.h"

#define FS_WRITE_BLOCK_MAX (1024u * 1024)

/* ---- base64, as the released binary decodes a chunk ----------------------- */

/*
 * The standard alphabet with canonical padding, and the messages of the
 * decoder the released binary uses (Rust's base64 crate, STANDARD): the
 * last quad (or the partial one) is the suffix, where '=' may end it after
 * two or three symbols, making a whole quad; before it any '=' is an
 * invalid symbol; unused bits of the last symbol must be zero. A lone
 * trailing invalid byte (a newline, say) is reported first. That accepts
 * exactly what cd_base64_decode (SIMD) accepts: b64_check only says why a
 * chunk is refused, or checks one too long to be a block without decoding
 * it. The decoded length in *ret_len. 0, or -EINVAL with *err set.
 */
static signed char b64_table[256];

static void b64_table_fill(void)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	memset(b64_table, -1, sizeof(b64_table));
	for (int i = 0; i < 64; i++)
		b64_table[(unsigned char)alphabet[i]] = (signed char)i;
}

/* Once: cd_base64_refusal runs on the fs workers too. */
static void b64_table_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, b64_table_fill);
}

static int b64_invalid(char **err, size_t off, unsigned char ch)
{
	*err = cd_xasprintf("Invalid symbol %u, offset %zu.", ch, off);
	return -EINVAL;
}

static int b64_check(const unsigned char *s, size_t len, size_t *ret_len, char **err)
{
	size_t rem = len % 4;
	b64_table_init();
	if (rem == 1 && s[len - 1] != '=' && b64_table[s[len - 1]] < 0)
		return b64_invalid(err, len - 1, s[len - 1]);
	/* The complete quads but the last (which may have padding), 64 bytes at a time. */
	size_t body = len - rem - (rem == 0 && len ? 4 : 0);
	for (size_t i = 0; i < body; i += 64) {
		size_t end = body - i < 64 ? body : i + 64;
		signed char bad = 0;
		for (size_t k = i; k < end; k++)
			bad |= b64_table[s[k]];
		for (size_t k = i; bad < 0 && k < end; k++)
			if (b64_table[s[k]] < 0)
				return b64_invalid(err, k, s[k]);
	}
	/* The suffix: at most 4 bytes. */
	unsigned morsels = 0, pads = 0, first_pad = 0;
	unsigned char m[4] = { 0 }, last = 0;
	for (size_t k = 0; body + k < len; k++) {
		unsigned char ch = s[body + k];
		if (ch == '=') {
			if (k < 2)
				return b64_invalid(err, body + k, ch);
			if (!pads)
				first_pad = (unsigned)k;
			pads++;
			continue;
		}
		if (pads)
			return b64_invalid(err, body + first_pad, '=');
		if (b64_table[ch] < 0)
			return b64_invalid(err, body + k, ch);
		last = ch;
		m[morsels++] = (unsigned char)b64_table[ch];
	}
	if (len && morsels < 2) {
		*err = cd_xasprintf("Invalid input length: %zu", body + morsels);
		return -EINVAL;
	}
	if ((pads + morsels) % 4) {
		*err = cd_xstrdup("Invalid padding");
		return -EINVAL;
	}
	uint32_t v = (uint32_t)m[0] << 26 | (uint32_t)m[1] << 20 | (uint32_t)m[2] << 14 |
		     (uint32_t)m[3] << 8;
	unsigned bytes = morsels * 6 / 8;
	if (morsels && (v & (UINT32_MAX >> (bytes * 8)))) {
		*err = cd_xasprintf("Invalid last symbol %u, offset %zu.", last,
				    body + morsels - 1);
		return -EINVAL;
	}
	*ret_len = body / 4 * 3 + bytes;
	return 0;
}

char *cd_base64_refusal(const char *s, size_t len)
{
	size_t n;
	char *err = NULL;
	if (b64_check((const unsigned char *)s, len, &n, &err) == 0)
		return cd_xstrdup("invalid base64 input");
	return err;
}

/*
 * Decode a chunk into *ret (NULL when it is valid but longer than a block
 * can be: only its length is known then). 0, or -EINVAL with *err set.
 */
static int b64_decode_chunk(const char *s, size_t len, unsigned char **ret, size_t *ret_len,
			    char **err)
{
	bool fits = len / 4 * 3 <= FS_WRITE_BLOCK_MAX + 3;
	*ret = NULL;
	if (fits && cd_base64_decode(s, len, ret, ret_len) == 0)
		return 0;
	if (b64_check((const unsigned char *)s, len, ret_len, err) < 0)
		return -EINVAL;
	if (fits) {
		/* The two decoders disagree: refused, never written half-understood. */
		*err = cd_xstrdup("Invalid padding");
		return -EINVAL;
	}
	return 0;
}

/* ---- fs/writeBlock ------------------------------------------------------- */

struct wb_params {
	const struct cd_json *hid;
	uint64_t off;
	bool has_off;
	unsigned char *data; /* decoded */
	size_t n;
	const struct cd_json *chunk;
};

/* The released binary's type error: a number is "number", whatever its value. */
static char *invalid_type(const struct cd_json *v, const char *exp)
{
	if (v->type == CD_JSON_NUMBER)
		return cd_xasprintf("invalid type: number, expected %s", exp);
	return cd_param_invalid(v, exp, NULL);
}

/* One field, as it comes: 0, or -EINVAL with *err set. */
static int wb_field(struct wb_params *p, unsigned which, const struct cd_json *v, char **err)
{
	switch (which) {
	case 0:
		if (v->type != CD_JSON_STRING) {
			*err = invalid_type(v, "a string");
			return -EINVAL;
		}
		p->hid = v;
		return 0;
	case 1:
		if (v->type == CD_JSON_NUMBER && cd_json_uint64(v, &p->off) < 0) {
			*err = cd_xstrdup("invalid number");
			return -EINVAL;
		}
		if (v->type != CD_JSON_NUMBER) {
			*err = cd_param_invalid(v, "u64", NULL);
			return -EINVAL;
		}
		p->has_off = true;
		return 0;
	default:
		if (v->type != CD_JSON_STRING) {
			*err = invalid_type(v, "a string");
			return -EINVAL;
		}
		free(p->data);
		p->chunk = v;
		/*
		 * A chunk that cannot be a block (more than 1 MiB decoded) is
		 * only checked, not decoded: its length is refused below.
		 */
		return b64_decode_chunk(v->u.str.s, v->u.str.len, &p->data, &p->n, err);
	}
}

static int wb_parse(const struct cd_json *params, struct wb_params *p, char **err)
{
	static const char *const names[] = { "handleId", "offset", "chunk" };
	static const struct cd_json null_value = { .type = CD_JSON_NULL };
	if (params && params->type == CD_JSON_ARRAY) {
		size_t n = params->u.arr.n;
		for (size_t i = 0; i < n && i < 3; i++)
			if (wb_field(p, (unsigned)i, params->u.arr.items[i], err) < 0)
				return -EINVAL;
		if (n < 3) {
			*err = cd_xasprintf(
				"invalid length %zu, expected struct FsWriteBlockParams "
				"with 3 elements",
				n);
			return -EINVAL;
		}
		if (n > 3) {
			*err = cd_xasprintf("invalid length %zu, expected fewer elements in array",
					    n);
			return -EINVAL;
		}
		return 0;
	}
	if (!params || params->type != CD_JSON_OBJECT) {
		*err = cd_param_invalid(params ? params : &null_value, "struct FsWriteBlockParams",
					NULL);
		return -EINVAL;
	}
	for (size_t i = 0; i < params->u.obj.n; i++) {
		const struct cd_json_member *mb = &params->u.obj.members[i];
		for (unsigned k = 0; k < 3; k++)
			if (mb->key_len == strlen(names[k]) &&
			    !memcmp(mb->key, names[k], mb->key_len) &&
			    wb_field(p, k, mb->value, err) < 0)
				return -EINVAL;
	}
	if (!p->hid || !p->has_off || !p->chunk) {
		*err = cd_param_missing(!p->hid ? "handleId" : !p->has_off ? "offset" : "chunk");
		return -EINVAL;
	}
	return 0;
}

/* fs/writeBlock, at its turn (a deferred one, from fs.c, too). */
static void write_block(struct cd_conn *c, const char *id, const struct cd_json *params,
			bool in_order)
{
	struct wb_params p = { 0 };
	char *err = NULL;
	if (wb_parse(params, &p, &err) < 0) {
		cd_fs_stream_error(c, id, CD_RPC_INVALID_PARAMS, err);
		goto out;
	}
	const char *hid = p.hid->u.str.s;
	size_t hid_len = p.hid->u.str.len;
	if (hid_len > CD_FS_HANDLE_ID_MAX) {
		cd_fs_stream_error(c, id, CD_RPC_INVALID_REQUEST,
				   cd_xstrdup("file handle ID must not exceed 32 bytes"));
		goto out;
	}
	if (p.n < 1 || p.n > FS_WRITE_BLOCK_MAX) {
		cd_fs_stream_error(c, id, CD_RPC_INVALID_REQUEST,
				   cd_xstrdup("file write block length must be between 1 and "
					      "1048576"));
		goto out;
	}
	if (p.off > (uint64_t)INT64_MAX - p.n) {
		cd_fs_stream_error(c, id, CD_RPC_INVALID_REQUEST,
				   cd_xstrdup("file write range exceeds the signed 64-bit file "
					      "offset limit"));
		goto out;
	}
	if (in_order && cd_fs_open_queued(c, hid, hid_len)) {
		/* Behind its fs/open: performed at its turn, parsed again then. */
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "{\"handleId\":");
		cd_strbuf_append_json_string(&sb, hid, hid_len);
		cd_strbuf_printf(&sb, ",\"offset\":%llu,\"chunk\":", (unsigned long long)p.off);
		cd_strbuf_append_json_string(&sb, p.chunk->u.str.s, p.chunk->u.str.len);
		cd_strbuf_append_c(&sb, '}');
		cd_fs_defer(c, id, hid, hid_len, cd_fs_write_block, cd_strbuf_steal(&sb));
		goto out;
	}
	cd_fs_stream_write(c, id, hid, hid_len, p.off, p.data, p.n);
	p.data = NULL;
out:
	free(p.data);
}

void cd_fs_write_block(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	write_block(c, id, params, false);
}

void cd_fs_write_block_in_order(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	write_block(c, id, params, true);
}

/* ---- fs/open ------------------------------------------------------------- */

/* fs/open's mode: absent or "read" (false), "replace" (true); as a string or a one-key map. */
static int open_mode(const struct cd_json *params, bool *write, char **err)
{
	const struct cd_json *v = cd_json_get(params, "mode");
	const char *name;
	size_t len;
	*write = false;
	if (!v)
		return 0;
	if (v->type == CD_JSON_STRING) {
		name = v->u.str.s;
		len = v->u.str.len;
	} else if (v->type == CD_JSON_OBJECT && v->u.obj.n == 1) {
		name = v->u.obj.members[0].key;
		len = v->u.obj.members[0].key_len;
	} else if (v->type == CD_JSON_OBJECT) {
		*err = cd_xstrdup("invalid value: map, expected map with a single key");
		return -EINVAL;
	} else {
		*err = invalid_type(v, "string or map");
		return -EINVAL;
	}
	if (len == 7 && !memcmp(name, "replace", 7))
		*write = true;
	else if (len != 4 || memcmp(name, "read", 4)) {
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "unknown variant `");
		cd_strbuf_append_n(&sb, name, len);
		cd_strbuf_append(&sb, "`, expected `read` or `replace`");
		*err = cd_strbuf_steal(&sb);
		return -EINVAL;
	}
	if (v->type == CD_JSON_OBJECT && v->u.obj.members[0].value->type != CD_JSON_NULL) {
		*err = invalid_type(v->u.obj.members[0].value, "unit");
		return -EINVAL;
	}
	return 0;
}

void cd_fs_open(struct cd_conn *c, const char *id, const struct cd_json *params)
{
	struct cd_fs_req q = { .op = CD_FS_OPEN };
	const struct cd_json *hid;
	bool write = false;
	char *err = NULL;

	if (cd_param_object(params, "struct WireFsOpenParams", &err) < 0 ||
	    cd_param_string(params, "handleId", "handleId", true, false, &hid, &err) < 0 ||
	    cd_fs_get_path(params, "path", &q.path, &err) < 0 ||
	    open_mode(params, &write, &err) < 0) {
		cd_conn_error(c, id, CD_RPC_INVALID_PARAMS, err);
		goto out;
	}
	if (hid->u.str.len > CD_FS_HANDLE_ID_MAX) {
		cd_conn_error(c, id, CD_RPC_INVALID_REQUEST,
			      "file handle ID must not exceed 32 bytes");
		goto out;
	}
	if (cd_fs_stream_open_refused(c, id, hid->u.str.s, hid->u.str.len))
		goto out;
	/* Opened inside the confinement (when there is one), read or written outside. */
	if (write)
		q.op = CD_FS_OPEN_WRITE;
	cd_fs_submit(c, id, &q, params, hid->u.str.s, hid->u.str.len);
out:
	free(err);
	cd_fs_req_done(&q);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/plugincache.h"
#include "core/util.h"

static bool alnum(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool digits_only(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

bool cd_plugin_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || s[0] == '.' || s[n - 1] == '.' || strstr(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum(s[i]) && !strchr("-_.", s[i]))
			return false;
	return true;
}

bool cd_plugin_version_ok(const char *s)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!alnum(*s) && !strchr("-_.+", *s))
			return false;
	return true;
}

/* A version, as Rust's semver crate parses it: the spans of its parts. */
struct semver {
	const char *num[3];
	size_t num_n[3];
	const char *pre, *build; /* NULL when absent */
	size_t pre_n, build_n;
};

/* A numeric part: digits, no leading zero, within u64. */
static bool num_ok(const char *s, size_t n)
{
	if (!n || !digits_only(s, n) || (n > 1 && s[0] == '0') || n > 20)
		return false;
	return n < 20 || memcmp(s, "18446744073709551615", 20) <= 0;
}

/* Dot-separated identifiers of [0-9A-Za-z-], none empty; numeric ones checked when pre. */
static bool idents_ok(const char *s, size_t n, bool pre)
{
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.') {
			if (!alnum(s[i]) && s[i] != '-')
				return false;
			continue;
		}
		size_t len = i - start;
		if (!len)
			return false;
		if (pre && digits_only(s + start, len) && !num_ok(s + start, len))
			return false;
		start = i + 1;
	}
	return true;
}

static bool semver_parse(const char *s, struct semver *v)
{
	memset(v, 0, sizeof(*v));
	size_t n = strlen(s), core = strcspn(s, "-+");
	const char *p = s;
	for (int k = 0; k < 3; k++) {
		const char *end = memchr(p, '.', (size_t)(s + core - p));
		if (k < 2 && !end)
			return false;
		if (k == 2)
			end = s + core;
		v->num[k] = p;
		v->num_n[k] = (size_t)(end - p);
		if (!num_ok(p, v->num_n[k]))
			return false;
		p = end + 1;
	}
	size_t i = core;
	if (i < n && s[i] == '-') {
		size_t e = i + 1 + strcspn(s + i + 1, "+");
		v->pre = s + i + 1;
		v->pre_n = e - i - 1;
		if (!idents_ok(v->pre, v->pre_n, true))
			return false;
		i = e;
	}
	if (i < n) { /* '+' */
		v->build = s + i + 1;
		v->build_n = n - i - 1;
		if (!idents_ok(v->build, v->build_n, false))
			return false;
	}
	return true;
}

static int sign(int c)
{
	return (c > 0) - (c < 0);
}

/* Decimal strings without leading zeros: by length, then bytes. */
static int num_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	if (an != bn)
		return an < bn ? -1 : 1;
	return sign(memcmp(a, b, an));
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c ? sign(c) : (an > bn) - (an < bn);
}

/* Identifier lists: numeric below alphanumeric; build numerics compared without zeros. */
static int idents_cmp(const char *a, size_t an, const char *b, size_t bn, bool build)
{
	size_t i = 0, j = 0;
	for (;;) {
		if (i > an && j > bn)
			return 0;
		if (i > an)
			return -1;
		if (j > bn)
			return 1;
		size_t x = i, y = j;
		while (x < an && a[x] != '.')
			x++;
		while (y < bn && b[y] != '.')
			y++;
		const char *p = a + i, *q = b + j;
		size_t pn = x - i, qn = y - j;
		bool pd = digits_only(p, pn), qd = digits_only(q, qn);
		int c;
		if (pd && qd) {
			size_t pz = 0, qz = 0;
			while (build && pz < pn && p[pz] == '0')
				pz++;
			while (build && qz < qn && q[qz] == '0')
				qz++;
			c = num_cmp(p + pz, pn - pz, q + qz, qn - qz);
			if (!c)
				c = (pn > qn) - (pn < qn);
		} else if (pd != qd) {
			c = pd ? -1 : 1;
		} else {
			c = bytes_cmp(p, pn, q, qn);
		}
		if (c)
			return c;
		i = x + 1;
		j = y + 1;
	}
}

int cd_plugin_version_cmp(const char *a, const char *b)
{
	struct semver x, y;
	if (!semver_parse(a, &x) || !semver_parse(b, &y))
		return sign(strcmp(a, b));
	for (int k = 0; k < 3; k++) {
		int c = num_cmp(x.num[k], x.num_n[k], y.num[k], y.num_n[k]);
		if (c)
			return c;
	}
	if (!x.pre != !y.pre)
		return x.pre ? -1 : 1; /* a pre-release comes before its release */
	if (x.pre) {
		int c = idents_cmp(x.pre, x.pre_n, y.pre, y.pre_n, false);
		if (c)
			return c;
	}
	if (!x.build != !y.build)
		return x.build ? 1 : -1;
	return x.build ? idents_cmp(x.build, x.build_n, y.build, y.build_n, true) : 0;
}

const char *cd_plugin_version_pick(const char *const *v, size_t n)
{
	const char *best = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i], CD_PLUGIN_VERSION_DEFAULT))
			return v[i];
		if (!best || cd_plugin_version_cmp(v[i], best) > 0)
			best = v[i];
	}
	return best;
}

static int parse(const char *s, size_t len, struct cd_json **v, const char **why)
{
	struct cd_json_error je;
	struct cd_json_limits lim = { 0 };
	if (cd_json_parse(s, len, &lim, v, &je) == 0)
		return CD_PLUGIN_OK;
	if (strstr(je.msg, "duplicate")) {
		*why = "a key repeats (serde takes some repeated keys and refuses others)";
		return CD_PLUGIN_UNSUPPORTED;
	}
	*why = "not JSON";
	return CD_PLUGIN_INVALID;
}

int cd_plugin_remote_id(const char *s, size_t len, char **id, const char **why)
{
	struct cd_json *v = NULL;
	const struct cd_json *ver = NULL, *rid = NULL;
	int r;

	*id = NULL;
	if (len > CD_PLUGIN_REMOTE_MAX) {
		*why = "remote installation metadata exceeds its byte limit";
		return CD_PLUGIN_INVALID;
	}
	if ((r = parse(s, len, &v, why)))
		return r;
	r = CD_PLUGIN_INVALID;
	if (v->type == CD_JSON_OBJECT) {
		ver = cd_json_get(v, "schema_version");
		rid = cd_json_get(v, "remote_plugin_id");
	} else if (v->type == CD_JSON_ARRAY && v->u.arr.n == 2) {
		ver = v->u.arr.items[0];
		rid = v->u.arr.items[1];
	}
	uint64_t n;
	if (!ver || !rid || ver->type != CD_JSON_NUMBER || cd_json_uint64(ver, &n) < 0 || n > 255 ||
	    rid->type != CD_JSON_STRING) {
		*why = "failed to parse remote plugin install metadata";
		goto out;
	}
	if (n != 1) {
		*why = "unsupported remote plugin install metadata schema version";
		goto out;
	}
	const char *p = rid->u.str.s;
	size_t pn = rid->u.str.len;
	cd_utf8_trim(&p, &pn);
	if (!pn) {
		*why = "invalid remote plugin install metadata: remote plugin id must not be blank";
		goto out;
	}
	if (pn > CD_PLUGIN_REMOTE_ID_MAX) {
		*why = "remote plugin ID exceeds its byte limit";
		goto out;
	}
	if (memchr(p, '\0', pn)) {
		*why = "the remote plugin id holds a NUL";
		r = CD_PLUGIN_UNSUPPORTED;
		goto out;
	}
	*id = cd_xstrndup(p, pn);
	r = CD_PLUGIN_OK;
out:
	cd_json_free(v);
	return r;
}

int cd_plugin_display_name(const char *s, size_t len, const char *dir_name, char **out,
			   const char **why)
{
	struct cd_json *v = NULL;
	int r;

	*out = NULL;
	if ((r = parse(s, len, &v, why)))
		return r;
	r = CD_PLUGIN_INVALID;
	if (v->type == CD_JSON_ARRAY) {
		*why = "the manifest is an array (serde reads some arrays as its struct)";
		r = CD_PLUGIN_UNSUPPORTED;
		goto out;
	}
	if (v->type != CD_JSON_OBJECT) {
		*why = "the manifest is not a JSON object";
		goto out;
	}
	const struct cd_json *name = cd_json_get(v, "name"), *apps = cd_json_get(v, "apps");
	const struct cd_json *in = cd_json_get(v, "interface"), *dn = NULL;
	if (name && name->type != CD_JSON_STRING) {
		*why = "the manifest's name is not a string";
		goto out;
	}
	if (apps && apps->type != CD_JSON_STRING && apps->type != CD_JSON_NULL) {
		*why = "the manifest's apps is not a path";
		goto out;
	}
	if (in && in->type == CD_JSON_ARRAY) {
		*why = "the manifest's interface is an array (serde reads some as its struct)";
		r = CD_PLUGIN_UNSUPPORTED;
		goto out;
	}
	if (in && in->type != CD_JSON_OBJECT && in->type != CD_JSON_NULL) {
		*why = "the manifest's interface is not an object";
		goto out;
	}
	if (in && in->type == CD_JSON_OBJECT)
		dn = cd_json_get(in, "displayName");
	if (dn && dn->type != CD_JSON_STRING && dn->type != CD_JSON_NULL) {
		*why = "the manifest's interface.displayName is not a string";
		goto out;
	}
	const char *p = NULL;
	size_t pn = 0;
	if (dn && dn->type == CD_JSON_STRING) {
		p = dn->u.str.s;
		pn = dn->u.str.len;
		cd_utf8_trim(&p, &pn);
	}
	if (!pn && name) {
		const char *t = name->u.str.s;
		size_t tn = name->u.str.len;
		cd_utf8_trim(&t, &tn);
		if (tn) {
			p = name->u.str.s; /* as it is, untrimmed */
			pn = name->u.str.len;
		}
	}
	if (!pn) {
		p = dir_name;
		pn = strlen(dir_name);
	}
	if (memchr(p, '\0', pn)) {
		*why = "the display name holds a NUL";
		r = CD_PLUGIN_UNSUPPORTED;
		goto out;
	}
	*out = cd_xstrndup(p, pn);
	r = CD_PLUGIN_OK;
out:
	cd_json_free(v);
	return r;
}

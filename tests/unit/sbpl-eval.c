/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The SBPL subset evaluator for tests (sbpl-eval.h). */
#include "sbpl-eval.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

enum kind {
	N_LIST,
	N_SYM,
	N_STR,
	N_REGEX
};

struct node {
	enum kind kind;
	char *text; /* SYM, STR, REGEX */
	struct node **kids;
	size_t n;
	regex_t re; /* REGEX, compiled */
	bool re_ok;
};

struct sbpl_policy {
	struct node **forms;
	size_t n;
	bool default_allow;
	const char *const *keys, *const *values;
	size_t n_params;
};

struct reader {
	const char *p;
	const char *err;
};

static void skip_space(struct reader *r)
{
	for (;;) {
		while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
			r->p++;
		if (*r->p != ';')
			return;
		while (*r->p && *r->p != '\n')
			r->p++;
	}
}

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->text);
	if (n->re_ok)
		regfree(&n->re);
	free(n);
}

static struct node *read_node(struct reader *r)
{
	skip_space(r);
	struct node *n = cd_xcalloc(1, sizeof(*n));
	if (*r->p == '(') {
		r->p++;
		n->kind = N_LIST;
		for (;;) {
			skip_space(r);
			if (*r->p == ')') {
				r->p++;
				return n;
			}
			if (!*r->p) {
				r->err = "unterminated list";
				node_free(n);
				return NULL;
			}
			struct node *k = read_node(r);
			if (!k) {
				node_free(n);
				return NULL;
			}
			n->kids = cd_xreallocarray(n->kids, n->n + 1, sizeof(*n->kids));
			n->kids[n->n++] = k;
		}
	}
	if (*r->p == '"' || (r->p[0] == '#' && r->p[1] == '"')) {
		bool raw = *r->p == '#';
		struct cd_strbuf sb = { 0 };
		r->p += raw ? 2 : 1;
		while (*r->p && *r->p != '"') {
			if (*r->p == '\\' && r->p[1]) {
				if (raw)
					cd_strbuf_append_c(&sb, *r->p);
				r->p++;
			}
			cd_strbuf_append_c(&sb, *r->p++);
		}
		if (*r->p != '"') {
			r->err = "unterminated string";
			cd_strbuf_done(&sb);
			free(n);
			return NULL;
		}
		r->p++;
		n->kind = raw ? N_REGEX : N_STR;
		n->text = sb.buf ? cd_strbuf_steal(&sb) : cd_xstrdup("");
		if (raw) {
			if (regcomp(&n->re, n->text, REG_EXTENDED | REG_NOSUB)) {
				r->err = "bad regex";
				node_free(n);
				return NULL;
			}
			n->re_ok = true;
		}
		return n;
	}
	const char *s = r->p;
	while (*r->p && !strchr(" \t\r\n()\";", *r->p))
		r->p++;
	if (r->p == s) {
		r->err = *r->p ? "unexpected character" : "unexpected end";
		free(n);
		return NULL;
	}
	n->kind = N_SYM;
	n->text = cd_xstrndup(s, (size_t)(r->p - s));
	return n;
}

static bool is_sym(const struct node *n, const char *s)
{
	return n && n->kind == N_SYM && cd_streq(n->text, s);
}

static const char *param_value(const struct sbpl_policy *p, const char *key)
{
	for (size_t i = 0; i < p->n_params; i++)
		if (cd_streq(p->keys[i], key))
			return p->values[i];
	return NULL;
}

/* Every (param "K") defined; mark the used ones. */
static bool check_params(const struct sbpl_policy *p, const struct node *n, bool *used)
{
	if (n->kind != N_LIST)
		return true;
	if (n->n == 2 && is_sym(n->kids[0], "param")) {
		if (n->kids[1]->kind != N_STR)
			return false;
		for (size_t i = 0; i < p->n_params; i++)
			if (cd_streq(p->keys[i], n->kids[1]->text)) {
				used[i] = true;
				return true;
			}
		return false;
	}
	for (size_t i = 0; i < n->n; i++)
		if (!check_params(p, n->kids[i], used))
			return false;
	return true;
}

void sbpl_free(struct sbpl_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		node_free(p->forms[i]);
	free(p->forms);
	free(p);
}

struct sbpl_policy *sbpl_parse(const char *text, const char *const *keys, const char *const *values,
			       size_t n, const char **err, const char **unused_param)
{
	struct sbpl_policy *p = cd_xcalloc(1, sizeof(*p));
	struct reader r = { .p = text };
	bool *used = cd_xcalloc(n + 1, sizeof(*used));

	p->keys = keys;
	p->values = values;
	p->n_params = n;
	*unused_param = NULL;
	for (;;) {
		skip_space(&r);
		if (!*r.p)
			break;
		struct node *f = read_node(&r);
		if (!f || f->kind != N_LIST || !f->n || f->kids[0]->kind != N_SYM) {
			*err = f ? "a top-level form is not a list headed by a symbol" : r.err;
			node_free(f);
			goto fail;
		}
		p->forms = cd_xreallocarray(p->forms, p->n + 1, sizeof(*p->forms));
		p->forms[p->n++] = f;
		const char *head = f->kids[0]->text;
		if (!cd_streq(head, "version") && !cd_streq(head, "allow") &&
		    !cd_streq(head, "deny")) {
			*err = "unknown top-level form";
			goto fail;
		}
		/*
		 * Filters side by side are alternatives: a condition on the kind
		 * of object (vnode-type, extension) among them allows every such
		 * object, whatever the others say. It belongs in a require-all.
		 */
		size_t n_filters = 0;
		bool kind_filter = false;
		for (size_t k = 1; k < f->n; k++) {
			if (f->kids[k]->kind != N_LIST)
				continue;
			n_filters++;
			kind_filter = kind_filter || is_sym(f->kids[k]->kids[0], "vnode-type") ||
				      is_sym(f->kids[k]->kids[0], "extension");
		}
		if (n_filters > 1 && kind_filter) {
			*err = "a vnode-type or extension filter is an alternative of its own";
			goto fail;
		}
		if (!check_params(p, f, used)) {
			*err = "a (param) names no -D parameter";
			goto fail;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (!used[i]) {
			*unused_param = keys[i];
			break;
		}
	free(used);
	return p;
fail:
	free(used);
	sbpl_free(p);
	return NULL;
}

static const char *value_of(const struct sbpl_policy *p, const struct node *n)
{
	if (n->kind == N_STR)
		return n->text;
	if (n->kind == N_LIST && n->n == 2 && is_sym(n->kids[0], "param"))
		return param_value(p, n->kids[1]->text);
	return NULL;
}

static bool filter_matches(const struct sbpl_policy *p, const struct node *f, const char *path)
{
	if (f->kind != N_LIST || !f->n || f->kids[0]->kind != N_SYM)
		return false;
	const char *h = f->kids[0]->text;
	if (cd_streq(h, "require-all")) {
		for (size_t i = 1; i < f->n; i++)
			if (!filter_matches(p, f->kids[i], path))
				return false;
		return true;
	}
	if (cd_streq(h, "require-any")) {
		for (size_t i = 1; i < f->n; i++)
			if (filter_matches(p, f->kids[i], path))
				return true;
		return false;
	}
	if (cd_streq(h, "require-not"))
		return f->n == 2 && !filter_matches(p, f->kids[1], path);
	if (f->n != 2)
		return false;
	if (cd_streq(h, "regex"))
		return f->kids[1]->kind == N_REGEX && !regexec(&f->kids[1]->re, path, 0, NULL, 0);
	const char *v = value_of(p, f->kids[1]);
	if (!v)
		return false;
	if (cd_streq(h, "literal"))
		return cd_streq(v, path);
	if (cd_streq(h, "subpath")) {
		size_t n = strlen(v);
		if (cd_streq(v, "/"))
			return path[0] == '/';
		return !strncmp(path, v, n) && (path[n] == '\0' || path[n] == '/');
	}
	return false;
}

static bool op_matches(const char *rule_op, const char *op)
{
	size_t n = strlen(rule_op);
	if (n && rule_op[n - 1] == '*')
		return !strncmp(op, rule_op, n - 1);
	return cd_streq(rule_op, op);
}

bool sbpl_allows(const struct sbpl_policy *p, const char *op, const char *path)
{
	bool allowed = false;

	for (size_t i = 0; i < p->n; i++) {
		const struct node *f = p->forms[i];
		bool allow = is_sym(f->kids[0], "allow");
		if (!allow && !is_sym(f->kids[0], "deny"))
			continue;
		if (f->n == 2 && is_sym(f->kids[1], "default")) {
			allowed = allow;
			continue;
		}
		bool op_hit = false, any_filter = false, filter_hit = false;
		for (size_t k = 1; k < f->n; k++) {
			const struct node *x = f->kids[k];
			if (x->kind == N_SYM) {
				op_hit = op_hit || op_matches(x->text, op);
			} else {
				any_filter = true;
				filter_hit = filter_hit || filter_matches(p, x, path);
			}
		}
		if (op_hit && (!any_filter || filter_hit))
			allowed = allow;
	}
	return allowed;
}

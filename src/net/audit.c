/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "net/audit.h"
#include "shared/clock.h"
#include "shared/log.h"

static void write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Whether a denied decision's line may go to the journal now (audit.h). */
static bool journal_deny_admitted(const char *tag)
{
	/* One proxy a process, its lines written from its loop alone. */
	static uint64_t window_start;
	static unsigned written;
	static uint64_t left_out;
	static bool started;
	uint64_t now = cd_mono_ms();
	const char *o = tag ? " (" : "", *t = tag ? tag : "", *c = tag ? ")" : "";

	if (!started || now - window_start >= CD_AUDIT_WINDOW_MS) {
		if (left_out)
			cd_log_record("proxy%s%s%s: %" PRIu64 " denied decisions were not logged "
				      "(more than %u in %u s)",
				      o, t, c, left_out, CD_AUDIT_DENY_MAX,
				      CD_AUDIT_WINDOW_MS / 1000);
		started = true;
		window_start = now;
		written = 0;
		left_out = 0;
	}
	if (written < CD_AUDIT_DENY_MAX) {
		written++;
		return true;
	}
	if (left_out++ == 0)
		cd_log_record("proxy%s%s%s: more than %u denied decisions in %u s: the rest of "
			      "them are counted, not logged (allowed ones still are)",
			      o, t, c, CD_AUDIT_DENY_MAX, CD_AUDIT_WINDOW_MS / 1000);
	return false;
}

void cd_proxy_audit_write(const struct cd_proxy_audit *a, bool json)
{
	const char *decision = a->allowed ? "allow" : "deny";
	const char *method = a->method ? a->method : "-";
	const char *rule = a->rule ? a->rule : "-";

	if (!json && cd_log_journal && !a->allowed && !journal_deny_admitted(a->tag))
		return;
	if (!json) {
		char status[16] = "-";
		if (a->status >= 0)
			snprintf(status, sizeof(status), "%d", a->status);
		cd_log_record(
			"proxy%s%s%s: %s %s%s %s:%u address=%s rule=\"%s\" status=%s sent=%" PRIu64
			" received=%" PRIu64,
			a->tag ? " (" : "", a->tag ? a->tag : "", a->tag ? ")" : "", decision,
			a->socks5 ? "SOCKS5 " : "", method, a->host ? a->host : "-", a->port,
			a->address ? a->address : "-", rule, status, a->sent, a->received);
		return;
	}
	struct cd_strbuf sb = { 0 };
	cd_strbuf_printf(&sb, "{\"event\":\"proxy\",\"decision\":\"%s\",\"protocol\":\"%s\"",
			 decision, a->socks5 ? "socks5" : "http");
	cd_strbuf_append(&sb, ",\"method\":");
	cd_strbuf_append_json_cstr(&sb, a->method);
	cd_strbuf_append(&sb, ",\"host\":");
	cd_strbuf_append_json_cstr(&sb, a->host);
	cd_strbuf_printf(&sb, ",\"port\":%u,\"address\":", a->port);
	cd_strbuf_append_json_cstr(&sb, a->address);
	cd_strbuf_append(&sb, ",\"rule\":");
	cd_strbuf_append_json_string(&sb, rule, strlen(rule));
	if (a->status >= 0)
		cd_strbuf_printf(&sb, ",\"status\":%d", a->status);
	else
		cd_strbuf_append(&sb, ",\"status\":null");
	cd_strbuf_printf(&sb, ",\"sent\":%" PRIu64 ",\"received\":%" PRIu64, a->sent, a->received);
	/* Only where there is one (cordon serve's proxies): cordon run's lines keep their keys. */
	if (a->tag) {
		cd_strbuf_append(&sb, ",\"tag\":");
		cd_strbuf_append_json_string(&sb, a->tag, strlen(a->tag));
	}
	cd_strbuf_append(&sb, "}\n");
	write_all(STDOUT_FILENO, sb.buf, sb.len);
	free(sb.buf);
}

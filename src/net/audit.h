/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The proxy's audit trail: one line per client connection, written when
 * it closes, with the decision and the bytes relayed both ways.
 *
 * Text (stderr, through shared/log.h, so "<6>" in the journal):
 *   proxy: allow CONNECT example.com:443 address=93.184.215.14 rule="allow-domain
 *   example.com" status=200 sent=517 received=4096
 * (one line). JSON lines (stdout): {"event":"proxy","decision":...,
 * "protocol":"http"|"socks5","method":...,"host":...,"port":N,
 * "address":...|null,"rule":...,"status":N|null,"sent":N,"received":N}.
 * sent: bytes from the client to the upstream; received: back.
 */

#include <stdbool.h>
#include <stdint.h>

struct cd_proxy_audit {
	bool allowed;
	bool socks5;
	const char *method;  /* "CONNECT", "GET"...; NULL before a request was read */
	const char *host;    /* as asked (normalised), or NULL */
	unsigned port;	     /* 0 when unknown */
	const char *address; /* the address connected to, or NULL */
	const char *rule;    /* what decided: a policy rule, or the refusal's reason */
	int status;	     /* the proxy's own answer (HTTP status, SOCKS5 reply), or -1 */
	uint64_t sent, received;
	const char *tag; /* whose proxy (cordon serve: "process ID"), or NULL */
};

/*
 * In the journal (text lines, shared/log.h's cd_log_journal), denied
 * decisions are the one thing a sandbox can make without bound and at no
 * cost (no lookup, no upstream): past CD_AUDIT_DENY_MAX of them in a
 * CD_AUDIT_WINDOW_MS window, the rest of the window's are counted, not
 * written, so that one sandbox cannot spend the journal's rate limit
 * (systemd's default: 10,000 a unit per 30 s) and have the server's
 * other lines dropped. A line says when that starts, and the first line
 * of a later window says how many were left out. Allowed decisions are
 * always written (they are the record of what went out), and so is every
 * line anywhere else (a file, a pipe, JSON).
 */
#define CD_AUDIT_DENY_MAX  100
#define CD_AUDIT_WINDOW_MS 10000

void cd_proxy_audit_write(const struct cd_proxy_audit *a, bool json);

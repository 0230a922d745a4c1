/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * http/request (exec-server reference 2.11): HTTP requests made by the
 * server, from the server's host, outside any sandbox. libcurl's multi
 * interface runs on the server's event loop (socket and timer callbacks):
 * no thread per request, no blocking call on the loop (names are resolved
 * by libcurl's threaded resolver).
 *
 * Policy (cordon-serve(1), HTTP REQUESTS): refused unless the server was
 * started with --allow-http-request; then every address a request connects
 * to, redirects included, is checked after name resolution, on the socket
 * itself (so a name that resolves again elsewhere cannot switch): loopback
 * (unless --http-allow-loopback), private, link-local (cloud metadata),
 * multicast and reserved addresses, and the server's own listening
 * address, are refused. http and https only, redirects included; no proxy
 * from the environment.
 *
 * Requests belong to the connection that made them: when it ends they are
 * aborted. Streamed bodies obey the connection's back-pressure: while its
 * outbound queue is over its cap, transfers are paused (libcurl stops
 * reading the socket), so a client that stops reading holds the transfer,
 * not memory.
 */

#include <stdbool.h>

#include "core/json.h"

struct cd_conn;
struct cd_server;

/* At most this many requests in flight per connection; more are refused. */
#define CD_HTTP_MAX_PER_CONN 16
/* A buffered (not streamed) response body larger than this fails the request. */
#define CD_HTTP_MAX_BODY (16u * 1024 * 1024)
/* A streamed body is sent in deltas of at most this many bytes (reference 2.11). */
#define CD_HTTP_MAX_DELTA (1024u * 1024)
/* The response headers (all lines of the final response) may take this many bytes. */
#define CD_HTTP_MAX_HEADERS (256u * 1024)
/* And at most this many header lines. */
#define CD_HTTP_MAX_HEADER_COUNT 256
/* Redirects followed at most (then "too many redirects"). */
#define CD_HTTP_MAX_REDIRECTS 10

/* The http/request handler (methods.c's table). */
void cd_http_request(struct cd_conn *c, const char *id, const struct cd_json *params);
/* c ends: abort its requests, unanswered. */
void cd_http_conn_release(struct cd_conn *c);
/* c's outbound queue went over its cap (paused) or back under it: its transfers follow. */
void cd_http_conn_paused(struct cd_conn *c, bool paused);
/* Shutdown: abort everything and free libcurl's state. */
void cd_http_server_stop(struct cd_server *s);
/*
 * With --allow-http-request, at the server's start: libcurl set up (its
 * TLS library reads its configuration here, not on the loop during a
 * request), and refused (-1, *err) when its resolver is not asynchronous:
 * a synchronous lookup would hold the event loop.
 */
int cd_http_server_start(struct cd_server *s, char **err);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The rest of `cordon serve` for the transport targets (fuzz-conn.c,
 * fuzz-ws.c), which link conn.c (and ws.c) for real: a fake event loop
 * that runs in the target's own thread, and stubs for the methods, the
 * sessions and the fs requests. A request is answered with an empty
 * result (a 200 kB string for a method that starts with "big") and its
 * method recorded; the notification "initialized" is
 * accepted and any other ends the connection, as methods.c does.
 *
 * Timers of 0 ms run on the next turn of the loop; longer ones never do
 * (a client feeding its bytes as fast as it can: no handshake, stall or
 * ping timeout comes between them). A descriptor watch runs when poll(2)
 * says the descriptor is ready.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/server.h"

/* A server with the default options, a fresh fake loop and no connection. */
void fuzz_server_init(struct cd_server *s);
/* Free what the loop still holds (timers that never ran). The connections must be gone. */
void fuzz_server_done(struct cd_server *s);

/* The methods of the requests handled so far (strv; cleared by fuzz_server_init). */
extern char **fuzz_requests;

/*
 * Feed data to the connection through fd (the client's end), in chunks
 * whose sizes a generator seeded by the data picks, turning the loop after
 * each; then end the client's output (shut_wr: shutdown(SHUT_WR), else
 * close fd) and turn the loop until nothing more happens. Whatever the
 * server writes to out_fd (the client's reading end) is read, sometimes
 * late so that the server meets a full pipe, and appended to *out. Fails
 * the run when the loop never settles (a busy loop).
 */
void fuzz_serve_feed(struct cd_server *s, int fd, bool shut_wr, int out_fd, const uint8_t *data,
		     size_t size, struct cd_strbuf *out);

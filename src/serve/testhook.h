/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The test hooks of cordon serve, so that the integration tests wait for
 * what the server does (a request waits for a worker, a worker runs it, a
 * client's session is detached) instead of sleeping and hoping it got
 * there on a busy host. Like CORDON_TEST_DISABLE they can only make the
 * server report, or wait: nothing is performed that would not be, nothing
 * differently, and no sandbox changes.
 *
 * CORDON_TEST_EVENTS=PATH: at start the server connects to the unix stream
 * socket at PATH (the test listens there) and writes one line per event,
 * "NAME key=value ...": see the calls of cd_testhook_event for the names
 * (HACKING.md lists them). The server refuses to start when it cannot
 * connect.
 *
 * CORDON_TEST_HOLD=METHOD[,METHOD...] (fs/copy, fs/writeFile, ...; needs
 * CORDON_TEST_EVENTS): an fs request of one of these methods, once a worker
 * took it, reports "fs-held" and waits, before it is performed, until the
 * test writes the line "release conn=N id=ID" (the request's connection
 * serial and id, as in the event), or until it is cancelled (the server
 * stops). That is how a test keeps "a copy that is still running" running
 * as long as it needs, on any host. "parse" holds the parse of a large
 * message on its worker likewise (key "conn=N id=parse"), and
 * "process/start" a start on its worker once it is prepared and the
 * server's hidden files are checked, before the spawn on the loop, and
 * "fs/watchMissing" a watch's walk once done, before it is armed.
 */

#include <stdatomic.h>
#include <stdbool.h>

#include "core/util.h"

/* Read the environment and connect; 0, or -1 after logging why (serve then refuses to start). */
int cd_testhook_init(void);
/* CORDON_TEST_EVENTS is set: events are written. */
bool cd_testhook_on(void);
/* Write one event line (a newline is added). Any thread. */
void cd_testhook_event(const char *fmt, ...) CD_PRINTF(1, 2);
/* Whether fs requests of method are held (CORDON_TEST_HOLD). */
bool cd_testhook_holds(const char *method);
/*
 * On a worker: report "fs-held KEY" and wait for "release KEY" or *cancel.
 * Borrows key ("conn=N id=ID") and cancel for the call.
 */
void cd_testhook_hold(const char *key, const char *method, const atomic_bool *cancel);

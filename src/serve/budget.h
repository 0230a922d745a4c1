/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The server's memory budget (--max-memory): one account of the memory
 * that clients make `cordon serve` hold, by kind, against one limit for
 * the whole server.
 *
 *  - queued: the connections' outbound queues (answers and notifications
 *    not yet written), WebSocket frames included;
 *  - retained: the processes' output rings (their capacity);
 *  - files: fs data in flight (fs/writeFile data waiting for a worker, the
 *    buffers of fs/readFile answers being streamed);
 *  - inbound: the connections' inbound buffers (messages being received).
 *    Counted and reported, not held back: a message must be received
 *    whole before anything can be freed, so holding it back could only
 *    deadlock clients against each other. Bounded by the message size
 *    (64 MiB) times --max-connections.
 *
 * What is bounded, and how (the holders do it, this only keeps the sums):
 * each connection's queue may hold its share of what the other kinds
 * leave of the limit (conn.c: the limit shared by back-pressure), and a
 * ring grows past its first 64 KiB only while the total is under the
 * limit (proc.c). The counters are atomic: fs workers charge too.
 */

#include <stdbool.h>
#include <stddef.h>

enum cd_mem_kind {
	CD_MEM_QUEUED,
	CD_MEM_RETAINED,
	CD_MEM_FILES,
	CD_MEM_INBOUND,
	CD_MEM_KIND_COUNT,
};

/* The default limit: 1 GiB, or an eighth of physical memory when that is less (at least 64 MiB). */
size_t cd_mem_default_limit(void);
/* Set the limit (before the server runs). Without a call: no limit (unit tests). */
void cd_mem_set_limit(size_t limit);
size_t cd_mem_limit(void);

void cd_mem_charge(enum cd_mem_kind k, size_t n);
void cd_mem_release(enum cd_mem_kind k, size_t n);
/* A holder whose charge is *charged now holds n bytes: charge or release the difference. */
void cd_mem_set(enum cd_mem_kind k, size_t *charged, size_t n);

/* The total, one kind's share, and the highest total seen. */
size_t cd_mem_used(void);
size_t cd_mem_used_kind(enum cd_mem_kind k);
size_t cd_mem_peak(void);
/* Whether n more bytes fit under the limit. */
bool cd_mem_room(size_t n);
/* "queued", "retained", "files", "inbound" */
const char *cd_mem_kind_name(enum cd_mem_kind k);
/* Count one back-pressure episode that the budget (not a connection's own cap) started. */
void cd_mem_note_pressure(void);
unsigned long cd_mem_pressure_count(void);

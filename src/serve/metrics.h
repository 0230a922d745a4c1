/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The counters of `cordon serve` for operators (GET /metrics, GET /status,
 * cordon/metrics, cordon/status; status.c renders them). Every counter
 * here is a plain integer changed on the loop's thread only: counting is
 * an increment, no lock, no atomic. Gauges that the loop already knows
 * (connections, sessions, queued jobs) are not kept here but computed when
 * a scrape asks.
 *
 * Labels come from the fixed enums below, never from what a client sent:
 * the number of series is bounded.
 */

#include <stdint.h>

#include "serve/proc.h"

/*
 * The sandbox of a process, as process/start's sandboxType says it: none,
 * or this host's backend's (linuxSeccomp; macosSeatbelt on macOS).
 */
enum cd_metric_sandbox {
	CD_METRIC_SANDBOX_NONE,
	CD_METRIC_SANDBOX_NATIVE,
	CD_METRIC_SANDBOX_COUNT,
};

/* Why a connection, a session or a process was refused. */
enum cd_refusal {
	CD_REFUSAL_AUTH,	    /* ws: no or wrong bearer token (401) */
	CD_REFUSAL_ORIGIN,	    /* ws: a browser's request (Origin header, 403) */
	CD_REFUSAL_PEER,	    /* the peer is not admitted (its owner, or a sandbox of ours) */
	CD_REFUSAL_MAX_CONNECTIONS, /* --max-connections */
	CD_REFUSAL_DESCRIPTORS,	    /* out of file descriptors */
	CD_REFUSAL_MAX_SESSIONS,    /* initialize past --max-sessions */
	CD_REFUSAL_MAX_PROCESSES,   /* process/start past --max-processes */
	CD_REFUSAL_INVALID,	    /* process/start: invalid params or request */
	CD_REFUSAL_SANDBOX,	    /* process/start: the sandbox cannot be made as asked */
	CD_REFUSAL_SPAWN,	    /* process/start: the command could not be started */
	CD_REFUSAL_COUNT,
};

/* Back-pressure, each time it sets in. */
enum cd_pressure {
	CD_PRESSURE_OUTPUT_PAUSED, /* a client's queue over its cap: its processes' output paused */
	CD_PRESSURE_PROCESS_HELD,  /* lossless: a process held until its output is delivered */
	CD_PRESSURE_STALLED,	   /* a client that read nothing for --stall-timeout, dropped */
	CD_PRESSURE_COUNT,
};

/* Connections by transport (the values of enum cd_conn_kind). */
#define CD_METRIC_TRANSPORTS 3

/* Upper bounds of the process start latency histogram's buckets, in ns (+Inf not listed). */
#define CD_METRIC_START_BUCKETS 11
extern const uint64_t cd_metric_start_bounds_ns[CD_METRIC_START_BUCKETS];

struct cd_metrics {
	uint64_t started_ms; /* when the server started (cd_loop_now_ms) */
	uint64_t conns_accepted[CD_METRIC_TRANSPORTS];
	uint64_t procs_started[CD_METRIC_SANDBOX_COUNT];
	uint64_t procs_exited[CD_METRIC_SANDBOX_COUNT]; /* reaped: started - exited run */
	uint64_t refusals[CD_REFUSAL_COUNT];
	uint64_t output_bytes[CD_STREAM_COUNT]; /* read from the processes */
	uint64_t stdin_bytes;			/* accepted by process/write */
	uint64_t pressure[CD_PRESSURE_COUNT];
	/* process/start, from the request handled to the child's exec: per bucket (not cumulative). */
	uint64_t start_buckets[CD_METRIC_START_BUCKETS + 1];
	uint64_t start_count;
	uint64_t start_sum_ns;
};

/* Loop thread only. */
extern struct cd_metrics cd_metrics;

static inline void cd_metric_refusal(enum cd_refusal r)
{
	cd_metrics.refusals[r]++;
}

static inline void cd_metric_pressure(enum cd_pressure p)
{
	cd_metrics.pressure[p]++;
}

/* Record one process start that took ns nanoseconds. */
void cd_metric_start_latency(uint64_t ns);

/* A monotonic clock in nanoseconds, for latencies. */
uint64_t cd_metric_now_ns(void);

/* The label values (static strings). */
const char *cd_metric_sandbox_name(enum cd_metric_sandbox s);
const char *cd_refusal_name(enum cd_refusal r);
const char *cd_pressure_name(enum cd_pressure p);

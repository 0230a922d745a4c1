/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "serve/metrics.h"
#include "shared/clock.h"

struct cd_metrics cd_metrics;

/* 0.5 ms to 1 s: a start is ~1 ms unsandboxed, a few ms in a sandbox, more under load. */
const uint64_t cd_metric_start_bounds_ns[CD_METRIC_START_BUCKETS] = {
	500000,	  1000000,   2500000,	5000000,   10000000,   25000000,
	50000000, 100000000, 250000000, 500000000, 1000000000,
};

void cd_metric_start_latency(uint64_t ns)
{
	size_t i = 0;
	while (i < CD_METRIC_START_BUCKETS && ns > cd_metric_start_bounds_ns[i])
		i++;
	cd_metrics.start_buckets[i]++;
	cd_metrics.start_count++;
	cd_metrics.start_sum_ns += ns;
}

uint64_t cd_metric_now_ns(void)
{
	return cd_mono_ns();
}

const char *cd_metric_sandbox_name(enum cd_metric_sandbox s)
{
	static const char *const names[CD_METRIC_SANDBOX_COUNT] = {
		[CD_METRIC_SANDBOX_NONE] = "none",
#ifdef __APPLE__
		[CD_METRIC_SANDBOX_NATIVE] = "macosSeatbelt",
#else
		[CD_METRIC_SANDBOX_NATIVE] = "linuxSeccomp",
#endif
	};
	return (unsigned)s < CD_METRIC_SANDBOX_COUNT ? names[s] : "?";
}

const char *cd_refusal_name(enum cd_refusal r)
{
	static const char *const names[CD_REFUSAL_COUNT] = {
		[CD_REFUSAL_AUTH] = "auth",
		[CD_REFUSAL_ORIGIN] = "origin",
		[CD_REFUSAL_PEER] = "peer",
		[CD_REFUSAL_MAX_CONNECTIONS] = "max_connections",
		[CD_REFUSAL_DESCRIPTORS] = "descriptors",
		[CD_REFUSAL_MAX_SESSIONS] = "max_sessions",
		[CD_REFUSAL_MAX_PROCESSES] = "max_processes",
		[CD_REFUSAL_INVALID] = "invalid",
		[CD_REFUSAL_SANDBOX] = "sandbox",
		[CD_REFUSAL_SPAWN] = "spawn",
	};
	return (unsigned)r < CD_REFUSAL_COUNT ? names[r] : "?";
}

const char *cd_pressure_name(enum cd_pressure p)
{
	static const char *const names[CD_PRESSURE_COUNT] = {
		[CD_PRESSURE_OUTPUT_PAUSED] = "output_paused",
		[CD_PRESSURE_PROCESS_HELD] = "process_held",
		[CD_PRESSURE_STALLED] = "stalled",
	};
	return (unsigned)p < CD_PRESSURE_COUNT ? names[p] : "?";
}

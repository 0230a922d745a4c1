/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "serve/budget.h"
#include "serve/metrics.h"
#include "serve/server.h"
#include "serve/status.h"
#include "serve/workq.h"

/* The transports, as cd_conn_kind numbers them (metrics.h counts by it). */
_Static_assert(CD_CONN_STDIO < CD_METRIC_TRANSPORTS && CD_CONN_UNIX < CD_METRIC_TRANSPORTS &&
		       CD_CONN_WS < CD_METRIC_TRANSPORTS,
	       "CD_METRIC_TRANSPORTS covers enum cd_conn_kind");

static const char *const transport_names[CD_METRIC_TRANSPORTS] = {
	[CD_CONN_STDIO] = "stdio",
	[CD_CONN_UNIX] = "unix",
	[CD_CONN_WS] = "websocket",
};

/* Everything a scrape reports that is not a counter of metrics.h: looked up now. */
struct snapshot {
	unsigned conns_open[CD_METRIC_TRANSPORTS];
	unsigned conns_paused;
	unsigned sessions_attached, sessions_detached;
	size_t procs_tabled; /* in the sessions' tables: running, or closed and retained */
	unsigned procs_held;
	uint64_t running[CD_METRIC_SANDBOX_COUNT];
	unsigned fs_queue, prep_queue;
	double uptime;
};

static void snapshot(struct cd_server *s, struct snapshot *n)
{
	memset(n, 0, sizeof(*n));
	for (struct cd_conn *k = s->conns; k; k = k->next) {
		if (k->freed)
			continue;
		n->conns_open[k->kind]++;
		n->conns_paused += k->output_paused;
	}
	for (struct cd_session *se = s->sessions; se; se = se->next) {
		if (se->conn)
			n->sessions_attached++;
		else
			n->sessions_detached++;
		n->procs_tabled += se->n_procs;
		n->procs_held += se->n_held;
	}
	for (int i = 0; i < CD_METRIC_SANDBOX_COUNT; i++)
		n->running[i] = cd_metrics.procs_started[i] - cd_metrics.procs_exited[i];
	n->fs_queue = cd_workq_pending(s->fs_workq);
	n->prep_queue = cd_workq_pending(s->prep_workq);
	n->uptime = (double)(cd_loop_now_ms() - cd_metrics.started_ms) / 1000.0;
}

/* ---- JSON ---- */

static void json_counts(struct cd_strbuf *sb, const char *key, const uint64_t *v, size_t n,
			const char *(*name)(int i))
{
	cd_strbuf_printf(sb, ",\"%s\":{", key);
	for (size_t i = 0; i < n; i++)
		cd_strbuf_printf(sb, "%s\"%s\":%" PRIu64, i ? "," : "", name((int)i), v[i]);
	cd_strbuf_append_c(sb, '}');
}

static const char *sandbox_name(int i)
{
	return cd_metric_sandbox_name((enum cd_metric_sandbox)i);
}

static const char *refusal_name(int i)
{
	return cd_refusal_name((enum cd_refusal)i);
}

static const char *pressure_name(int i)
{
	return cd_pressure_name((enum cd_pressure)i);
}

static const char *stream_name(int i)
{
	return cd_stream_name((enum cd_stream)i);
}

static const char *transport_name(int i)
{
	return transport_names[i];
}

void cd_serve_status_json(struct cd_server *s, struct cd_strbuf *sb)
{
	struct snapshot n;
	snapshot(s, &n);

	/* The fields cordon/status always had come first, unchanged. */
	cd_strbuf_printf(sb, "{\"memory\":{\"limit\":%zu,\"used\":%zu,\"peak\":%zu", cd_mem_limit(),
			 cd_mem_used(), cd_mem_peak());
	for (int k = 0; k < CD_MEM_KIND_COUNT; k++)
		cd_strbuf_printf(sb, ",\"%s\":%zu", cd_mem_kind_name(k), cd_mem_used_kind(k));
	cd_strbuf_printf(sb,
			 ",\"pressure\":%lu},\"connections\":%u,\"pausedConnections\":%u,"
			 "\"sessions\":%u,\"processes\":%zu,\"heldProcesses\":%u,"
			 "\"detachedOutput\":\"%s\",\"descriptors\":{\"limit\":%llu,"
			 "\"acceptPaused\":%s,\"shortages\":%lu}",
			 cd_mem_pressure_count(), s->n_live, n.conns_paused, s->n_sessions,
			 n.procs_tabled, n.procs_held, s->opts.lossless ? "pause" : "drop",
			 (unsigned long long)s->nofile_limit, s->accept_paused ? "true" : "false",
			 s->fd_shortages);
	cd_strbuf_append(sb, ",\"version\":");
	cd_json_write_cstr(sb, PACKAGE_VERSION);
	cd_strbuf_printf(sb, ",\"uptimeSeconds\":%.3f,\"listen\":[", n.uptime);
	if (s->where[0])
		cd_json_write_cstr(sb, s->where);
	else if (s->opts.listen == CD_LISTEN_STDIO)
		cd_json_write_cstr(sb, "stdio");
	cd_strbuf_append(sb, "]");
	cd_strbuf_printf(sb, ",\"attachedSessions\":%u,\"detachedSessions\":%u",
			 n.sessions_attached, n.sessions_detached);
	uint64_t open[CD_METRIC_TRANSPORTS];
	for (int i = 0; i < CD_METRIC_TRANSPORTS; i++)
		open[i] = n.conns_open[i];
	json_counts(sb, "connectionsOpen", open, CD_METRIC_TRANSPORTS, transport_name);
	json_counts(sb, "connectionsAccepted", cd_metrics.conns_accepted, CD_METRIC_TRANSPORTS,
		    transport_name);
	json_counts(sb, "processesStarted", cd_metrics.procs_started, CD_METRIC_SANDBOX_COUNT,
		    sandbox_name);
	json_counts(sb, "processesRunning", n.running, CD_METRIC_SANDBOX_COUNT, sandbox_name);
	json_counts(sb, "processesExited", cd_metrics.procs_exited, CD_METRIC_SANDBOX_COUNT,
		    sandbox_name);
	json_counts(sb, "refusals", cd_metrics.refusals, CD_REFUSAL_COUNT, refusal_name);
	json_counts(sb, "outputBytes", cd_metrics.output_bytes, CD_STREAM_COUNT, stream_name);
	cd_strbuf_printf(sb, ",\"stdinBytes\":%" PRIu64, cd_metrics.stdin_bytes);
	json_counts(sb, "backpressureEvents", cd_metrics.pressure, CD_PRESSURE_COUNT,
		    pressure_name);
	cd_strbuf_append(sb, ",\"fsRequests\":{");
	const char *name;
	uint64_t count;
	bool first = true;
	for (size_t i = 0; cd_methods_counter(i, &name, &count); i++) {
		if (strncmp(name, "fs/", 3))
			continue;
		cd_strbuf_printf(sb, "%s\"%s\":%" PRIu64, first ? "" : ",", name, count);
		first = false;
	}
	cd_strbuf_printf(sb, "},\"workerQueue\":{\"fs\":%u,\"prep\":%u}", n.fs_queue, n.prep_queue);
	cd_strbuf_printf(sb, ",\"processStart\":{\"count\":%" PRIu64 ",\"sumSeconds\":%.9f}}",
			 cd_metrics.start_count, (double)cd_metrics.start_sum_ns / 1e9);
}

/* ---- the text exposition format ---- */

static void family(struct cd_strbuf *sb, const char *name, const char *type, const char *help)
{
	cd_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the format wants (backslash, double quote, newline). */
static void label_value(struct cd_strbuf *sb, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			cd_strbuf_append(sb, "\\\\");
		else if (*v == '"')
			cd_strbuf_append(sb, "\\\"");
		else if (*v == '\n')
			cd_strbuf_append(sb, "\\n");
		else
			cd_strbuf_append_c(sb, *v);
	}
}

static void sample(struct cd_strbuf *sb, const char *name, const char *label, const char *value,
		   uint64_t v)
{
	cd_strbuf_append(sb, name);
	if (label) {
		cd_strbuf_printf(sb, "{%s=\"", label);
		label_value(sb, value);
		cd_strbuf_append(sb, "\"}");
	}
	cd_strbuf_printf(sb, " %" PRIu64 "\n", v);
}

static void labelled(struct cd_strbuf *sb, const char *name, const char *label, const uint64_t *v,
		     size_t n, const char *(*value)(int i))
{
	for (size_t i = 0; i < n; i++)
		sample(sb, name, label, value((int)i), v[i]);
}

void cd_serve_metrics_text(struct cd_server *s, struct cd_strbuf *sb)
{
	struct snapshot n;
	snapshot(s, &n);
	uint64_t open[CD_METRIC_TRANSPORTS];
	for (int i = 0; i < CD_METRIC_TRANSPORTS; i++)
		open[i] = n.conns_open[i];

	family(sb, "cordon_build_info", "gauge", "The version of cordon serving (always 1).");
	sample(sb, "cordon_build_info", "version", PACKAGE_VERSION, 1);
	family(sb, "cordon_uptime_seconds", "gauge", "Seconds since the server started.");
	cd_strbuf_printf(sb, "cordon_uptime_seconds %.3f\n", n.uptime);

	family(sb, "cordon_connections_open", "gauge", "Connections open, by transport.");
	labelled(sb, "cordon_connections_open", "transport", open, CD_METRIC_TRANSPORTS,
		 transport_name);
	family(sb, "cordon_connections_accepted_total", "counter",
	       "Connections accepted, by transport (those refused at once are refusals).");
	labelled(sb, "cordon_connections_accepted_total", "transport", cd_metrics.conns_accepted,
		 CD_METRIC_TRANSPORTS, transport_name);

	family(sb, "cordon_sessions_attached", "gauge", "Sessions driven by a connection.");
	sample(sb, "cordon_sessions_attached", NULL, NULL, n.sessions_attached);
	family(sb, "cordon_sessions_detached", "gauge",
	       "Sessions without a connection, waiting to be resumed.");
	sample(sb, "cordon_sessions_detached", NULL, NULL, n.sessions_detached);

	family(sb, "cordon_processes_started_total", "counter",
	       "Processes started, by sandbox type (process/start's sandboxType).");
	labelled(sb, "cordon_processes_started_total", "sandbox", cd_metrics.procs_started,
		 CD_METRIC_SANDBOX_COUNT, sandbox_name);
	family(sb, "cordon_processes_running", "gauge",
	       "Processes started and not yet exited (reaped), by sandbox type.");
	labelled(sb, "cordon_processes_running", "sandbox", n.running, CD_METRIC_SANDBOX_COUNT,
		 sandbox_name);
	family(sb, "cordon_processes_exited_total", "counter",
	       "Processes that exited (were reaped), by sandbox type.");
	labelled(sb, "cordon_processes_exited_total", "sandbox", cd_metrics.procs_exited,
		 CD_METRIC_SANDBOX_COUNT, sandbox_name);
	family(sb, "cordon_processes_held", "gauge",
	       "Processes whose output waits for their client (lossless sessions).");
	sample(sb, "cordon_processes_held", NULL, NULL, n.procs_held);

	family(sb, "cordon_refusals_total", "counter",
	       "Connections, sessions and process starts refused, by reason.");
	labelled(sb, "cordon_refusals_total", "reason", cd_metrics.refusals, CD_REFUSAL_COUNT,
		 refusal_name);

	family(sb, "cordon_output_bytes_total", "counter",
	       "Bytes read from processes' output for their clients, by stream.");
	labelled(sb, "cordon_output_bytes_total", "stream", cd_metrics.output_bytes,
		 CD_STREAM_COUNT, stream_name);
	family(sb, "cordon_stdin_bytes_total", "counter",
	       "Bytes from clients accepted for processes' stdin (process/write).");
	sample(sb, "cordon_stdin_bytes_total", NULL, NULL, cd_metrics.stdin_bytes);

	family(sb, "cordon_backpressure_events_total", "counter",
	       "Times back-pressure set in, by kind.");
	labelled(sb, "cordon_backpressure_events_total", "event", cd_metrics.pressure,
		 CD_PRESSURE_COUNT, pressure_name);

	family(sb, "cordon_fs_requests_total", "counter", "fs/... requests handled, by method.");
	const char *name;
	uint64_t count;
	for (size_t i = 0; cd_methods_counter(i, &name, &count); i++)
		if (!strncmp(name, "fs/", 3))
			sample(sb, "cordon_fs_requests_total", "method", name, count);
	family(sb, "cordon_worker_queue_depth", "gauge",
	       "Jobs submitted to a worker pool and not yet completed, by pool.");
	sample(sb, "cordon_worker_queue_depth", "pool", "fs", n.fs_queue);
	sample(sb, "cordon_worker_queue_depth", "pool", "prep", n.prep_queue);

	family(sb, "cordon_memory_used_bytes", "gauge", "Bytes charged to the memory budget.");
	sample(sb, "cordon_memory_used_bytes", NULL, NULL, cd_mem_used());
	family(sb, "cordon_memory_limit_bytes", "gauge", "The memory budget (--max-memory).");
	sample(sb, "cordon_memory_limit_bytes", NULL, NULL, cd_mem_limit());

	family(sb, "cordon_process_start_seconds", "histogram",
	       "process/start, from the request handled to the command's exec.");
	uint64_t cum = 0;
	for (int i = 0; i <= CD_METRIC_START_BUCKETS; i++) {
		cum += cd_metrics.start_buckets[i];
		if (i < CD_METRIC_START_BUCKETS)
			cd_strbuf_printf(
				sb, "cordon_process_start_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
				(double)cd_metric_start_bounds_ns[i] / 1e9, cum);
		else
			cd_strbuf_printf(sb,
					 "cordon_process_start_seconds_bucket{le=\"+Inf\"} %" PRIu64
					 "\n",
					 cum);
	}
	cd_strbuf_printf(sb, "cordon_process_start_seconds_sum %.9f\n",
			 (double)cd_metrics.start_sum_ns / 1e9);
	cd_strbuf_printf(sb, "cordon_process_start_seconds_count %" PRIu64 "\n",
			 cd_metrics.start_count);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What `cordon serve` tells operators about itself, from one source of
 * numbers (metrics.h and the server's own state): the status JSON
 * (cordon/status, GET /status) and the Prometheus text exposition format
 * 0.0.4 (cordon/metrics, GET /metrics). Loop thread only; each call walks
 * the sessions and connections once (both bounded by --max-sessions and
 * --max-connections) and blocks on nothing.
 */

#include "core/util.h"

struct cd_server;

#define CD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Append the status object (JSON text) to sb. */
void cd_serve_status_json(struct cd_server *s, struct cd_strbuf *sb);
/* Append the metrics in the text exposition format to sb. */
void cd_serve_metrics_text(struct cd_server *s, struct cd_strbuf *sb);

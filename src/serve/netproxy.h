/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * process/start's networkProxy (reference 3.4, 3.5 step 1, 4.6): cordon's
 * own filtering proxy for one sandboxed process, started for it and stopped
 * when it is closed.
 *
 * The proxy is cordon's own binary executed anew (`cordon proxy
 * --listen-fd 3 --ctl-fd 4 ...`, posix_spawn of /proc/self/exe), never a
 * fork of the server that keeps running its code: the server has threads
 * and other sessions' data. It serves a unix socket in a directory of its
 * own (mkdtemp, mode 0700), made and listening before the spawn, so the
 * process can connect at once and no readiness has to be waited for; the
 * sandbox's fence relays to that path and to nothing else. The server keeps
 * one end of a socket pair whose other end the proxy watches: closing it
 * (the process closed, or the server is gone) makes the proxy finish its
 * connections, write their audit lines and exit. The loop reaps it through
 * its child watch. Audit lines go to the proxy's stderr, the server's.
 *
 * Fail closed: the server keeps no copy of the listening socket, so a proxy
 * that dies leaves nobody listening and every later connection of the
 * relay is refused: the process has no network from then on.
 */

#include <stdbool.h>

#include "core/json.h"

struct cd_loop;
struct cd_netproxy_cfg;
struct cd_netproxy;

/* Most domain patterns one networkProxy may carry (each is an argument of the proxy). */
#define CD_NETPROXY_MAX_DOMAINS 1024

/*
 * Decode params.networkProxy (v: present and not null) as the released
 * binary does (serde's messages), then refuse what cordon cannot enforce
 * (-32602 with the reason): a disabled proxy, unix socket allow-lists. 0 with *ret malloc()ed, or -EINVAL with *err.
 */
int cd_netproxy_parse(const struct cd_json *v, struct cd_netproxy_cfg **ret, char **err);
/* NULL-safe; returns NULL. */
struct cd_netproxy_cfg *cd_netproxy_cfg_free(struct cd_netproxy_cfg *c);
/* proxy.allowLocalBinding (CODEX_NETWORK_ALLOW_LOCAL_BINDING). */
bool cd_netproxy_cfg_local_binding(const struct cd_netproxy_cfg *c);
/*
 * Name the process the proxy serves in each of its audit lines: "process
 * ID", the client's ID with every byte but letters, digits and "-_.:@+=/"
 * as \xHH, cut with "..." past about 190 bytes of text (`cordon proxy`
 * takes 200). Borrows id for the call.
 */
void cd_netproxy_cfg_tag(struct cd_netproxy_cfg *c, const char *id, size_t len);

/*
 * Start the proxy for cfg (borrowed): any thread (a worker of the
 * preparation), nothing of the loop is touched. 0 with *ret malloc()ed, or
 * -errno with *err (malloc()ed, one line): nothing is left behind then.
 */
int cd_netproxy_start(const struct cd_netproxy_cfg *cfg, struct cd_netproxy **ret, char **err);
/* "unix:/DIR/proxy.sock", as cd_linux_opts.managed_proxy takes it. Borrowed. */
const char *cd_netproxy_endpoint(const struct cd_netproxy *np);
/* The proxy's pid. */
int cd_netproxy_pid(const struct cd_netproxy *np);

/*
 * Loop: watch the proxy (reaped when it exits; a proxy that exits before it
 * is stopped is logged as leaving the process, named by what, without
 * network). Copies @what. After this, only cd_netproxy_stop.
 */
void cd_netproxy_attach(struct cd_netproxy *np, struct cd_loop *l, const char *what);
/*
 * Loop: stop it. It exits once its connections are closed and their audit
 * lines written; it is reaped and np freed by its watch then (killed if it
 * has not exited CD_NETPROXY_STOP_MS later). detach: the loop stops too
 * (the server is shutting down): np is freed now and the proxy, at the end
 * of its pair, exits by itself. NULL-safe. Also takes an np never attached.
 */
#define CD_NETPROXY_STOP_MS 10000
void cd_netproxy_stop(struct cd_netproxy *np, bool detach);

/*
 * Set the proxy variables of the managed network (cd_managed_proxy_env:
 * every one names the relay inside the sandbox) in *envp, over what the
 * client sent, and CODEX_NETWORK_ALLOW_LOCAL_BINDING as cfg says.
 */
void cd_netproxy_set_env(char ***envp, const struct cd_netproxy_cfg *cfg);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CD_SERVE_MANAGED_ROUTE_H
#define CD_SERVE_MANAGED_ROUTE_H

#include <stdbool.h>

/*
 * enforceManagedNetwork without networkProxy (reference 4.5): envp, the
 * child's "NAME=VALUE" strings (malloc'ed, cd_strv_free), names the loopback
 * proxy in its proxy variables (HTTP_PROXY and the others, any case). Each
 * such variable is rewritten in place to name the relay inside the sandbox
 * (CD_RELAY_ADDR:CD_RELAY_PORT, scheme and path kept) and
 * CODEX_NETWORK_PROXY_ATTRIBUTION is removed. *ret_endpoint: the proxy as
 * cd_proxy_endpoint_parse takes it ("tcp:127.x.y.z:PORT", malloc'ed).
 * -EINVAL with *err (the reference's messages): no proxy variable, none
 * naming a loopback IPv4 proxy, or two naming different ones (the relay
 * reaches one). relay false (macOS: no relay, the command reaches the
 * proxy itself, which the Seatbelt policy allows): envp is left as it is.
 */
int cd_managed_route(char **envp, bool relay, char **ret_endpoint, char **err);

#endif

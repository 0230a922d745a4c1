/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sandbox/backend.h"

/*
 * Apply order: mounts need capabilities (namespaces), then the capabilities
 * are dropped, then Landlock (needs no_new_privs, set by the supervisor
 * right after the capabilities), then seccomp last, since it forbids mount
 * and friends.
 */
const struct cd_backend *const cd_backends[] = {
	&cd_backend_namespaces, &cd_backend_caps, &cd_backend_landlock, &cd_backend_seccomp, NULL,
};

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * `cordon probe [--json]` on macOS: whether this host can run sandboxes
 * under Seatbelt, found by trying, as the Linux probe tries user
 * namespaces. Three items after the backend line: the wrapper (wrapper,
 * the compiled-in sandbox-exec) is an executable file; a policy applies
 * (sandbox-exec runs /usr/bin/true under "(allow default)": macOS refuses a
 * nested sandbox, so this fails when cordon itself runs inside one); and a
 * denial is enforced (a read of a file the policy denies fails). The
 * output has the Linux probe's shape: one "ok" or "MISSING" line per
 * item, each missing one with its fix, or --json's {host, items, backend}.
 * Exit status 0, or 2 for a usage error.
 */

int cd_mac_probe(int argc, char **argv, const char *wrapper);

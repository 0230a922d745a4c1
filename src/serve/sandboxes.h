/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Whether a client of `cordon serve` is a process inside a sandbox
 * (sandboxes.c). A sandboxed process runs as the server's uid, so the uid
 * rules of the unix socket and of a loopback listener admit it; admitted,
 * it could start an unsandboxed process/start and leave its sandbox. So
 * the server keeps a registry of the children it started, and before a
 * same-uid client is admitted asks where that client's process lives:
 *
 *  - in the pid namespace of one of this server's sandboxes (each
 *    sandboxed process/start and fs helper has one of its own): refused;
 *  - in a pid namespace whose init is cordon's (cordon-init, the fs
 *    helper): a sandbox of another cordon serve or of cordon run; refused;
 *  - in the server's own pid namespace (or one above it): admitted, but
 *    while a sandbox of this server without a pid namespace of its own
 *    may live there (--allow-degraded=pid-isolation), the client's parent
 *    chain decides: below such a sandbox, or below an orphan the server
 *    adopted (what such a sandbox may have left), it is refused;
 *  - anywhere else (a container of the user, say): admitted.
 *
 * A unix client is the process that connected, pinned with SO_PEERPIDFD
 * where the kernel has it (6.5), so that a pid the client freed and another
 * process took cannot be judged instead. A TCP client is whoever holds the
 * connecting socket (the inode NETLINK_SOCK_DIAG reports, see peer.h):
 * while a sandbox of this server may use the network, the holders are
 * looked for in /proc, and the client is admitted only if a process
 * outside every sandbox holds it and none inside does. A socket nobody
 * visible holds (passed on in flight, or held by a thread with a table of
 * its own) is refused: its holder cannot be told.
 *
 * The registry is shared with the fs workers (fs.c spawns helpers there):
 * every call is thread-safe. The unix judgements run on the event loop's
 * thread, the TCP ones on a worker of their own (listen.c).
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Once, before serving: host_proc, a descriptor of the host's /proc taken
 * before the server mounted one of its own pid namespace (pidns.c; the
 * registry takes it over), or -1 when the server's /proc is the only one;
 * adopts_orphans: the server is pid 1 or a child subreaper (server.c).
 * Returns 0, or -errno when the server's own /proc cannot be read.
 */
int cd_sandboxes_init(int host_proc, bool adopts_orphans);
/* Close what init opened (the registry itself stays usable). */
void cd_sandboxes_done(void);

struct cd_sandbox_entry;

/*
 * Record a child the server just started, before the loop can run
 * (process/start) or the helper can act (fs): pid as cd_child_pid
 * reports it; sandboxed; pid_ns: the sandbox is its own pid namespace,
 * whose first process pid is; network: the sandbox may open network
 * sockets (its network is not restricted). Unsandboxed children are
 * recorded too (what descends from them is admitted). Returns the entry
 * to remove once the child has been reaped.
 */
struct cd_sandbox_entry *cd_sandboxes_add(pid_t pid, bool sandboxed, bool pid_ns, bool network);
/* The child was reaped (or never ran). NULL-safe; returns NULL. */
struct cd_sandbox_entry *cd_sandboxes_remove(struct cd_sandbox_entry *e);

enum cd_peer_verdict {
	CD_PEER_OUTSIDE,   /* in no sandbox: the transport's own rules decide */
	CD_PEER_SANDBOXED, /* inside a sandbox: refused */
	CD_PEER_UNDECIDED, /* it cannot be told: refused too (fail closed) */
};

/*
 * The client of fd, an accepted unix connection whose peer has the
 * server's uid. why (size bytes) says where it is or why it cannot be told,
 * for the log.
 */
enum cd_peer_verdict cd_sandboxes_judge_unix(int fd, char *why, size_t size);

/* Whether a TCP client of the server's uid needs cd_sandboxes_judge_tcp. */
bool cd_sandboxes_tcp_exposed(void);

/*
 * How long the look for a TCP client's socket may take, from the accept:
 * past it the client is undecided (refused). A sandbox that holds millions
 * of descriptors makes every look that long (its processes are looked
 * through whole before anyone is admitted), and is refused either way; a
 * busy host makes an ordinary look slow, and 1 s refused legitimate
 * clients there (seen in the test suite on two loaded cores): 5 s leaves
 * them room, at the cost of a longer wait before an attacker's refusal.
 */
#define CD_SANDBOXES_JUDGE_MS 5000u

/* A TCP client to judge: its socket, its deadline, and then the verdict. */
struct cd_tcp_client {
	uint64_t inode;	      /* its socket's (sock_diag's idiag_inode) */
	uint64_t deadline_ms; /* CLOCK_MONOTONIC: undecided past it */
	enum cd_peer_verdict verdict;
	char why[400]; /* where it is, or why it cannot be told: the log, the 403 */
};

/*
 * Judge clients[0..n), TCP clients owned by the server's uid, in one pass
 * over the processes' descriptors (a client that connects again and again
 * costs one pass per batch, not one per connection): CD_PEER_OUTSIDE at
 * once when no sandbox can make TCP connections (cd_sandboxes_tcp_exposed).
 * Else the processes below the pid namespace /proc shows (every sandbox's
 * among them; every process, when sandboxes without a pid namespace ran)
 * are looked through first, small descriptor tables first: a holder inside
 * a sandbox (or one that cannot be placed) refuses the client there and
 * then; then the others, until a holder outside is found. Each client is
 * undecided past its deadline, and all of them past MAX_FDS_SCANNED
 * descriptors or once *cancel (may be NULL) is set. Thread-safe: runs on a
 * worker, off the event loop (listen.c), as long as cd_sandboxes_done has
 * not been called.
 */
void cd_sandboxes_judge_tcp_many(struct cd_tcp_client *const *clients, size_t n,
				 const atomic_bool *cancel);

/* One client, deadline CD_SANDBOXES_JUDGE_MS from now. why as above. */
enum cd_peer_verdict cd_sandboxes_judge_tcp(uint64_t inode, char *why, size_t size);

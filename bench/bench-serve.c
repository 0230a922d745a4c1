/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-serve: what does `cordon serve` cost, against doing it by hand and
 * against the Codex exec-server it replaces?
 *
 * Drives `cordon serve --listen stdio` over pipes, like an orchestrator:
 *  1. latency: process/start of /bin/true until process/exited and until
 *     process/closed arrive, unsandboxed and under a workspace-write-like
 *     wire profile, beside a direct fork/exec/wait of /bin/true; the
 *     configurations run interleaved round-robin so that machine noise lands
 *     on all of them alike;
 *  2. relay throughput: the decoded bytes of `head -c 50000000 /dev/zero`
 *     per second from start to closed, beside a plain pipe read of the same
 *     command. Only what is needed is parsed: the base64 length of each
 *     "chunk" gives the decoded size, and the total must be exact;
 *  3. the server's resident memory idle and with 200 live processes;
 *  4. file reads: a BENCH_FS_MB (default 1024) MiB file streamed with
 *     fs/open + fs/readBlock in 1 MiB blocks (unsandboxed, and for cordon
 *     also under the sandbox context: opened inside, read outside), and
 *     fs/readFile of a 100 MiB file, beside `cat FILE > /dev/null`; the
 *     median of BENCH_FS_RUNS (default 7) runs of each.
 *  5. the same over WebSocket (`--listen ws://127.0.0.1:0`, the transport a
 *     remote orchestrator uses): start -> closed latency, relay throughput,
 *     and the server's memory with 100 connected, initialized clients.
 * With CODEX_BIN set (the native codex binary), the same workloads run
 * against `$CODEX_BIN exec-server --listen stdio` (and ws://). With
 * CORDON_BASELINE set (another build's cordon, say the last release's), its
 * serve joins the latency round-robin (1.), so that a change's cost per
 * start is measured in the same run, and streams the file of 4. in turn
 * with this build.
 *
 * The WebSocket client here is the smallest that works: masked text frames
 * out (a zero mask key, which RFC 6455 allows and which costs nothing),
 * unmasked frames in, pings answered. The client must not be what is
 * measured.
 *
 * Usage: bench-serve CORDON     (BENCH_N overrides the run count)
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"

#define WARMUP	      20
#define RELAY_BYTES   50000000L
#define RELAY_RUNS    5
#define LIVE_PROCS    200
#define IO_TIMEOUT_MS 60000
#define WS_CLIENTS    100

extern char **environ;

/* One server child and the read side of its stdout. */
struct server {
	const char *name;
	pid_t pid;
	int in;	 /* its stdin */
	int out; /* its stdout */
	char *buf;
	size_t start, len, cap; /* unconsumed bytes are buf[start, start+len) */
	size_t scanned;		/* of those, the first ones hold no newline */
	long next_id;
	bool dead;
	bool supervised; /* cordon: the loop runs in the only child (loop_pid) */
	bool ws;	 /* in == out is a WebSocket; frames are decoded into buf */
	int url_fd;	 /* ws: the server's stdout (it printed the URL), or -1 */
	char *raw;	 /* ws: bytes read and not yet decoded */
	size_t raw_len, raw_cap;
};

/* Spawn argv with stdin, stdout from the given fds and stderr to /dev/null. */
static int spawn_io(char *const argv[], int in, int out, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC), r;

	if (devnull < 0)
		return -errno;
	r = posix_spawn_file_actions_init(&fa);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, in >= 0 ? in : devnull, STDIN_FILENO);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, devnull, STDERR_FILENO);
	if (r == 0)
		r = posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(devnull);
	return -r;
}

static void server_init(struct server *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->next_id = 100;
	s->url_fd = -1;
}

static int server_spawn(struct server *s, const char *name, char *const argv[])
{
	int in[2], out[2], r;

	server_init(s, name);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	r = spawn_io(argv, in[0], out[1], &s->pid);
	close(in[0]);
	close(out[1]);
	if (r < 0) {
		close(in[1]);
		close(out[0]);
		return r;
	}
	s->in = in[1];
	s->out = out[0];
	s->cap = 1 << 20;
	s->buf = malloc(s->cap);
	if (!s->buf)
		return -ENOMEM;
	return 0;
}

/* A WebSocket connection to 127.0.0.1:port (upgrade done) as s; pid stays 0. */
static int ws_connect(struct server *s, const char *name, unsigned port)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
				  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
				  "Sec-WebSocket-Key: YmVuY2gtc2VydmUtd3MtMQ==\r\n\r\n";
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char head[4096];
	size_t got = 0;
	int fd, one = 1;

	server_init(s, name);
	s->ws = true;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		goto fail;
	/* Read the head byte by byte: what follows it is already frames. */
	while (got < sizeof(head) - 1) {
		ssize_t r = read(fd, head + got, 1);

		if (r <= 0)
			goto fail;
		got++;
		if (got >= 4 && !memcmp(head + got - 4, "\r\n\r\n", 4))
			break;
	}
	head[got] = '\0';
	if (strncmp(head, "HTTP/1.1 101", 12))
		goto fail;
	s->in = s->out = fd;
	s->cap = 1 << 20;
	s->buf = malloc(s->cap);
	s->raw_cap = 1 << 20;
	s->raw = malloc(s->raw_cap);
	if (!s->buf || !s->raw)
		return -ENOMEM;
	return 0;
fail:
	close(fd);
	return -EPROTO;
}

/* Spawn a server listening on ws://127.0.0.1:0 (argv says so) and connect to it. */
static int server_spawn_ws(struct server *s, const char *name, char *const argv[])
{
	int out[2], r;
	pid_t pid;
	char url[128];
	size_t got = 0;
	unsigned port;

	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	r = spawn_io(argv, -1, out[1], &pid);
	close(out[1]);
	if (r < 0) {
		close(out[0]);
		return r;
	}
	/* The first line on its stdout is the bound URL. */
	while (got < sizeof(url) - 1) {
		struct pollfd pfd = { .fd = out[0], .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 10000) <= 0 || (n = read(out[0], url + got, 1)) <= 0)
			break;
		if (url[got++] == '\n')
			break;
	}
	url[got] = '\0';
	if (sscanf(url, "ws://127.0.0.1:%u", &port) != 1 || ws_connect(s, name, port) < 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(out[0]);
		return -EPROTO;
	}
	s->pid = pid;
	s->url_fd = out[0];
	return (int)port;
}

/*
 * Close stdin (the server then kills its children and exits) and reap; a
 * ws server gets SIGTERM instead. A client connection (no pid) just closes.
 */
static void server_stop(struct server *s)
{
	int status;

	if (!s->buf)
		return;
	close(s->in);
	if (s->out != s->in)
		close(s->out);
	if (s->pid && s->ws)
		kill(s->pid, SIGTERM);
	while (s->pid && waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (s->url_fd >= 0)
		close(s->url_fd);
	free(s->buf);
	free(s->raw);
	s->buf = NULL;
	s->raw = NULL;
	s->pid = 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

__attribute__((format(printf, 2, 3))) static int sendf(struct server *s, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		return -EOVERFLOW;
	if (s->ws) {
		/* FIN + text, masked with the key 0 (so the payload is as is). */
		char frame[8192 + 14];
		size_t h = 0;

		frame[h++] = (char)0x81;
		if (n < 126) {
			frame[h++] = (char)(0x80 | n);
		} else {
			frame[h++] = (char)(0x80 | 126);
			frame[h++] = (char)((unsigned)n >> 8);
			frame[h++] = (char)((unsigned)n & 0xff);
		}
		memset(frame + h, 0, 4);
		h += 4;
		memcpy(frame + h, line, (size_t)n);
		if (write_all(s->in, frame, h + (size_t)n) < 0) {
			s->dead = true;
			return -EPIPE;
		}
		return 0;
	}
	line[n++] = '\n';
	if (write_all(s->in, line, (size_t)n) < 0) {
		s->dead = true;
		return -EPIPE;
	}
	return 0;
}

/*
 * ws: read what the socket has and append every complete data frame's
 * payload to buf as one line. Pings get their pong; a close ends it.
 * Returns as read(2): > 0 progress, 0 end, < 0 error.
 */
static ssize_t ws_fill(struct server *s)
{
	ssize_t r;
	size_t off = 0;

	if (s->raw_cap - s->raw_len < 65536) {
		char *b = realloc(s->raw, s->raw_cap * 2);

		if (!b)
			return -1;
		s->raw = b;
		s->raw_cap *= 2;
	}
	r = read(s->out, s->raw + s->raw_len, s->raw_cap - s->raw_len);
	if (r <= 0)
		return r;
	s->raw_len += (size_t)r;
	for (;;) {
		const unsigned char *f = (const unsigned char *)s->raw + off;
		size_t avail = s->raw_len - off, h = 2;
		uint64_t len;

		if (avail < 2)
			break;
		len = f[1] & 0x7f;
		if (len == 126) {
			if (avail < 4)
				break;
			len = (uint64_t)f[2] << 8 | f[3];
			h = 4;
		} else if (len == 127) {
			if (avail < 10)
				break;
			len = 0;
			for (int i = 0; i < 8; i++)
				len = len << 8 | f[2 + i];
			h = 10;
		}
		if (avail < h + len)
			break;
		switch (f[0] & 0x0f) {
		case 0x9: { /* ping: pong with the same payload (small) */
			char pong[6 + 125] = { (char)0x8a, (char)(0x80 | (len & 0x7f)) };
			memcpy(pong + 6, f + h, len > 125 ? 125 : len);
			(void)write_all(s->in, pong, 6 + (len > 125 ? 125 : len));
			break;
		}
		case 0x8:
			return 0;
		case 0x1:
		case 0x2:
		case 0x0:
			if (s->cap - s->start - s->len < len + 1) {
				size_t cap = s->cap;
				char *b;

				memmove(s->buf, s->buf + s->start, s->len);
				s->start = 0;
				while (cap - s->len < len + 1)
					cap *= 2;
				b = realloc(s->buf, cap);
				if (!b)
					return -1;
				s->buf = b;
				s->cap = cap;
			}
			memcpy(s->buf + s->start + s->len, f + h, len);
			s->len += len;
			/* The server sends whole messages: FIN ends one. */
			if (f[0] & 0x80)
				s->buf[s->start + s->len++] = '\n';
			break;
		default:
			break;
		}
		off += h + len;
	}
	memmove(s->raw, s->raw + off, s->raw_len - off);
	s->raw_len -= off;
	return r;
}

/*
 * The next line of the server's output (NUL-terminated, without the
 * newline), valid until the next call; NULL at EOF or after IO_TIMEOUT_MS.
 */
static char *next_line(struct server *s, size_t *len)
{
	for (;;) {
		/* Scan only what is new: a 100 MB line arrives in many reads. */
		char *nl = s->len > s->scanned ? memchr(s->buf + s->start + s->scanned, '\n',
							s->len - s->scanned)
					       : NULL;
		struct pollfd pfd = { .fd = s->out, .events = POLLIN };
		ssize_t r;

		if (nl) {
			char *line = s->buf + s->start;
			size_t n = (size_t)(nl - line);

			*nl = '\0';
			s->start += n + 1;
			s->len -= n + 1;
			s->scanned = 0;
			if (len)
				*len = n;
			return line;
		}
		s->scanned = s->len;
		if (s->start > 0) {
			memmove(s->buf, s->buf + s->start, s->len);
			s->start = 0;
		}
		if (s->cap - s->len < 65536) {
			char *b = realloc(s->buf, s->cap * 2);

			if (!b)
				return NULL;
			s->buf = b;
			s->cap *= 2;
		}
		if (poll(&pfd, 1, IO_TIMEOUT_MS) <= 0) {
			s->dead = true;
			return NULL;
		}
		r = s->ws ? ws_fill(s) : read(s->out, s->buf + s->len, s->cap - s->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			s->dead = true;
			return NULL;
		}
		/* ws_fill appended the decoded messages itself. */
		if (!s->ws)
			s->len += (size_t)r;
	}
}

static bool is_response(const char *line, long id)
{
	char pat[40];
	const char *p;
	size_t n;

	n = (size_t)snprintf(pat, sizeof(pat), "\"id\":%ld", id);
	p = strstr(line, pat);
	return p && (p[n] == ',' || p[n] == '}');
}

/*
 * Whether a line is the notification method. Servers put "method" first, so
 * look at the head of the line before scanning all of it: output lines are
 * 11 KB of base64 and the client's parsing must not be what is measured.
 */
static bool is_method(const char *line, const char *method)
{
	static const char key[] = "\"method\":\"";
	size_t head = strnlen(line, 256), mlen = strlen(method);
	const char *p = memmem(line, head, key, sizeof(key) - 1);

	if (!p)
		p = strstr(line, key);
	if (!p)
		return false;
	p += sizeof(key) - 1;
	return !strncmp(p, method, mlen) && p[mlen] == '"';
}

/* Read until the response to id; false on EOF or an error response (printed once). */
static bool wait_response(struct server *s, long id, bool quiet)
{
	char *line;

	while ((line = next_line(s, NULL))) {
		if (!is_response(line, id))
			continue;
		if (strstr(line, "\"error\"")) {
			if (!quiet)
				printf("%s: request %ld failed: %.300s\n", s->name, id, line);
			return false;
		}
		return true;
	}
	printf("%s: no response to request %ld (server gone?)\n", s->name, id);
	return false;
}

static bool handshake(struct server *s)
{
	if (sendf(s, "{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":"
		     "\"bench-serve\"}}") < 0 ||
	    !wait_response(s, 1, false))
		return false;
	return sendf(s, "{\"method\":\"initialized\",\"params\":{}}") == 0;
}

/* The process/start params after processId and argv, for a sandboxed or plain start. */
static char sandbox_json[2048];
/*
 * Limits every host can enforce (rlimits), for the starts with limits: with a
 * delegated cgroup v2 subtree (root, say) they also give the sandbox a cgroup.
 */
static const char limits_json[] =
	",\"cordon\":{\"limits\":{\"open_files\":1024,\"cpu_time\":3600,\"core\":0}}";

static int start_with(struct server *s, const char *pid, const char *argv_json, bool sandboxed,
		      bool limited, long *id)
{
	*id = s->next_id++;
	return sendf(s,
		     "{\"id\":%ld,\"method\":\"process/start\",\"params\":{\"processId\":\"%s\","
		     "\"argv\":%s,\"cwd\":\"file:///tmp\",\"env\":{\"PATH\":\"/usr/bin:/bin\"},"
		     "\"tty\":false,\"pipeStdin\":false,\"arg0\":null%s%s}}",
		     *id, pid, argv_json, sandboxed ? sandbox_json : "",
		     limited ? limits_json : "");
}

static int start(struct server *s, const char *pid, const char *argv_json, bool sandboxed, long *id)
{
	return start_with(s, pid, argv_json, sandboxed, false, id);
}

/* A server configuration measured for latency. */
struct lat {
	const char *name;
	struct server *srv; /* NULL: direct fork/exec/wait */
	bool sandboxed;
	bool limited; /* with limits_json */
	bool enabled;
	double *exited, *closed; /* ms */
	size_t n;
};

static int devnull_fd = -1;

static double direct_true(void)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = { "/bin/true", NULL };
	double t0 = bench_now_ms();
	pid_t pid;
	int status;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull_fd, STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, devnull_fd, STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, devnull_fd, STDERR_FILENO);
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return bench_now_ms() - t0;
}

/* One start of /bin/true; false when the configuration must be dropped. */
static bool lat_once(struct lat *c, unsigned long round, bool record)
{
	char pid[64], *line;
	double t0, t_exit = -1;
	long id;
	bool answered = false;

	if (!c->srv) {
		double d = direct_true();

		if (d < 0)
			return false;
		if (record) {
			c->exited[c->n] = d;
			c->closed[c->n++] = d;
		}
		return true;
	}
	snprintf(pid, sizeof(pid), "lat-%d%d-%lu", c->sandboxed, c->limited, round);
	t0 = bench_now_ms();
	if (start_with(c->srv, pid, "[\"/bin/true\"]", c->sandboxed, c->limited, &id) < 0)
		return false;
	while ((line = next_line(c->srv, NULL))) {
		if (!answered && is_response(line, id)) {
			if (strstr(line, "\"error\"")) {
				printf("skipped %s: process/start failed: %.300s\n", c->name, line);
				return false;
			}
			answered = true;
			continue;
		}
		if (is_method(line, "process/exited") && t_exit < 0)
			t_exit = bench_now_ms() - t0;
		else if (is_method(line, "process/closed")) {
			double t_closed = bench_now_ms() - t0;

			/* The response may follow the notifications. */
			if (!answered && !wait_response(c->srv, id, false))
				return false;
			if (record) {
				c->exited[c->n] = t_exit < 0 ? t_closed : t_exit;
				c->closed[c->n++] = t_closed;
			}
			return true;
		}
	}
	printf("skipped %s: the server stopped answering\n", c->name);
	return false;
}

/* Bytes of one base64 string of length n ending at end (padding counted). */
static size_t b64_decoded(const char *s, size_t n)
{
	size_t pad = 0;

	if (n >= 1 && s[n - 1] == '=')
		pad++;
	if (n >= 2 && s[n - 2] == '=')
		pad++;
	return n / 4 * 3 - pad;
}

/* MB/s of relaying RELAY_BYTES through the server; < 0 on failure. */
static double relay_once(struct server *s, unsigned run)
{
	static const char key[] = "\"chunk\":\"";
	char pid[32], argv_json[96], *line;
	size_t total = 0, len;
	double t0;
	long id;

	snprintf(pid, sizeof(pid), "relay-%u", run);
	snprintf(argv_json, sizeof(argv_json), "[\"head\",\"-c\",\"%ld\",\"/dev/zero\"]",
		 RELAY_BYTES);
	t0 = bench_now_ms();
	if (start(s, pid, argv_json, false, &id) < 0)
		return -1;
	while ((line = next_line(s, &len))) {
		char *c, *q;

		if (is_method(line, "process/closed"))
			break;
		if (!is_method(line, "process/output"))
			continue;
		c = memmem(line, len, key, sizeof(key) - 1);
		if (!c)
			continue;
		c += sizeof(key) - 1;
		q = memchr(c, '"', len - (size_t)(c - line));
		if (q)
			total += b64_decoded(c, (size_t)(q - c));
	}
	if (!line)
		return -1;
	if (total != (size_t)RELAY_BYTES) {
		printf("%s: relay run %u delivered %zu bytes, expected %ld\n", s->name, run, total,
		       RELAY_BYTES);
		return -1;
	}
	return (double)RELAY_BYTES / 1e6 / ((bench_now_ms() - t0) / 1e3);
}

/* utime + stime of a process, in clock ticks; -1 if unknown. */
static long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* After the comm: state is field 3; utime and stime are fields 14 and 15. */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

static double pipe_once(void)
{
	posix_spawn_file_actions_t fa;
	char count[32], *argv[] = { "head", "-c", count, "/dev/zero", NULL };
	static char buf[1 << 16];
	size_t total = 0;
	int p[2], status;
	double t0 = bench_now_ms();
	pid_t pid;
	ssize_t r;

	snprintf(count, sizeof(count), "%ld", RELAY_BYTES);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	while ((r = read(p[0], buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
		if (r > 0)
			total += (size_t)r;
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (total != (size_t)RELAY_BYTES)
		return -1;
	return (double)RELAY_BYTES / 1e6 / ((bench_now_ms() - t0) / 1e3);
}

/* ---- 4. file reads ---- */

static double median_of(double *v, size_t n)
{
	return n ? bench_percentile(v, n, 50) : -1;
}

#define FS_READFILE_MB 100
/* Runs of each file read (BENCH_FS_RUNS): the median of a few, as these machines are noisy. */
#define FS_RUNS 7

/* A file of mb MiB of non-repeating bytes (not sparse: read from the page cache). */
static int make_file(const char *path, long mb)
{
	static unsigned char block[1 << 20];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	for (long i = 0; i < mb; i++) {
		for (size_t k = 0; k < sizeof(block); k += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(block + k, &x, 8);
		}
		if (write_all(fd, (const char *)block, sizeof(block)) < 0) {
			close(fd);
			return -EIO;
		}
	}
	return close(fd) < 0 ? -errno : 0;
}

/* MB/s of `cat path > /dev/null`. */
static double cat_once(const char *path, long bytes)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = { "cat", (char *)path, NULL };
	double t0 = bench_now_ms();
	pid_t pid;
	int status;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull_fd, STDOUT_FILENO);
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return (double)bytes / 1e6 / ((bench_now_ms() - t0) / 1e3);
}

/*
 * The decoded length of the base64 string after key in line; -1 if absent.
 * *end: just past its closing quote. Cheap: the client must not be what
 * the measurement measures.
 */
static long b64_field(const char *line, size_t len, const char *key, const char **end)
{
	const char *c = memmem(line, len < 256 ? len : 256, key, strlen(key)), *q;

	if (!c)
		return -1;
	c += strlen(key);
	q = memchr(c, '"', len - (size_t)(c - line));
	if (end)
		*end = q ? q + 1 : NULL;
	return q ? (long)b64_decoded(c, (size_t)(q - c)) : -1;
}

/* The response to id (other lines skipped); NULL on failure. */
static char *response_line(struct server *s, long id, size_t *len)
{
	char *line;

	while ((line = next_line(s, len)))
		if (is_response(line, id))
			/* Errors are short; a long line is a result (do not scan it). */
			return *len < 65536 && strstr(line, "\"error\"") ? NULL : line;
	return NULL;
}

/* MB/s of streaming path through fs/open + fs/readBlock; < 0 on failure. */
static double stream_once(struct server *s, const char *path, long bytes, bool sandboxed,
			  unsigned run)
{
	double t0 = bench_now_ms();
	long id = s->next_id++, total = 0;
	size_t len;
	char *line;

	if (sendf(s,
		  "{\"id\":%ld,\"method\":\"fs/open\",\"params\":{\"handleId\":\"b%u%d\","
		  "\"path\":\"file://%s\"%s}}",
		  id, run, sandboxed, path, sandboxed ? sandbox_json : "") < 0 ||
	    !response_line(s, id, &len))
		return -1;
	for (;;) {
		id = s->next_id++;
		if (sendf(s,
			  "{\"id\":%ld,\"method\":\"fs/readBlock\",\"params\":{\"handleId\":"
			  "\"b%u%d\",\"offset\":%ld,\"len\":1048576}}",
			  id, run, sandboxed, total) < 0 ||
		    !(line = response_line(s, id, &len)))
			return -1;
		const char *rest;
		long n = b64_field(line, len, "\"chunk\":\"", &rest);
		if (n < 0)
			return -1;
		total += n;
		if (strstr(rest, "\"eof\":true"))
			break;
	}
	/* Codex keeps a handle open at EOF; cordon has released it already. */
	sendf(s, "{\"id\":%ld,\"method\":\"fs/close\",\"params\":{\"handleId\":\"b%u%d\"}}",
	      s->next_id, run, sandboxed);
	if (!response_line(s, s->next_id++, &len) || total != bytes)
		return -1;
	return (double)bytes / 1e6 / ((bench_now_ms() - t0) / 1e3);
}

/* MB/s of fs/readFile of path; < 0 on failure. */
static double readfile_once(struct server *s, const char *path, long bytes)
{
	double t0 = bench_now_ms();
	long id = s->next_id++;
	size_t len;
	char *line;

	if (sendf(s,
		  "{\"id\":%ld,\"method\":\"fs/readFile\",\"params\":{\"path\":"
		  "\"file://%s\"}}",
		  id, path) < 0 ||
	    !(line = response_line(s, id, &len)) ||
	    b64_field(line, len, "\"dataBase64\":\"", NULL) != bytes)
		return -1;
	return (double)bytes / 1e6 / ((bench_now_ms() - t0) / 1e3);
}

static void print_rate(const char *name, double *v, size_t n, double base)
{
	double m = median_of(v, n);

	if (m < 0)
		printf("%-40s %10s\n", name, "failed");
	else
		printf("%-40s %10.0f %8.2fx\n", name, m, base > 0 ? m / base : 0.0);
}

static long vm_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * The process that runs cordon's loop: the only child of the started one,
 * which stays outside as a small supervisor (src/serve/pidns.c). Another
 * server (Codex), or one without children: pid itself.
 */
static pid_t loop_pid(const struct server *s)
{
	char path[64], buf[64], *end;
	FILE *f;
	long child;

	if (!s->supervised)
		return s->pid;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)s->pid, (int)s->pid);
	f = fopen(path, "re");
	if (!f)
		return s->pid;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	child = strtol(buf, &end, 10);
	/* Exactly one child: "N " and nothing after. */
	if (end == buf || child <= 0 || strspn(end, " \n") != strlen(end))
		return s->pid;
	return (pid_t)child;
}

/* RSS idle after initialize and with LIVE_PROCS sleeping children. */
static bool rss(char *const argv[], const char *name, bool supervised, long *idle, long *live)
{
	struct server s;
	char pid[32], *line;
	int i, closed = 0;
	long id;

	if (server_spawn(&s, name, argv) < 0 || !handshake(&s)) {
		server_stop(&s);
		return false;
	}
	s.supervised = supervised;
	usleep(200000);
	*idle = vm_rss_kb(loop_pid(&s));
	for (i = 0; i < LIVE_PROCS; i++) {
		snprintf(pid, sizeof(pid), "live-%d", i);
		if (start(&s, pid, "[\"sleep\",\"60\"]", false, &id) < 0 ||
		    !wait_response(&s, id, false)) {
			server_stop(&s);
			return false;
		}
	}
	usleep(200000);
	*live = vm_rss_kb(loop_pid(&s));
	for (i = 0; i < LIVE_PROCS; i++) {
		id = s.next_id++;
		sendf(&s,
		      "{\"id\":%ld,\"method\":\"process/terminate\",\"params\":{\"processId\":"
		      "\"live-%d\"}}",
		      id, i);
	}
	while (closed < LIVE_PROCS && (line = next_line(&s, NULL)))
		if (is_method(line, "process/closed"))
			closed++;
	server_stop(&s);
	return closed == LIVE_PROCS;
}

/*
 * The server's RSS with WS_CLIENTS connected, initialized clients (each
 * then asks environment/status, so all are surely served); -1 on failure.
 */
static long ws_clients_rss(struct server *srv, unsigned port)
{
	static struct server c[WS_CLIENTS];
	long kb = -1;
	size_t i, n = 0;

	for (i = 0; i < WS_CLIENTS; i++, n++)
		if (ws_connect(&c[i], "ws client", port) < 0 || !handshake(&c[i]))
			goto out;
	for (i = 0; i < WS_CLIENTS; i++) {
		long id = c[i].next_id++;
		if (sendf(&c[i], "{\"id\":%ld,\"method\":\"environment/status\"}", id) < 0 ||
		    !wait_response(&c[i], id, false))
			goto out;
	}
	usleep(200000);
	kb = vm_rss_kb(loop_pid(srv));
out:
	for (i = 0; i < n; i++)
		server_stop(&c[i]);
	if (n < WS_CLIENTS)
		server_stop(&c[n]);
	return kb;
}

static void print_lat(const char *name, double *v, size_t n, double base)
{
	double med, p90;

	if (n == 0) {
		printf("%-40s %10s\n", name, "-");
		return;
	}
	p90 = bench_percentile(v, n, 90);
	med = bench_percentile(v, n, 50);
	printf("%-40s %10.3f %10.3f %8.1fx\n", name, med, p90, base > 0 ? med / base : 0.0);
}

int main(int argc, char **argv)
{
	char ws_template[PATH_MAX], *ws;
	const char *tmp = getenv("TMPDIR"), *codex = getenv("CODEX_BIN");
	/* The default mode; RSS and CPU are measured on the loop's process (loop_pid). */
	char *cordon_argv[] = { NULL,	  "serve", "--listen", "stdio", "--max-processes",
				"100000", NULL };
	char *codex_argv[] = { NULL, "exec-server", "--listen", "stdio", NULL };
	char *cordon_ws_argv[] = {
		NULL, "serve", "--listen", "ws://127.0.0.1:0", "--max-processes", "100000", NULL
	};
	char *codex_ws_argv[] = { NULL, "exec-server", "--listen", "ws://127.0.0.1:0", NULL };
	/* WebSocket: [0] cordon, [1] codex; latency configs plain and sandboxed for each. */
	struct server wsrv[2];
	struct lat wcfg[4];
	int wport[2] = { -1, -1 };
	size_t n_wsrv = 0, n_wcfg = 0;
	double wrelay[2][RELAY_RUNS];
	size_t n_wrelay[2] = { 0, 0 };
	long wrss[2] = { -1, -1 };
	struct server srv[2], baseline_srv;
	struct lat cfg[9];
	const char *baseline = getenv("CORDON_BASELINE");
	char *baseline_argv[] = { NULL,	    "serve", "--listen", "stdio", "--max-processes",
				  "100000", NULL };
	size_t n_cfg = 0, i, k, n_srv = 0;
	unsigned long n, round;
	double relay[2][RELAY_RUNS], pipe_rate[RELAY_RUNS], relay_cpu[2] = { 0, 0 };
	size_t n_relay[2] = { 0, 0 }, n_pipe = 0;
	long idle[2] = { -1, -1 }, live[2] = { -1, -1 };
	double base;
	/* File reads: [0] cordon, [1] cordon sandboxed, [2] codex, [3] and [4] the baseline's. */
	double stream[5][FS_RUNS], readfile[2][FS_RUNS], cat_big[FS_RUNS], cat_small[FS_RUNS];
	size_t n_stream[5] = { 0, 0, 0, 0, 0 }, n_readfile[2] = { 0, 0 }, n_cat = 0;
	long fs_mb = 1024;
	size_t fs_runs = FS_RUNS;
	char big[PATH_MAX + 16], small[PATH_MAX + 16];

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORDON\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	cordon_argv[0] = argv[1];
	codex_argv[0] = (char *)codex;
	cordon_ws_argv[0] = argv[1];
	codex_ws_argv[0] = (char *)codex;
	n = bench_parse_n("bench-serve");
	devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull_fd < 0) {
		perror("bench-serve: /dev/null");
		return 1;
	}
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	snprintf(ws_template, sizeof(ws_template), "%s/cordon-bench-serve-XXXXXX", tmp);
	ws = mkdtemp(ws_template);
	if (!ws) {
		perror("bench-serve: mkdtemp");
		return 1;
	}
	/* workspace-write-like: read everything, write the workspace, no network. */
	snprintf(
		sandbox_json, sizeof(sandbox_json),
		",\"sandbox\":{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
		"\"restricted\",\"entries\":[{\"path\":{\"type\":\"special\",\"value\":{\"kind\":"
		"\"root\"}},\"access\":\"read\"},{\"path\":{\"type\":\"special\",\"value\":"
		"{\"kind\":\"project_roots\"}},\"access\":\"write\"}]},\"network\":\"restricted\"},"
		"\"workspaceRoots\":[\"file://%s\"],\"cwd\":\"file://%s\","
		"\"windowsSandboxLevel\":\"disabled\"}",
		ws, ws);

	memset(cfg, 0, sizeof(cfg));
	cfg[n_cfg++] = (struct lat){ .name = "direct fork/exec/wait", .enabled = true };
	if (server_spawn(&srv[n_srv], "cordon serve", cordon_argv) < 0 || !handshake(&srv[n_srv])) {
		fprintf(stderr, "bench-serve: %s serve does not start\n", argv[1]);
		return 1;
	}
	srv[n_srv].supervised = true;
	cfg[n_cfg++] = (struct lat){ .name = "cordon serve", .srv = &srv[n_srv], .enabled = true };
	cfg[n_cfg++] = (struct lat){ .name = "cordon serve sandboxed",
				     .srv = &srv[n_srv],
				     .sandboxed = true,
				     .enabled = true };
	n_srv++;
	if (codex) {
		if (server_spawn(&srv[n_srv], "codex exec-server", codex_argv) < 0 ||
		    !handshake(&srv[n_srv])) {
			printf("codex exec-server (%s) does not start: not measured\n", codex);
			server_stop(&srv[n_srv]);
			codex = NULL;
		} else {
			cfg[n_cfg++] = (struct lat){ .name = "codex exec-server",
						     .srv = &srv[n_srv],
						     .enabled = true };
			cfg[n_cfg++] = (struct lat){ .name = "codex exec-server sandboxed",
						     .srv = &srv[n_srv],
						     .sandboxed = true,
						     .enabled = true };
			n_srv++;
		}
	}
	/* After the others: the codex figures above are read by index. */
	if (baseline && *baseline) {
		baseline_argv[0] = (char *)baseline;
		if (server_spawn(&baseline_srv, "baseline cordon serve", baseline_argv) < 0 ||
		    !handshake(&baseline_srv)) {
			printf("baseline cordon serve (%s) does not start: not measured\n",
			       baseline);
			server_stop(&baseline_srv);
			baseline = NULL;
		} else {
			baseline_srv.supervised = true;
			cfg[n_cfg++] = (struct lat){ .name = "baseline cordon serve",
						     .srv = &baseline_srv,
						     .enabled = true };
			cfg[n_cfg++] = (struct lat){ .name = "baseline cordon serve sandboxed",
						     .srv = &baseline_srv,
						     .sandboxed = true,
						     .enabled = true };
		}
	} else {
		baseline = NULL;
	}
	/* The same server with limits: what they cost a start (last: indexes above are read). */
	cfg[n_cfg++] = (struct lat){
		.name = "cordon serve + limits", .srv = &srv[0], .limited = true, .enabled = true
	};
	cfg[n_cfg++] = (struct lat){ .name = "cordon serve sandboxed + limits",
				     .srv = &srv[0],
				     .sandboxed = true,
				     .limited = true,
				     .enabled = true };
	for (i = 0; i < n_cfg; i++) {
		cfg[i].exited = calloc(n, sizeof(double));
		cfg[i].closed = calloc(n, sizeof(double));
		if (!cfg[i].exited || !cfg[i].closed) {
			perror("bench-serve: calloc");
			return 1;
		}
	}

	printf("bench-serve: %lu timed starts of /bin/true per configuration after %d warm-up "
	       "runs, interleaved round-robin\n",
	       n, WARMUP);
	for (round = 0; round < WARMUP + n; round++)
		for (i = 0; i < n_cfg; i++)
			if (cfg[i].enabled && !lat_once(&cfg[i], round, round >= WARMUP))
				cfg[i].enabled = false;
	/* The baseline streams too (4.), beside this build, turn by turn. */

	for (i = 0; i < RELAY_RUNS; i++) {
		double r = pipe_once();

		if (r > 0)
			pipe_rate[n_pipe++] = r;
		for (k = 0; k < n_srv; k++) {
			long c0, c1;

			if (srv[k].dead)
				continue;
			c0 = cpu_ticks(loop_pid(&srv[k]));
			r = relay_once(&srv[k], (unsigned)i);
			c1 = cpu_ticks(loop_pid(&srv[k]));
			if (r > 0)
				relay[k][n_relay[k]++] = r;
			if (c0 >= 0 && c1 >= c0)
				relay_cpu[k] += (double)(c1 - c0);
		}
	}
	if (getenv("BENCH_FS_MB"))
		fs_mb = atol(getenv("BENCH_FS_MB"));
	if (getenv("BENCH_FS_RUNS"))
		fs_runs = (size_t)atol(getenv("BENCH_FS_RUNS"));
	if (fs_runs < 1 || fs_runs > FS_RUNS)
		fs_runs = FS_RUNS;
	snprintf(big, sizeof(big), "%s/big", ws);
	snprintf(small, sizeof(small), "%s/small", ws);
	if (fs_mb <= 0 || make_file(big, fs_mb) < 0 || make_file(small, FS_READFILE_MB) < 0) {
		printf("file reads: cannot create the test files in %s: not measured\n", ws);
		fs_mb = 0;
	}
	for (i = 0; fs_mb > 0 && i < fs_runs; i++) {
		double r;

		/* Warm the page cache once, so every reader starts alike. */
		if (i == 0)
			(void)cat_once(big, fs_mb << 20);
		cat_big[n_cat] = cat_once(big, fs_mb << 20);
		cat_small[n_cat++] = cat_once(small, (long)FS_READFILE_MB << 20);
		/* The baseline streams too, first every other run: neither always goes behind. */
		for (k = 0; baseline && i % 2 == 1 && !baseline_srv.dead && k < 2; k++) {
			r = stream_once(&baseline_srv, big, fs_mb << 20, k == 1, (unsigned)i);
			if (r > 0)
				stream[3 + k][n_stream[3 + k]++] = r;
		}
		for (k = 0; k < n_srv; k++) {
			if (srv[k].dead)
				continue;
			r = stream_once(&srv[k], big, fs_mb << 20, false, (unsigned)i);
			if (r > 0)
				stream[k ? 2 : 0][n_stream[k ? 2 : 0]++] = r;
			if (k == 0 &&
			    (r = stream_once(&srv[k], big, fs_mb << 20, true, (unsigned)i)) > 0)
				stream[1][n_stream[1]++] = r;
			r = readfile_once(&srv[k], small, (long)FS_READFILE_MB << 20);
			if (r > 0)
				readfile[k][n_readfile[k]++] = r;
		}
		for (k = 0; baseline && i % 2 == 0 && !baseline_srv.dead && k < 2; k++) {
			r = stream_once(&baseline_srv, big, fs_mb << 20, k == 1, (unsigned)i);
			if (r > 0)
				stream[3 + k][n_stream[3 + k]++] = r;
		}
	}
	for (i = 0; i < n_srv; i++)
		server_stop(&srv[i]);
	if (baseline)
		server_stop(&baseline_srv);

	/* ---- 5. the same over WebSocket ---- */
	memset(wcfg, 0, sizeof(wcfg));
	for (k = 0; k < 2; k++) {
		char *const *av = k ? codex_ws_argv : cordon_ws_argv;
		const char *nm = k ? "codex exec-server ws" : "cordon serve ws";

		if (k && !codex)
			break;
		wport[k] = server_spawn_ws(&wsrv[n_wsrv], nm, av);
		if (wport[k] < 0 || !handshake(&wsrv[n_wsrv])) {
			printf("%s does not start: not measured\n", nm);
			server_stop(&wsrv[n_wsrv]);
			wport[k] = -1;
			continue;
		}
		wsrv[n_wsrv].supervised = !k;
		wcfg[n_wcfg++] = (struct lat){ .name = nm, .srv = &wsrv[n_wsrv], .enabled = true };
		wcfg[n_wcfg++] = (struct lat){ .name = k ? "codex exec-server ws sandboxed"
							 : "cordon serve ws sandboxed",
					       .srv = &wsrv[n_wsrv],
					       .sandboxed = true,
					       .enabled = true };
		n_wsrv++;
	}
	for (i = 0; i < n_wcfg; i++) {
		wcfg[i].exited = calloc(n, sizeof(double));
		wcfg[i].closed = calloc(n, sizeof(double));
		if (!wcfg[i].exited || !wcfg[i].closed) {
			perror("bench-serve: calloc");
			return 1;
		}
	}
	for (round = 0; round < WARMUP + n; round++)
		for (i = 0; i < n_wcfg; i++)
			if (wcfg[i].enabled && !lat_once(&wcfg[i], round, round >= WARMUP))
				wcfg[i].enabled = false;
	for (i = 0; i < RELAY_RUNS; i++)
		for (k = 0; k < n_wsrv; k++) {
			double r = wsrv[k].dead ? -1 : relay_once(&wsrv[k], (unsigned)i);
			if (r > 0)
				wrelay[k][n_wrelay[k]++] = r;
		}
	for (k = 0; k < n_wsrv; k++) {
		int port = wsrv[k].supervised ? wport[0] : wport[1];
		wrss[k] = ws_clients_rss(&wsrv[k], (unsigned)port);
		server_stop(&wsrv[k]);
	}

	if (!rss(cordon_argv, "cordon serve", true, &idle[0], &live[0]))
		printf("cordon serve: the memory run failed\n");
	if (codex && !rss(codex_argv, "codex exec-server", false, &idle[1], &live[1]))
		printf("codex exec-server: the memory run failed\n");

	printf("\nlatency: process/start sent -> notification received\n");
	printf("%-40s %10s %10s %9s\n", "config", "median ms", "p90 ms", "ratio");
	base = cfg[0].n ? bench_percentile(cfg[0].exited, cfg[0].n, 50) : 0;
	print_lat("direct fork/exec/wait /bin/true", cfg[0].exited, cfg[0].n, base);
	for (i = 1; i < n_cfg; i++) {
		char name[96];

		snprintf(name, sizeof(name), "%s -> exited", cfg[i].name);
		print_lat(name, cfg[i].exited, cfg[i].n, base);
		snprintf(name, sizeof(name), "%s -> closed", cfg[i].name);
		print_lat(name, cfg[i].closed, cfg[i].n, base);
	}

	printf("\nrelay: head -c %ld /dev/zero, decoded bytes, median of %d runs\n", RELAY_BYTES,
	       RELAY_RUNS);
	printf("%-40s %10s %9s %16s\n", "config", "MB/s", "ratio", "server CPU ms/GB");
	base = median_of(pipe_rate, n_pipe);
	printf("%-40s %10.0f %8.2fx\n", "plain pipe read", base, 1.0);
	for (i = 0; i < n_srv; i++) {
		double m = median_of(relay[i], n_relay[i]);
		/* CPU the server itself spent per GB relayed: what bounds it on a free core. */
		double cpu = n_relay[i] ? relay_cpu[i] * 1e3 / (double)sysconf(_SC_CLK_TCK) /
						  ((double)n_relay[i] * (double)RELAY_BYTES / 1e9)
					: 0;

		if (m < 0)
			printf("%-40s %10s\n", srv[i].name, "failed");
		else
			printf("%-40s %10.0f %8.2fx %16.0f\n", srv[i].name, m,
			       base > 0 ? m / base : 0.0, cpu);
	}

	if (fs_mb > 0) {
		double cb = median_of(cat_big, n_cat), cs = median_of(cat_small, n_cat);

		printf("\nfile reads over stdio, MB/s, median of %zu runs (ratio: to cat)\n",
		       fs_runs);
		printf("%-40s %10s %9s\n", "config", "MB/s", "ratio");
		printf("stream %ld MiB with fs/open + fs/readBlock (1 MiB blocks)\n", fs_mb);
		print_rate("  cat FILE > /dev/null", cat_big, n_cat, cb);
		print_rate("  cordon serve", stream[0], n_stream[0], cb);
		print_rate("  cordon serve, sandbox context", stream[1], n_stream[1], cb);
		if (codex)
			print_rate("  codex exec-server", stream[2], n_stream[2], cb);
		if (baseline) {
			print_rate("  baseline cordon serve", stream[3], n_stream[3], cb);
			print_rate("  baseline cordon serve, sandbox context", stream[4],
				   n_stream[4], cb);
		}
		printf("fs/readFile of %d MiB\n", FS_READFILE_MB);
		print_rate("  cat FILE > /dev/null", cat_small, n_cat, cs);
		print_rate("  cordon serve", readfile[0], n_readfile[0], cs);
		if (codex)
			print_rate("  codex exec-server", readfile[1], n_readfile[1], cs);
	}

	if (n_wcfg) {
		printf("\nover WebSocket (ws://127.0.0.1): latency (ratio: to direct "
		       "fork/exec/wait), relay, memory\n");
		printf("%-40s %10s %10s %9s\n", "config", "median ms", "p90 ms", "ratio");
		base = cfg[0].n ? bench_percentile(cfg[0].exited, cfg[0].n, 50) : 0;
		for (i = 0; i < n_wcfg; i++) {
			char name[96];

			snprintf(name, sizeof(name), "%s -> closed", wcfg[i].name);
			print_lat(name, wcfg[i].closed, wcfg[i].n, base);
		}
		printf("%-40s %10s %9s\n", "relay, decoded bytes", "MB/s", "ratio");
		base = median_of(pipe_rate, n_pipe);
		for (k = 0; k < n_wsrv; k++)
			print_rate(wsrv[k].name, wrelay[k], n_wrelay[k], base);
		printf("%-40s %10s\n", "server VmRSS, 100 clients connected", "kB");
		for (k = 0; k < n_wsrv; k++)
			printf("%-40s %10ld\n", wsrv[k].name, wrss[k]);
	}

	printf("\nmemory: server VmRSS\n");
	printf("%-40s %10s %14s\n", "config", "idle kB", "200 live kB");
	printf("%-40s %10ld %14ld\n", "cordon serve", idle[0], live[0]);
	if (codex) {
		double c_lat, x_lat, c_sb, x_sb, c_rel, x_rel;

		printf("%-40s %10ld %14ld\n", "codex exec-server", idle[1], live[1]);
		/* cfg: 1, 2 = cordon plain, sandboxed; 3, 4 = codex plain, sandboxed. */
		c_lat = median_of(cfg[1].exited, cfg[1].n);
		c_sb = median_of(cfg[2].exited, cfg[2].n);
		x_lat = n_cfg > 3 ? median_of(cfg[3].exited, cfg[3].n) : -1;
		x_sb = n_cfg > 4 ? median_of(cfg[4].exited, cfg[4].n) : -1;
		c_rel = median_of(relay[0], n_relay[0]);
		x_rel = median_of(relay[1], n_relay[1]);
		printf("\ncodex / cordon (above 1: cordon is better)\n");
		if (c_lat > 0 && x_lat > 0)
			printf("%-40s %9.1fx\n", "start -> exited, unsandboxed", x_lat / c_lat);
		if (c_sb > 0 && x_sb > 0)
			printf("%-40s %9.1fx\n", "start -> exited, sandboxed", x_sb / c_sb);
		if (c_rel > 0 && x_rel > 0)
			printf("%-40s %9.1fx\n", "relay throughput (cordon / codex)",
			       c_rel / x_rel);
		if (idle[0] > 0 && idle[1] > 0)
			printf("%-40s %9.1fx\n", "RSS idle", (double)idle[1] / (double)idle[0]);
		if (live[0] > 0 && live[1] > 0)
			printf("%-40s %9.1fx\n", "RSS with 200 live processes",
			       (double)live[1] / (double)live[0]);
		if (n_stream[0] && n_stream[2])
			printf("%-40s %9.1fx\n", "fs/readBlock streaming (cordon / codex)",
			       median_of(stream[0], n_stream[0]) /
				       median_of(stream[2], n_stream[2]));
		if (n_readfile[0] && n_readfile[1])
			printf("%-40s %9.1fx\n", "fs/readFile (cordon / codex)",
			       median_of(readfile[0], n_readfile[0]) /
				       median_of(readfile[1], n_readfile[1]));
		if (n_wcfg == 4) {
			printf("%-40s %9.1fx\n", "ws start -> closed, unsandboxed",
			       median_of(wcfg[2].closed, wcfg[2].n) /
				       median_of(wcfg[0].closed, wcfg[0].n));
			printf("%-40s %9.1fx\n", "ws start -> closed, sandboxed",
			       median_of(wcfg[3].closed, wcfg[3].n) /
				       median_of(wcfg[1].closed, wcfg[1].n));
		}
		if (n_wrelay[0] && n_wrelay[1])
			printf("%-40s %9.1fx\n", "ws relay throughput (cordon / codex)",
			       median_of(wrelay[0], n_wrelay[0]) /
				       median_of(wrelay[1], n_wrelay[1]));
		if (wrss[0] > 0 && wrss[1] > 0)
			printf("%-40s %9.1fx\n", "RSS with 100 ws clients",
			       (double)wrss[1] / (double)wrss[0]);
	} else
		printf("\nCodex was not measured: set CODEX_BIN to the native codex binary "
		       "(see HACKING.md, \"Benchmarks\").\n");

	for (i = 0; i < n_cfg; i++) {
		free(cfg[i].exited);
		free(cfg[i].closed);
	}
	for (i = 0; i < n_wcfg; i++) {
		free(wcfg[i].exited);
		free(wcfg[i].closed);
	}
	bench_rm_tree("bench-serve", ws);
	return 0;
}

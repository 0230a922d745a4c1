/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "front/front.h"
#include "mac/probe.h"
#include "shared/clock.h"

#define TRUE_PROG "/usr/bin/true"
#define CAT_PROG  "/bin/cat"
#define NOT_TRIED "the item above first"

struct item {
	const char *name;
	bool ok;
	char *detail; /* owned */
	const char *fix;
};

/* What a trial run of the wrapper gave: its exit status (-1: did not exit) and stderr's last line. */
struct trial {
	int status;
	char last[256];
};

static void last_line(const char *buf, size_t n, char *out, size_t size)
{
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	size_t start = n;
	while (start > 0 && buf[start - 1] != '\n')
		start--;
	size_t len = n - start < size - 1 ? n - start : size - 1;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[start + i];
		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	out[len] = '\0';
}

/* How long one trial may take before the wrapper is killed and the item fails. */
#define TRIAL_MS 10000

/*
 * Run argv (argv[0] the wrapper) with stdin and stdout on /dev/null and
 * stderr read back, nothing else of cordon's open in it. Its exit ends the
 * trial, whoever still holds its stderr (a background child); one that runs
 * past TRIAL_MS is killed.
 */
static void try_run(char *const *argv, struct trial *t)
{
	int p[2];
	t->status = -1;
	t->last[0] = '\0';
	/* waitpid needs SIGCHLD not ignored (an ignoring parent's children are reaped at once). */
	struct sigaction dfl = { .sa_handler = SIG_DFL }, old;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGCHLD, &dfl, &old);
	if (pipe(p) < 0) {
		snprintf(t->last, sizeof(t->last), "pipe: %s", strerror(errno));
		goto out;
	}
	(void)fcntl(p[0], F_SETFD, FD_CLOEXEC);
	(void)fcntl(p[1], F_SETFD, FD_CLOEXEC);
	(void)fcntl(p[0], F_SETFL, O_NONBLOCK);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(t->last, sizeof(t->last), "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		goto out;
	}
	if (pid == 0) {
		/* dup2 clears close-on-exec on 0, 1 and 2 only; the rest closes at exec. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(p[1], 2) < 0)
			_exit(126);
		execv(argv[0], argv);
		dprintf(2, "cannot execute %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	/* The last 4 KiB of stderr; what comes before is read and dropped. */
	char buf[4096];
	size_t n = 0;
	int ws = 0;
	pid_t w = 0;
	bool eof = false, killed = false;
	int64_t deadline = (int64_t)cd_mono_ms() + TRIAL_MS;
	while (w == 0) {
		while (!eof) {
			if (n == sizeof(buf)) {
				memmove(buf, buf + sizeof(buf) / 2, sizeof(buf) / 2);
				n = sizeof(buf) / 2;
			}
			ssize_t k = read(p[0], buf + n, sizeof(buf) - n);
			if (k > 0)
				n += (size_t)k;
			else if (k == 0 || (errno != EINTR && errno != EAGAIN))
				eof = true;
			else if (errno == EAGAIN)
				break;
		}
		w = waitpid(pid, &ws, WNOHANG);
		if (w < 0 && errno == EINTR)
			w = 0;
		if (w != 0)
			break;
		int64_t left = deadline - (int64_t)cd_mono_ms();
		if (left <= 0 && !killed) {
			kill(pid, SIGKILL);
			killed = true;
			left = 0;
		}
		/* Woken by its stderr, or every 50 ms to see whether it exited (or by EOF). */
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		if (eof || poll(&pfd, 1, left < 50 ? (int)left : 50) < 0)
			usleep(eof ? 20000 : 0);
	}
	close(p[0]);
	last_line(buf, n, t->last, sizeof(t->last));
	if (killed)
		snprintf(t->last, sizeof(t->last), "it did not finish in %d s and was killed",
			 TRIAL_MS / 1000);
	else if (w < 0)
		snprintf(t->last, sizeof(t->last), "waitpid: %s", strerror(errno));
	else if (WIFEXITED(ws))
		t->status = WEXITSTATUS(ws);
	else if (WIFSIGNALED(ws) && !t->last[0])
		snprintf(t->last, sizeof(t->last), "killed by signal %d", WTERMSIG(ws));
out:
	sigaction(SIGCHLD, &old, NULL);
}

static char *failed(const struct trial *t)
{
	if (t->status < 0)
		return cd_xasprintf("%s", t->last[0] ? t->last : "it did not exit");
	return cd_xasprintf("exit status %d%s%s", t->status, t->last[0] ? ": " : "", t->last);
}

int cd_mac_probe(int argc, char **argv, const char *wrapper)
{
	bool json = false;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs("Usage: cordon probe [--json]\n"
			      "\n"
			      "Show whether this host runs sandboxes under Seatbelt, by trying: "
			      "the\n"
			      "wrapper is there, a policy applies (not inside another sandbox), a\n"
			      "denial is enforced; for every gap, the fix.\n"
			      "\n"
			      "Options:\n"
			      "  --json                  one JSON object instead of text\n"
			      "  -h, --help              show this help\n",
			      stdout);
			return 0;
		} else {
			fprintf(stderr, "cordon: probe: unknown option '%s'\n(see cordon --help)\n",
				argv[i]);
			return CD_FRONT_EXIT_USAGE;
		}
	}

	struct item items[3] = {
		{ .name = "sandbox-exec",
		  .fix = "it ships with macOS in /usr/bin; without it cordon run refuses every "
			 "sandboxed command" },
		{ .name = "seatbelt policy",
		  .fix = "macOS applies no sandbox inside another: run cordon outside any sandbox "
			 "(an app's, or another sandbox-exec)" },
		{ .name = "seatbelt denial",
		  .fix = "the wrapper must be macOS's own sandbox-exec, which enforces its "
			 "policy" },
	};
	struct stat st;
	items[0].ok = stat(wrapper, &st) == 0 && S_ISREG(st.st_mode) && access(wrapper, X_OK) == 0;
	items[0].detail = items[0].ok ? cd_xasprintf("%s, an executable file", wrapper)
				      : cd_xasprintf("%s is not an executable file", wrapper);

	struct trial t;
	if (!items[0].ok) {
		items[1].detail = cd_xstrdup("not tried: no sandbox-exec");
		items[1].fix = NOT_TRIED;
	} else {
		char *av[] = { (char *)wrapper, "-p", "(version 1)(allow default)", "--",
			       TRUE_PROG,	NULL };
		try_run(av, &t);
		items[1].ok = t.status == 0;
		if (items[1].ok) {
			items[1].detail =
				cd_xstrdup("a policy applies (" TRUE_PROG " ran under one)");
		} else {
			char *why = failed(&t);
			items[1].detail = cd_xasprintf("sandbox-exec could not run " TRUE_PROG
						       " under a policy that allows everything: %s",
						       why);
			free(why);
		}
	}

	/* The file denied is the wrapper itself: it exists, and everyone may read it. */
	char real[PATH_MAX];
	if (!items[1].ok) {
		items[2].detail = cd_xstrdup("not tried: no policy applies");
		items[2].fix = NOT_TRIED;
	} else if (!realpath(wrapper, real)) {
		items[2].detail = cd_xasprintf("not tried: %s: %s", wrapper, strerror(errno));
	} else {
		char *def = cd_xasprintf("-DCORDON_PROBE_FILE=%s", real);
		char *av[] = { (char *)wrapper,
			       "-p",
			       "(version 1)(allow default)"
			       "(deny file-read* (literal (param \"CORDON_PROBE_FILE\")))",
			       def,
			       "--",
			       CAT_PROG,
			       real,
			       NULL };
		try_run(av, &t);
		free(def);
		/* cat's own refusal, not a wrapper that failed some other way. */
		items[2].ok = t.status == 1 && strstr(t.last, "Operation not permitted");
		if (items[2].ok)
			items[2].detail = cd_xasprintf("a read the policy denies failed (" CAT_PROG
						       " %s: Operation not permitted)",
						       real);
		else if (t.status == 0)
			items[2].detail =
				cd_xasprintf("a read the policy denies succeeded (" CAT_PROG
					     " %s): %s does not enforce its policy",
					     real, wrapper);
		else {
			char *why = failed(&t);
			items[2].detail = cd_xasprintf(CAT_PROG " %s under a policy that denies it "
								"did not fail as a denial does: %s",
						       real, why);
			free(why);
		}
	}

	const char *backend = "seatbelt (sandboxType macosSeatbelt): sandbox-exec with the "
			      "policy cordon explain shows";
	if (json) {
		struct utsname u;
		bool have_u = uname(&u) == 0;
		struct cd_strbuf sb = { 0 };
		cd_strbuf_append(&sb, "{\"host\":{\"sandbox_exec\":");
		cd_strbuf_append_json_cstr(&sb, wrapper);
		cd_strbuf_append(&sb, ",\"os\":");
		char *os = have_u ? cd_xasprintf("%s %s", u.sysname, u.release) : NULL;
		cd_strbuf_append_json_cstr(&sb, os);
		free(os);
		cd_strbuf_printf(&sb, ",\"is_root\":%s},\"items\":[",
				 geteuid() == 0 ? "true" : "false");
		for (size_t i = 0; i < 3; i++) {
			cd_strbuf_append(&sb, i ? ",{\"name\":" : "{\"name\":");
			cd_strbuf_append_json_cstr(&sb, items[i].name);
			cd_strbuf_printf(&sb,
					 ",\"ok\":%s,\"detail\":", items[i].ok ? "true" : "false");
			cd_strbuf_append_json_cstr(&sb, items[i].detail);
			cd_strbuf_append(&sb, ",\"fix\":");
			cd_strbuf_append_json_cstr(&sb, items[i].ok ? NULL : items[i].fix);
			cd_strbuf_append_c(&sb, '}');
		}
		cd_strbuf_append(&sb, "],\"backend\":{\"name\":\"seatbelt\","
				      "\"sandboxType\":\"macosSeatbelt\"}}\n");
		fputs(sb.buf, stdout);
		cd_strbuf_done(&sb);
	} else {
		printf("ok   backend: %s\n", backend);
		for (size_t i = 0; i < 3; i++) {
			if (items[i].ok)
				printf("ok   %s: %s\n", items[i].name, items[i].detail);
			else
				printf("MISSING %s: %s \xe2\x80\x94 fix: %s\n", items[i].name,
				       items[i].detail, items[i].fix);
		}
	}
	for (size_t i = 0; i < 3; i++)
		free(items[i].detail);
	return fflush(stdout) == 0 ? 0 : CD_FRONT_EXIT_SETUP;
}

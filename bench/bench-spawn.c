/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-spawn: what does wrapping a command in cordon cost?
 *
 * Times the spawn-to-exit latency of /bin/true plain, under cordon's three
 * built-in profiles and, when it is installed, under bubblewrap as the
 * baseline of the same kind of tool. The configurations are interleaved,
 * one run of each per round in a shuffled order, so that a burst of
 * machine noise lands on all of them alike instead of skewing whichever ran
 * during it.
 *
 * FLOOR is bench-floor built like cordon: the kernel work of a
 * workspace-write run without cordon, so the difference is what cordon's
 * own code costs. FLOOR-MUSL is the same program linked against musl,
 * timed with and without its network namespace: what the C library's
 * start-up and that namespace cost on this machine.
 *
 * The workspace-write run is also timed with limits (rlimits, and the
 * sandbox's cgroup where the host delegates one), with the same limits
 * without a cgroup, and with a private /tmp; and, with CORDON_BASELINE set
 * to another build's cordon, that build's workspace-write run.
 *
 * workspace-write and read-only are also timed with CORDON_POLICY_PATH
 * empty: the profile then comes from $(sysconfdir) or $(datadir) when
 * installed there, else from the copy built into cordon, so on a tree not
 * installed that is what parsing the built-in costs beside reading the file.
 *
 * read-only is also timed with a managed network (--network managed and a
 * proxy endpoint nobody listens on; and with cordon's own proxy), beside its
 * restricted network.
 *
 * Usage: bench-spawn CORDON POLICYDIR [FLOOR [FLOOR-MUSL]]
 *        (BENCH_N overrides the run count)
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"

#define WARMUP	 20
#define MAX_ARGS 24

extern char **environ;

struct config {
	const char *name;
	char *argv[MAX_ARGS];
	char **envp; /* NULL: ours */
	bool enabled;
	double *samples; /* milliseconds */
	size_t n;
};

static int devnull_fd = -1;

/* Spawn argv with stdin/stdout from /dev/null and stderr to errfd (or
 * /dev/null); wait for it. Returns the wait status, or -errno. */
static int run_once(char *const argv[], char **envp, int errfd)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int r, status;

	r = posix_spawn_file_actions_init(&fa);
	if (r != 0)
		return -r;
	r = posix_spawn_file_actions_adddup2(&fa, devnull_fd, STDIN_FILENO);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, devnull_fd, STDOUT_FILENO);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, errfd >= 0 ? errfd : devnull_fd,
						     STDERR_FILENO);
	if (r == 0)
		r = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp ? envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -r;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return status;
}

/* Run a configuration once outside the timing and say why it cannot be
 * benchmarked, if it cannot: timing a command that fails measures nothing. */
static bool preflight(struct config *c)
{
	char line[512] = "";
	FILE *err = tmpfile();
	int status;

	status = run_once(c->argv, c->envp, err ? fileno(err) : -1);
	if (status == 0) {
		if (err)
			fclose(err);
		return true;
	}
	if (err) {
		rewind(err);
		if (!fgets(line, sizeof(line), err))
			line[0] = '\0';
		line[strcspn(line, "\n")] = '\0';
		fclose(err);
	}
	if (status < 0)
		printf("skipped %s: cannot spawn %s: %s\n", c->name, c->argv[0], strerror(-status));
	else if (WIFEXITED(status))
		printf("skipped %s: exit status %d%s%s\n", c->name, WEXITSTATUS(status),
		       line[0] ? ": " : "", line);
	else
		printf("skipped %s: killed by signal %d\n", c->name, WTERMSIG(status));
	return false;
}

/* An executable named prog in $PATH, written into buf; false if none. */
static bool find_in_path(const char *prog, char *buf, size_t size)
{
	const char *path = getenv("PATH");
	const char *p, *end;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		int len;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		len = snprintf(buf, size, "%.*s/%s", (int)(end - p), p, prog);
		if (len > 0 && (size_t)len < size && end > p && access(buf, X_OK) == 0)
			return true;
	}
	return false;
}

/* Our environment with one NAME=VALUE more (or instead of ours); malloc'ed array. */
static char **env_with(char *entry)
{
	size_t n = 0, k = 0, len = strcspn(entry, "=") + 1;
	while (environ[n])
		n++;
	char **e = calloc(n + 2, sizeof(*e));
	if (!e)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], entry, len) != 0)
			e[k++] = environ[i];
	e[k] = entry;
	return e;
}

static void set_argv(struct config *c, const char *name, char *const *args)
{
	size_t i;

	c->name = name;
	for (i = 0; args[i] && i < MAX_ARGS - 1; i++)
		c->argv[i] = args[i];
	c->argv[i] = NULL;
	c->enabled = true;
}

int main(int argc, char **argv)
{
	char ws_template[PATH_MAX], bwrap[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	struct config cfg[20];
	size_t n_cfg = 0, i, round;
	unsigned long n;
	char *cordon, *ws;
	bool have_bwrap;
	double base = 0;

	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: %s CORDON POLICYDIR [FLOOR [FLOOR-MUSL]]\n", argv[0]);
		return 2;
	}
	cordon = argv[1];
	if (setenv("CORDON_POLICY_PATH", argv[2], 1) < 0) {
		perror("bench-spawn: setenv");
		return 1;
	}
	n = bench_parse_n("bench-spawn");

	devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull_fd < 0) {
		perror("bench-spawn: /dev/null");
		return 1;
	}
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	snprintf(ws_template, sizeof(ws_template), "%s/cordon-bench-XXXXXX", tmp);
	ws = mkdtemp(ws_template);
	if (!ws) {
		perror("bench-spawn: mkdtemp");
		return 1;
	}

	memset(cfg, 0, sizeof(cfg));
	set_argv(&cfg[n_cfg++], "plain /bin/true", (char *[]){ "/bin/true", NULL });
	set_argv(&cfg[n_cfg++], "cordon workspace-write",
		 (char *[]){ cordon, "run", "--profile", "workspace-write", "--workspace-root", ws,
			     "--cwd", ws, "--", "/bin/true", NULL });
	/*
	 * Limits every host can enforce (rlimits; with a delegated cgroup v2
	 * subtree, as root, a cgroup too), and without the cgroup (the test hook
	 * only takes it away), and a private /tmp: what each adds to a start.
	 */
	static char *const limits[] = { "--limit-open-files", "1024", "--limit-cpu-time", "1h",
					"--limit-core",	      "0" };
	char **nocg_env = env_with("CORDON_TEST_DISABLE=cgroup");
	set_argv(&cfg[n_cfg++], "cordon ww + limits",
		 (char *[]){ cordon, "run", "--profile", "workspace-write", "--workspace-root", ws,
			     "--cwd", ws, limits[0], limits[1], limits[2], limits[3], limits[4],
			     limits[5], "--", "/bin/true", NULL });
	set_argv(&cfg[n_cfg++], "cordon ww + limits, no cgroup",
		 (char *[]){ cordon, "run", "--profile", "workspace-write", "--workspace-root", ws,
			     "--cwd", ws, limits[0], limits[1], limits[2], limits[3], limits[4],
			     limits[5], "--", "/bin/true", NULL });
	cfg[n_cfg - 1].envp = nocg_env;
	/* Its workspace outside /tmp, which the private one would hide (a refusal). */
	char ws_out_template[] = "/var/tmp/cordon-bench-XXXXXX";
	char *ws_out = mkdtemp(ws_out_template);
	if (ws_out)
		set_argv(&cfg[n_cfg++], "cordon ww + private /tmp",
			 (char *[]){ cordon, "run", "--profile", "workspace-write",
				     "--workspace-root", ws_out, "--cwd", ws_out,
				     "--private-tmp=64M", "--", "/bin/true", NULL });
	else
		printf("cannot make a workspace in /var/tmp: no private /tmp measured\n");
	/* Another build's cordon (CORDON_BASELINE), for the cost of a change without limits. */
	const char *baseline = getenv("CORDON_BASELINE");
	if (baseline && *baseline)
		set_argv(&cfg[n_cfg++], "baseline workspace-write",
			 (char *[]){ (char *)baseline, "run", "--profile", "workspace-write",
				     "--workspace-root", ws, "--cwd", ws, "--", "/bin/true",
				     NULL });
	set_argv(&cfg[n_cfg++], "cordon read-only",
		 (char *[]){ cordon, "run", "--profile", "read-only", "--", "/bin/true", NULL });
	/*
	 * The managed network's fence beside it (restricted): lo brought up,
	 * the relay's listening socket handed over, the relay forked and
	 * reaped. /bin/true connects nowhere, so no proxy need listen.
	 */
	set_argv(&cfg[n_cfg++], "cordon ro, managed network",
		 (char *[]){ cordon, "run", "--profile", "read-only", "--network", "managed",
			     "--network-proxy", "unix:/nonexistent/cordon-bench-proxy.sock", "--",
			     "/bin/true", NULL });
	/*
	 * And with cordon's own proxy: its directory and socket made, the
	 * proxy forked (twice) and stopped at the end, its socket removed.
	 */
	set_argv(&cfg[n_cfg++], "cordon ro, managed, own proxy",
		 (char *[]){ cordon, "run", "--profile", "read-only", "--network", "managed",
			     "--allow-domain", "example.com", "--", "/bin/true", NULL });
	/* The same two without CORDON_POLICY_PATH: the built-ins (unless installed). */
	char **nopath_env = env_with("CORDON_POLICY_PATH=");
	set_argv(&cfg[n_cfg++], "cordon ww, no policy path",
		 (char *[]){ cordon, "run", "--profile", "workspace-write", "--workspace-root", ws,
			     "--cwd", ws, "--", "/bin/true", NULL });
	cfg[n_cfg - 1].envp = nopath_env;
	set_argv(&cfg[n_cfg++], "cordon ro, no policy path",
		 (char *[]){ cordon, "run", "--profile", "read-only", "--", "/bin/true", NULL });
	cfg[n_cfg - 1].envp = nopath_env;
	set_argv(&cfg[n_cfg++], "cordon full-access",
		 (char *[]){ cordon, "run", "--profile", "full-access", "--", "/bin/true", NULL });
	if (argc > 3)
		set_argv(&cfg[n_cfg++], "floor (same kernel work)",
			 (char *[]){ argv[3], ws, "--", "/bin/true", NULL });
	if (argc > 4) {
		set_argv(&cfg[n_cfg++], "floor, musl",
			 (char *[]){ argv[4], ws, "--", "/bin/true", NULL });
		set_argv(&cfg[n_cfg++], "floor, musl, no netns",
			 (char *[]){ argv[4], "--no-netns", ws, "--", "/bin/true", NULL });
	}
	have_bwrap = find_in_path("bwrap", bwrap, sizeof(bwrap));
	if (have_bwrap) {
		set_argv(&cfg[n_cfg++], "bwrap --unshare-all (ro /)",
			 (char *[]){ bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
				     "/proc", "--unshare-all", "--die-with-parent", "/bin/true",
				     NULL });
		set_argv(&cfg[n_cfg++], "bwrap user+pid (rw ws)",
			 (char *[]){ bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--bind", ws,
				     ws, "--unshare-user", "--unshare-pid", "--die-with-parent",
				     "/bin/true", NULL });
	}

	printf("bench-spawn: %lu timed runs per configuration after %d warm-up runs, "
	       "interleaved, shuffled each round\n",
	       n, WARMUP);
	if (!have_bwrap)
		printf("bwrap not installed: skipping the bubblewrap baselines "
		       "(apt-get install bubblewrap)\n");

	for (i = 0; i < n_cfg; i++) {
		cfg[i].enabled = preflight(&cfg[i]);
		if (!cfg[i].enabled)
			continue;
		cfg[i].samples = calloc(n, sizeof(double));
		if (!cfg[i].samples) {
			perror("bench-spawn: calloc");
			return 1;
		}
	}
	if (!cfg[0].enabled) {
		fprintf(stderr, "bench-spawn: /bin/true itself does not run\n");
		return 1;
	}

	/*
	 * Each round in its own order (a fixed-seed shuffle): a configuration
	 * that always ran right after another would inherit its cache and
	 * scheduler state, which skewed the one after plain /bin/true by
	 * 0.3 ms here.
	 */
	size_t order[16];
	unsigned long long seed = 88172645463325252ULL;
	for (i = 0; i < n_cfg; i++)
		order[i] = i;
	for (round = 0; round < WARMUP + n; round++) {
		for (size_t k = n_cfg; k > 1; k--) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			size_t j = (size_t)(seed % k), tmp_i = order[k - 1];
			order[k - 1] = order[j];
			order[j] = tmp_i;
		}
		for (size_t k = 0; k < n_cfg; k++) {
			double t0, t1;
			int status;

			i = order[k];
			if (!cfg[i].enabled)
				continue;
			t0 = bench_now_ms();
			status = run_once(cfg[i].argv, cfg[i].envp, -1);
			t1 = bench_now_ms();
			if (status != 0) {
				printf("skipped %s: run %zu failed (status %d)\n", cfg[i].name,
				       round, status);
				cfg[i].enabled = false;
				continue;
			}
			if (round >= WARMUP)
				cfg[i].samples[cfg[i].n++] = t1 - t0;
		}
	}

	printf("\n%-28s %10s %10s %12s %8s\n", "config", "median ms", "p90 ms", "added ms",
	       "ratio");
	for (i = 0; i < n_cfg; i++) {
		double med, p90;

		if (!cfg[i].enabled || cfg[i].n == 0) {
			printf("%-28s %10s\n", cfg[i].name, "-");
			continue;
		}
		med = bench_percentile(cfg[i].samples, cfg[i].n, 50);
		p90 = bench_percentile(cfg[i].samples, cfg[i].n, 90);
		if (i == 0)
			base = med;
		printf("%-28s %10.3f %10.3f %12.3f %7.1fx\n", cfg[i].name, med, p90, med - base,
		       base > 0 ? med / base : 0.0);
	}

	for (i = 0; i < n_cfg; i++)
		free(cfg[i].samples);
	free(nocg_env);
	free(nopath_env);
	bench_rm_tree("bench-spawn", ws);
	if (ws_out)
		bench_rm_tree("bench-spawn", ws_out);
	return 0;
}

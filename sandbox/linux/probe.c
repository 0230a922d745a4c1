/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Host probing: a fast path for building plans (a few system calls and
 * sysctl reads) and a full report for `cordon probe` (which forks to test
 * user namespaces for real).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"

int cd_linux_test_disabled(const char *what)
{
	const char *v = getenv("CORDON_TEST_DISABLE");
	size_t n = strlen(what);

	if (!v)
		return 0;
	while (*v) {
		size_t len = strcspn(v, ",");

		if (len == n && strncmp(v, what, n) == 0)
			return 1;
		v += len;
		if (*v == ',')
			v++;
	}
	return 0;
}

/* Read a small sysctl as an integer: 0 ok, -ENOENT when absent, -errno otherwise. */
static int read_sysctl_int(const char *path, long *ret)
{
	char buf[64];
	ssize_t n;
	char *end;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	close(fd);
	buf[n] = 0;
	errno = 0;
	*ret = strtol(buf, &end, 10);
	if (errno || end == buf)
		return -EINVAL;
	return 0;
}

/* Whole small file, NUL-terminated and with a trailing newline stripped, or NULL. */
static char *read_small_file(const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	return cd_xstrdup(buf);
}

static bool have_cap_effective(unsigned cap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2] = { 0 };

	if (cap >= 64 || syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return data[cap / 32].effective & (1u << (cap % 32));
}

static bool seccomp_works(void)
{
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
		return false;
	return access("/proc/sys/kernel/seccomp/actions_avail", R_OK) == 0;
}

/* The sysctls that gate unprivileged user namespaces; NULL when they allow it. */
static const char *userns_sysctl_block(bool root, const char **ret_fix)
{
	long v;

	*ret_fix = NULL;
	if (read_sysctl_int("/proc/sys/user/max_user_namespaces", &v) == 0 && v <= 0) {
		*ret_fix = "sysctl user.max_user_namespaces=15000";
		return "user.max_user_namespaces is 0";
	}
	if (root)
		return NULL;
	if (read_sysctl_int("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0 && v != 1) {
		*ret_fix = "sysctl kernel.unprivileged_userns_clone=1";
		return "kernel.unprivileged_userns_clone is 0";
	}
	if (read_sysctl_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0 &&
	    v != 0) {
		*ret_fix = "sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor "
			   "profile for cordon";
		return "blocked by kernel.apparmor_restrict_unprivileged_userns=1";
	}
	return NULL;
}

/*
 * Child of the user namespace test. Writes one byte per stage to the pipe:
 * the result of each step as an errno (0 = ok), in this order: user ns,
 * mount ns, pid ns, network ns, ipc ns, and a /proc mount (what a sandbox's pid
 * namespace needs; refused where /proc has masked paths, as in containers).
 */
enum {
	T_USERNS,
	T_MNTNS,
	T_PIDNS,
	T_NETNS,
	T_IPCNS,
	T_PROC,
	T_COUNT
};

static int run_ns_test(bool use_userns, unsigned char res[T_COUNT]);

/* Could a sandbox make its user (unless root), mount and pid namespaces and its /proc? */
static bool ns_test_ok(bool use_userns)
{
	unsigned char res[T_COUNT];
	/* The test hook that makes a run's namespace setup fail fails this too. */
	if (cd_linux_test_disabled("namespace-setup") || run_ns_test(use_userns, res) < 0)
		return false;
	return (!use_userns || res[T_USERNS] == 0) && res[T_MNTNS] == 0 && res[T_PIDNS] == 0 &&
	       res[T_IPCNS] == 0 && res[T_PROC] == 0;
}

void cd_linux_probe_host(cd_probe_what what, struct cd_linux_host *ret)
{
	const char *fix;

	*ret = (struct cd_linux_host){ 0 };
	ret->is_root = geteuid() == 0 && have_cap_effective(CAP_SYS_ADMIN);
	if ((what & CD_PROBE_LANDLOCK) && !cd_linux_test_disabled("landlock"))
		ret->landlock_abi = cd_landlock_abi();
	if ((what & CD_PROBE_SECCOMP) && !cd_linux_test_disabled("seccomp"))
		ret->seccomp = seccomp_works();
	if ((what & CD_PROBE_USERNS) && !cd_linux_test_disabled("userns"))
		ret->userns = userns_sysctl_block(geteuid() == 0, &fix) == NULL;
	/*
	 * The sysctls can say yes where a container's seccomp profile or a
	 * masked /proc says no: try for real (a fork) when asked. A root that
	 * cannot is treated as an ordinary user; then the user namespace
	 * decides.
	 */
	if (what & CD_PROBE_NS_TEST) {
		if (ret->is_root && !ns_test_ok(false))
			ret->is_root = false;
		if (!ret->is_root && ret->userns && !ns_test_ok(true))
			ret->userns = false;
	}
}

/* ---- full probe ---- */

static void add_item(struct cd_probe *p, const char *name, bool ok, char *detail, const char *fix)
{
	struct cd_probe_item *it;

	p->items = cd_xreallocarray(p->items, p->n_items + 1, sizeof(*p->items));
	it = &p->items[p->n_items++];
	it->name = cd_xstrdup(name);
	it->ok = ok;
	it->detail = detail ? detail : cd_xstrdup("");
	it->fix = ok || !fix ? NULL : cd_xstrdup(fix);
}

static void add_disabled(struct cd_probe *p, const char *name)
{
	add_item(p, name, false, cd_xstrdup("disabled by CORDON_TEST_DISABLE"),
		 "unset CORDON_TEST_DISABLE");
}

static void probe_landlock(struct cd_probe *p)
{
	unsigned abi;
	int errata, r;

	if (cd_linux_test_disabled("landlock")) {
		add_disabled(p, "landlock");
		add_disabled(p, "landlock network rules");
		add_disabled(p, "landlock scopes");
		return;
	}
	r = cd_landlock_create_ruleset(NULL, 0, CD_LANDLOCK_CREATE_RULESET_VERSION);
	if (r <= 0) {
		int err = r < 0 ? errno : EINVAL;

		if (err == EOPNOTSUPP)
			add_item(p, "landlock", false,
				 cd_xstrdup("built in but not enabled (EOPNOTSUPP)"),
				 "add landlock to the lsm= kernel boot parameter, e.g. "
				 "lsm=landlock,lockdown,yama,integrity,apparmor");
		else
			add_item(p, "landlock", false,
				 cd_xasprintf("unavailable: %s", strerror(err)),
				 "a kernel >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y and "
				 "landlock "
				 "in CONFIG_LSM or lsm=");
		add_item(p, "landlock network rules", false, cd_xstrdup("no Landlock"),
			 "a kernel with Landlock ABI 4 (Linux 6.7)");
		add_item(p, "landlock scopes", false, cd_xstrdup("no Landlock"),
			 "a kernel with Landlock ABI 6 (Linux 6.12)");
		return;
	}
	abi = (unsigned)r;
	{
		unsigned used = abi > CD_LL_MAX_ABI ? CD_LL_MAX_ABI : abi;
		cleanup_free char *fs = cd_ll_fs_rights_names(cd_ll_fs_rights_for_abi(used));
		struct cd_strbuf sb = { 0 };

		cd_strbuf_printf(&sb, "ABI %u", abi);
		if (abi > CD_LL_MAX_ABI)
			cd_strbuf_printf(&sb, " (cordon uses ABI %u)", used);
		errata = cd_landlock_create_ruleset(NULL, 0, CD_LANDLOCK_CREATE_RULESET_ERRATA);
		if (errata >= 0)
			cd_strbuf_printf(&sb, ", errata 0x%x", (unsigned)errata);
		cd_strbuf_printf(&sb, " (file system rights: %s)", fs);
		add_item(p, "landlock", true, cd_strbuf_steal(&sb), NULL);

		if (abi >= 4) {
			cleanup_free char *net =
				cd_ll_net_rights_names(cd_ll_net_rights_for_abi(used));
			add_item(p, "landlock network rules", true, cd_xasprintf("rights: %s", net),
				 NULL);
		} else {
			add_item(p, "landlock network rules", false,
				 cd_xasprintf("ABI %u < 4", abi),
				 "a kernel with Landlock ABI 4 (Linux 6.7)");
		}
		if (abi >= 6) {
			cleanup_free char *sc = cd_ll_scopes_names(cd_ll_scopes_for_abi(used));
			add_item(p, "landlock scopes", true, cd_xasprintf("scopes: %s", sc), NULL);
		} else {
			add_item(p, "landlock scopes", false, cd_xasprintf("ABI %u < 6", abi),
				 "a kernel with Landlock ABI 6 (Linux 6.12)");
		}
	}
}

static void probe_seccomp(struct cd_probe *p)
{
	cleanup_free char *actions = NULL;

	if (cd_linux_test_disabled("seccomp")) {
		add_disabled(p, "seccomp");
		return;
	}
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
		add_item(p, "seccomp", false, cd_xasprintf("unavailable: %s", strerror(errno)),
			 "a kernel built with CONFIG_SECCOMP_FILTER=y");
		return;
	}
	actions = read_small_file("/proc/sys/kernel/seccomp/actions_avail");
	if (!actions) {
		add_item(p, "seccomp", false,
			 cd_xstrdup("/proc/sys/kernel/seccomp/actions_avail is not readable"),
			 "a kernel built with CONFIG_SECCOMP_FILTER=y, with /proc mounted");
		return;
	}
	add_item(p, "seccomp", true, cd_xasprintf("filter actions: %s", actions), NULL);
}

/* Write s to a /proc file; 0 or an errno value. */
static int write_map(const char *path, const char *s)
{
	size_t len = strlen(s);
	int f, r = 0;

	f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0)
		return errno;
	if (write(f, s, len) != (ssize_t)len)
		r = errno ? errno : EIO;
	close(f);
	return r;
}

static CD_NORETURN void ns_child(int wfd, bool use_userns, const char *uid_map, const char *gid_map)
{
	unsigned char res[T_COUNT];
	int f;

	memset(res, 0xff, sizeof(res));
	if (use_userns) {
		res[T_USERNS] = 0;
		if (unshare(CLONE_NEWUSER) < 0) {
			res[T_USERNS] = (unsigned char)errno;
		} else {
			f = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
			if (f >= 0) {
				if (write(f, "deny", 4) != 4)
					res[T_USERNS] = (unsigned char)(errno ? errno : EIO);
				close(f);
			}
			if (!res[T_USERNS])
				res[T_USERNS] =
					(unsigned char)write_map("/proc/self/uid_map", uid_map);
			if (!res[T_USERNS])
				res[T_USERNS] =
					(unsigned char)write_map("/proc/self/gid_map", gid_map);
		}
	}
	if (!use_userns || res[T_USERNS] == 0) {
		res[T_MNTNS] = unshare(CLONE_NEWNS) < 0 ? (unsigned char)errno : 0;
		res[T_PIDNS] = unshare(CLONE_NEWPID) < 0 ? (unsigned char)errno : 0;
		res[T_NETNS] = unshare(CLONE_NEWNET) < 0 ? (unsigned char)errno : 0;
		res[T_IPCNS] = unshare(CLONE_NEWIPC) < 0 ? (unsigned char)errno : 0;
		/* A /proc of the new pid namespace is mounted from inside it: its first child. */
		if (res[T_MNTNS] == 0 && res[T_PIDNS] == 0) {
			pid_t c = fork();
			if (c == 0)
				_exit(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
						      mount("proc", "/proc", "proc",
							    MS_NOSUID | MS_NODEV | MS_NOEXEC,
							    NULL) < 0
					      ? (errno & 0xff ? errno & 0xff : EIO)
					      : 0);
			int st = 0;
			if (c < 0)
				res[T_PROC] = (unsigned char)errno;
			else if (waitpid(c, &st, 0) != c || !WIFEXITED(st))
				res[T_PROC] = EIO;
			else
				res[T_PROC] = (unsigned char)WEXITSTATUS(st);
		}
	}
	if (write(wfd, res, sizeof(res)) != (ssize_t)sizeof(res))
		_exit(1);
	_exit(0);
}

static int run_ns_test(bool use_userns, unsigned char res[T_COUNT])
{
	char uid_map[64], gid_map[64];
	int pfd[2], status;
	ssize_t n;
	pid_t pid;

	snprintf(uid_map, sizeof(uid_map), "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(gid_map, sizeof(gid_map), "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		close(pfd[0]);
		close(pfd[1]);
		return r;
	}
	if (pid == 0) {
		close(pfd[0]);
		ns_child(pfd[1], use_userns, uid_map, gid_map);
	}
	close(pfd[1]);
	do
		n = read(pfd[0], res, T_COUNT);
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return n == T_COUNT ? 0 : -EIO;
}

static void add_ns_item(struct cd_probe *p, const char *name, unsigned char err,
			bool blocked_by_userns)
{
	if (blocked_by_userns)
		add_item(p, name, false, cd_xstrdup("not tested: user namespaces unavailable"),
			 "enable user namespaces (see above), or run as root");
	else if (err == 0)
		add_item(p, name, true, cd_xstrdup("available"), NULL);
	else
		add_item(p, name, false, cd_xasprintf("unshare failed: %s", strerror(err)),
			 err == EPERM ? "probably a seccomp filter from a container runtime: allow "
					"unshare (--security-opt seccomp=unconfined)"
				      : "a kernel with this namespace type enabled");
}

static void probe_namespaces(struct cd_probe *p)
{
	bool root = geteuid() == 0 && have_cap_effective(CAP_SYS_ADMIN);
	bool userns_disabled = cd_linux_test_disabled("userns");
	unsigned char res[T_COUNT];
	bool userns_ok = false;
	const char *fix = NULL, *block;

	if (userns_disabled) {
		add_disabled(p, "user namespaces");
	} else if (run_ns_test(true, res) < 0) {
		add_item(p, "user namespaces", false, cd_xstrdup("could not run the test child"),
			 NULL);
	} else if (res[T_USERNS] == 0) {
		userns_ok = true;
		add_item(p, "user namespaces", true, cd_xstrdup("available (tested)"), NULL);
	} else {
		block = userns_sysctl_block(geteuid() == 0, &fix);
		if (block)
			add_item(p, "user namespaces", false, cd_xstrdup(block), fix);
		else if (res[T_USERNS] == EPERM)
			add_item(p, "user namespaces", false,
				 cd_xstrdup(
					 "unshare(CLONE_NEWUSER) failed: Operation not permitted"),
				 "probably a seccomp filter from a container runtime (Docker's "
				 "default "
				 "profile): run the container with --security-opt "
				 "seccomp=unconfined "
				 "or a profile that allows unshare");
		else
			add_item(p, "user namespaces", false,
				 cd_xasprintf("unshare(CLONE_NEWUSER) failed: %s",
					      strerror(res[T_USERNS])),
				 "a kernel built with CONFIG_USER_NS=y");
	}

	/* The other namespace types: inside the user namespace, or directly as root. */
	if (userns_ok || (root && run_ns_test(false, res) == 0)) {
		add_ns_item(p, "mount namespaces", res[T_MNTNS], false);
		add_ns_item(p, "pid namespaces", res[T_PIDNS], false);
		add_ns_item(p, "network namespaces", res[T_NETNS], false);
		add_ns_item(p, "ipc namespaces", res[T_IPCNS], false);
	} else {
		add_ns_item(p, "mount namespaces", 0, true);
		add_ns_item(p, "pid namespaces", 0, true);
		add_ns_item(p, "network namespaces", 0, true);
		add_ns_item(p, "ipc namespaces", 0, true);
	}
}

/*
 * What resource limits can rest on: the cgroup v2 subtree cordon may use
 * and its controllers, and what the rlimits do and cannot do here.
 */
static void probe_limits(struct cd_probe *p)
{
	struct cd_limits_host h;
	cd_linux_probe_limits(&h);

	if (!h.cgroup) {
		add_item(p, "cgroup v2", false,
			 cd_xasprintf("no cgroup for the sandboxes: %s", h.why), h.fix);
	} else {
		add_item(p, "cgroup v2", true,
			 cd_xasprintf("the sandboxes' cgroups go in %s; cgroup.kill ends what a "
				      "sandbox leaves",
				      h.where),
			 NULL);
	}
	if (h.cgroup) {
		struct cd_strbuf have = { 0 }, lack = { 0 };
		bool told[CD_CG_COUNT] = { false };
		for (unsigned i = 0; i < CD_CG_COUNT; i++) {
			const char *name = cd_cg_controller_name(i);
			if (h.controllers & (1u << i)) {
				cd_strbuf_printf(&have, "%s%s", have.len ? " " : "", name);
				continue;
			}
			if (told[i])
				continue;
			/* The controllers missing for the same reason, named together. */
			cd_strbuf_printf(&lack, "%s%s", lack.len ? "; " : "", name);
			for (unsigned k = i + 1; k < CD_CG_COUNT; k++) {
				if (!(h.controllers & (1u << k)) &&
				    cd_streq(h.ctl_why[k], h.ctl_why[i])) {
					cd_strbuf_printf(&lack, ", %s", cd_cg_controller_name(k));
					told[k] = true;
				}
			}
			cd_strbuf_printf(&lack, ": %s", h.ctl_why[i]);
		}
		if (!lack.len)
			add_item(p, "cgroup controllers", true,
				 cd_xasprintf("%s (tasks, memory%s and CPU quota limits)", have.buf,
					      h.swap ? ", swap" : ""),
				 NULL);
		else
			add_item(p, "cgroup controllers", false,
				 cd_xasprintf("%s%s%s", have.len ? have.buf : "",
					      have.len ? "; " : "", lack.buf),
				 "boot with systemd.unified_cgroup_hierarchy=1 and delegate pids, "
				 "memory and cpu (Delegate=yes); meanwhile --allow-degraded=tasks, "
				 "memory, swap or cpu runs without what is missing");
		cd_strbuf_done(&have);
		cd_strbuf_done(&lack);
	} else {
		add_item(p, "cgroup controllers", false, cd_xstrdup("no cgroup to use (see above)"),
			 "see cgroup v2");
	}
	/* Said plainly: what the rlimits stand in for, and what they cannot do. */
	add_item(p, "rlimits", true,
		 cd_xasprintf(
			 "cpu-time, open-files, file-size and core are rlimits of each "
			 "process; without a pids controller the task limit is "
			 "RLIMIT_NPROC, which counts %s, so it bounds a sandbox only when the "
			 "sandbox has a user namespace of its own (unprivileged), never root's; "
			 "without a memory controller, only --allow-degraded=memory gives "
			 "RLIMIT_AS, each process's address space, not the sandbox's memory; "
			 "no rlimit bounds a CPU quota",
			 h.nproc_per_userns ? "per user namespace (Linux 5.14 and later)"
					    : "per user (this kernel is older than 5.14)"),
		 NULL);
}

struct cd_probe *cd_linux_probe_full(void)
{
	struct cd_probe *p = cd_xcalloc(1, sizeof(*p));
	int nnp;

	cd_linux_probe_host(CD_PROBE_ALL, &p->host);
	probe_landlock(p);
	probe_seccomp(p);
	probe_namespaces(p);

	probe_limits(p);

	nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (nnp >= 0)
		add_item(
			p, "no_new_privs", true,
			cd_xstrdup(nnp ? "supported (already set for cordon itself)" : "supported"),
			NULL);
	else
		add_item(p, "no_new_privs", false, cd_xasprintf("%s", strerror(errno)),
			 "Linux >= 3.5");
	return p;
}

struct cd_probe *cd_probe_free(struct cd_probe *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_items; i++) {
		free(p->items[i].name);
		free(p->items[i].detail);
		free(p->items[i].fix);
	}
	free(p->items);
	free(p);
	return NULL;
}

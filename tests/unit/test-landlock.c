/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * never run with CK_FORK=no: these tests restrict the test process itself
 * with Landlock, which is safe only because Check forks every test.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"

#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
#endif

static unsigned abi, host_abi;
/* Every fixture lives below this directory, removed by main() (a restricted test cannot). */
static char base[64];

struct fixture {
	char dir[96];
	char a[128], b[128], c[128], f[128], b_file[160], c_file[160];
	struct cd_ll_rule rules[4];
	struct cd_linux_plan lp;
};

static void write_file(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, "data", 4), 4);
	close(fd);
}

/* A writable, B read-only, file F read-only, /dev/null writable, C not granted. */
static void setup(struct fixture *x)
{
	uint64_t fs = cd_ll_fs_rights_for_abi(abi);

	memset(x, 0, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "%s/t-XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(x->dir));
	snprintf(x->a, sizeof(x->a), "%s/a", x->dir);
	snprintf(x->b, sizeof(x->b), "%s/b", x->dir);
	snprintf(x->c, sizeof(x->c), "%s/c", x->dir);
	snprintf(x->f, sizeof(x->f), "%s/f", x->dir);
	snprintf(x->b_file, sizeof(x->b_file), "%s/file", x->b);
	snprintf(x->c_file, sizeof(x->c_file), "%s/file", x->c);
	ck_assert_int_eq(mkdir(x->a, 0755), 0);
	ck_assert_int_eq(mkdir(x->b, 0755), 0);
	ck_assert_int_eq(mkdir(x->c, 0755), 0);
	write_file(x->f);
	write_file(x->b_file);
	write_file(x->c_file);

	x->rules[0] = (struct cd_ll_rule){ x->a, fs, true };
	x->rules[1] = (struct cd_ll_rule){ x->b, fs & CD_LL_FS_READ_RIGHTS, true };
	x->rules[2] = (struct cd_ll_rule){ x->f, fs & CD_LL_FS_READ_FILE, false };
	x->rules[3] = (struct cd_ll_rule){ "/dev/null",
					   fs & (CD_LL_FS_READ_FILE | CD_LL_FS_WRITE_FILE), false };
	x->lp = (struct cd_linux_plan){
		.sandboxed = true,
		.landlock = true,
		.landlock_abi = abi,
		.ll_handled_fs = fs,
		.ll_handled_net = cd_ll_net_rights_for_abi(abi),
		.ll_scoped = cd_ll_scopes_for_abi(abi),
		.ll_rules = x->rules,
		.n_ll_rules = 4,
	};
}

static void restrict_now(struct fixture *x)
{
	struct cd_backend_state *s = NULL;
	char *err = NULL;
	int r;

	r = cd_backend_landlock.prepare(&x->lp, &s, &err);
	ck_assert_msg(r == 0, "prepare: %d %s", r, err ? err : "");
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(cd_backend_landlock.apply(s), 0);
	cd_backend_landlock.destroy(s);
}

#define SKIP_BELOW(n)                                                                         \
	do {                                                                                  \
		if (abi < (n)) {                                                              \
			fprintf(stderr, "test-landlock: %s needs ABI %d, have %u: skipped\n", \
				__func__, (n), abi);                                          \
			return;                                                               \
		}                                                                             \
	} while (0)

static void expect_fail(int r, int want, const char *what)
{
	int e = errno;

	ck_assert_msg(r < 0 && e == want, "%s: want errno %d (%s), got %d errno %d (%s)", what,
		      want, strerror(want), r, e, strerror(e));
}

START_TEST(test_fs_rules)
{
	struct fixture x;
	char path[200];
	int fd;

	SKIP_BELOW(1);
	setup(&x);
	restrict_now(&x);

	snprintf(path, sizeof(path), "%s/new", x.a);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "write in A: %s", strerror(errno));
	close(fd);

	snprintf(path, sizeof(path), "%s/new", x.b);
	expect_fail(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644), EACCES, "create in B");
	expect_fail(open(x.b_file, O_WRONLY | O_CLOEXEC), EACCES, "write in B");
	fd = open(x.b_file, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "read in B: %s", strerror(errno));
	close(fd);

	expect_fail(open(x.c_file, O_RDONLY | O_CLOEXEC), EACCES, "read outside");
	expect_fail(open("/etc/passwd", O_RDONLY | O_CLOEXEC), EACCES, "read /etc/passwd");

	fd = open(x.f, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "read F: %s", strerror(errno));
	close(fd);
	expect_fail(open(x.f, O_WRONLY | O_CLOEXEC), EACCES, "write F");

	snprintf(path, sizeof(path), "%s/dir", x.b);
	expect_fail(mkdir(path, 0755), EACCES, "mkdir in B");

	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "write /dev/null: %s", strerror(errno));
	close(fd);
}
END_TEST

START_TEST(test_truncate)
{
	struct fixture x;

	SKIP_BELOW(3);
	setup(&x);
	restrict_now(&x);
	expect_fail(truncate(x.f, 0), EACCES, "truncate F");
}
END_TEST

START_TEST(test_refer)
{
	struct fixture x;
	char from[200], to[200];
	struct stat st;
	int r, e;

	SKIP_BELOW(2);
	setup(&x);
	snprintf(from, sizeof(from), "%s/moving", x.a);
	snprintf(to, sizeof(to), "%s/moving", x.b);
	write_file(from);
	restrict_now(&x);
	r = rename(from, to);
	e = errno;
	ck_assert_msg(r < 0 && (e == EXDEV || e == EACCES), "rename A->B: %d %s", r, strerror(e));
	ck_assert_int_eq(stat(from, &st), 0);
}
END_TEST

START_TEST(test_tcp_connect)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct fixture x;
	int l, c;

	SKIP_BELOW(4);
	setup(&x);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	restrict_now(&x);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(c, 0);
	expect_fail(connect(c, (struct sockaddr *)&sa, sizeof(sa)), EACCES, "tcp connect");
}
END_TEST

START_TEST(test_scope_signal)
{
	struct fixture x;

	SKIP_BELOW(6);
	setup(&x);
	ck_assert_int_eq(kill(getppid(), 0), 0);
	restrict_now(&x);
	expect_fail(kill(getppid(), 0), EPERM, "kill parent");
	/* Our own domain is still reachable. */
	ck_assert_int_eq(kill(getpid(), 0), 0);
}
END_TEST

START_TEST(test_scope_abstract_unix)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	struct fixture x;
	int l, c;

	SKIP_BELOW(6);
	setup(&x);
	/* Abstract name: leading NUL. */
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "cordon-test-%d", (int)getpid());
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1));
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, len), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	restrict_now(&x);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(c, 0);
	expect_fail(connect(c, (struct sockaddr *)&sa, len), EPERM, "abstract unix connect");
}
END_TEST

START_TEST(test_vanished_path)
{
	struct cd_backend_state *s = NULL;
	char *err = NULL;
	struct fixture x;

	SKIP_BELOW(1);
	setup(&x);
	ck_assert_int_eq(rmdir(x.a), 0);
	ck_assert_int_lt(cd_backend_landlock.prepare(&x.lp, &s, &err), 0);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "landlock: cannot open") && strstr(err, x.a), "%s", err);
	free(err);
}
END_TEST

START_TEST(test_changed_type)
{
	struct cd_backend_state *s = NULL;
	char *err = NULL;
	struct fixture x;

	SKIP_BELOW(1);
	setup(&x);
	/* F becomes a symlink to a directory after binding. */
	ck_assert_int_eq(unlink(x.f), 0);
	ck_assert_int_eq(symlink(x.c, x.f), 0);
	ck_assert_int_lt(cd_backend_landlock.prepare(&x.lp, &s, &err), 0);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(err);
	free(err);
}
END_TEST

START_TEST(test_disabled_is_noop)
{
	struct cd_linux_plan lp = { .sandboxed = true, .landlock = false };
	struct cd_backend_state *s = NULL;
	char *err = NULL;
	int fd;

	ck_assert_int_eq(cd_backend_landlock.prepare(&lp, &s, &err), 0);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(cd_backend_landlock.apply(s), 0);
	cd_backend_landlock.destroy(s);
	fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
}
END_TEST

START_TEST(test_probe_host)
{
	struct cd_linux_host h;

	cd_linux_probe_host(CD_PROBE_ALL, &h);
	ck_assert_uint_eq(h.landlock_abi, host_abi);
	setenv("CORDON_TEST_DISABLE", "seccomp,landlock", 1);
	cd_linux_probe_host(CD_PROBE_ALL, &h);
	ck_assert_uint_eq(h.landlock_abi, 0);
	ck_assert(!h.seccomp);
	setenv("CORDON_TEST_DISABLE", "landlockx,xseccomp", 1);
	cd_linux_probe_host(CD_PROBE_ALL, &h);
	ck_assert_uint_eq(h.landlock_abi, host_abi);
	unsetenv("CORDON_TEST_DISABLE");
}
END_TEST

static const struct cd_probe_item missing_item;

static const struct cd_probe_item *find_item(const struct cd_probe *p, const char *name)
{
	for (size_t i = 0; i < p->n_items; i++)
		if (cd_streq(p->items[i].name, name))
			return &p->items[i];
	ck_abort_msg("probe item %s missing", name);
	return &missing_item;
}

START_TEST(test_probe_full)
{
	static const char *const names[] = {
		"landlock",	  "landlock network rules", "landlock scopes",
		"seccomp",	  "user namespaces",	    "mount namespaces",
		"pid namespaces", "network namespaces",	    "cgroup v2",
		"no_new_privs",
	};
	struct cd_probe *p = cd_linux_probe_full();
	const struct cd_probe_item *it;

	for (size_t i = 0; i < CD_ARRAY_SIZE(names); i++) {
		it = find_item(p, names[i]);
		ck_assert_ptr_nonnull(it->detail);
		ck_assert(it->ok || it->fix);
	}
	it = find_item(p, "landlock");
	ck_assert(it->ok == (abi > 0));
	it = find_item(p, "seccomp");
	ck_assert(it->ok);
	ck_assert_ptr_nonnull(strstr(it->detail, "errno"));
	cd_probe_free(p);

	setenv("CORDON_TEST_DISABLE", "userns,landlock", 1);
	p = cd_linux_probe_full();
	it = find_item(p, "user namespaces");
	ck_assert(!it->ok);
	ck_assert_ptr_nonnull(strstr(it->detail, "CORDON_TEST_DISABLE"));
	ck_assert(!find_item(p, "landlock")->ok);
	ck_assert(!p->host.userns);
	cd_probe_free(p);
	unsetenv("CORDON_TEST_DISABLE");
}
END_TEST

static Suite *landlock_suite(void)
{
	Suite *s = suite_create("landlock");
	TCase *tc = tcase_create("landlock");

	tcase_add_test(tc, test_fs_rules);
	tcase_add_test(tc, test_truncate);
	tcase_add_test(tc, test_refer);
	tcase_add_test(tc, test_tcp_connect);
	tcase_add_test(tc, test_scope_signal);
	tcase_add_test(tc, test_scope_abstract_unix);
	tcase_add_test(tc, test_vanished_path);
	tcase_add_test(tc, test_changed_type);
	tcase_add_test(tc, test_disabled_is_noop);
	suite_add_tcase(s, tc);

	tc = tcase_create("probe");
	tcase_add_test(tc, test_probe_host);
	tcase_add_test(tc, test_probe_full);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	host_abi = abi = cd_landlock_abi();
	if (abi == 0)
		fprintf(stderr, "test-landlock: Landlock unavailable, restriction tests skipped\n");
	if (abi > CD_LL_MAX_ABI)
		abi = CD_LL_MAX_ABI;
	snprintf(base, sizeof(base), "/tmp/cordon-ll-XXXXXX");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	sr = srunner_create(landlock_suite());
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	{
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd) != 0)
			fprintf(stderr, "test-landlock: could not remove %s\n", base);
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

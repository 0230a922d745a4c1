/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for src/serve/fs-ops.c: the request wire between the server
 * and cordon-fs-helper, and the check of the helper's answers (the helper
 * runs in the sandbox: what it sends back is not trusted).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/fs-ops.h"
#include "serve/server.h"
#include "shared/fd-util.h"

static struct cd_fs_res res(int code, const char *text, int fd)
{
	struct cd_fs_res r = { .code = code, .fd = fd };
	if (text)
		cd_strbuf_append(&r.out, text);
	return r;
}

START_TEST(test_flaw_results)
{
	struct cd_fs_req meta = { .op = CD_FS_METADATA };
	struct cd_fs_res r = res(0, "{\"isFile\":true}", -1);
	ck_assert_ptr_null(cd_fs_res_flaw(&meta, &r));
	cd_strbuf_done(&r.out);
	/* A second JSON line smuggled into the client's stream. */
	r = res(0, "{}\n{\"method\":\"process/output\",\"params\":{}}", -1);
	ck_assert_str_eq(cd_fs_res_flaw(&meta, &r), "not one line");
	cd_strbuf_done(&r.out);
	r = res(0, "{},\"id\":7", -1);
	ck_assert_str_eq(cd_fs_res_flaw(&meta, &r), "not a JSON object");
	cd_strbuf_done(&r.out);
	r = res(0, "[1]", -1);
	ck_assert_str_eq(cd_fs_res_flaw(&meta, &r), "not a JSON object");
	cd_strbuf_done(&r.out);
	r = res(0, "", -1);
	ck_assert_str_eq(cd_fs_res_flaw(&meta, &r), "not one line");
	cd_strbuf_done(&r.out);
	/* Errors: known codes only; their text is escaped when written. */
	r = res(CD_RPC_NOT_FOUND, "No such file\n{\"forged\":1}", -1);
	ck_assert_ptr_null(cd_fs_res_flaw(&meta, &r));
	cd_strbuf_done(&r.out);
	r = res(-32010, "x", -1);
	ck_assert_str_eq(cd_fs_res_flaw(&meta, &r), "an unknown error code");
	cd_strbuf_done(&r.out);
}
END_TEST

START_TEST(test_flaw_descriptors)
{
	struct cd_fs_req read = { .op = CD_FS_READ_FILE }, open_ = { .op = CD_FS_OPEN };
	struct cd_fs_req meta = { .op = CD_FS_METADATA };
	char path[] = "/tmp/cordon-test-fs-ops-XXXXXX";
	int f = mkstemp(path);
	ck_assert_int_ge(f, 0);
	unlink(path);
	int ro = open("/dev/null", O_RDONLY);
	int reg_ro = -1;
	char fdp[64];
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", f);
	reg_ro = open(fdp, O_RDONLY);
	ck_assert_int_ge(reg_ro, 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);

	struct cd_fs_res r = res(0, NULL, reg_ro);
	ck_assert_ptr_null(cd_fs_res_flaw(&read, &r));
	ck_assert_ptr_null(cd_fs_res_flaw(&open_, &r));
	/* Not asked for one. */
	ck_assert_str_eq(cd_fs_res_flaw(&meta, &r), "a descriptor it was not asked for");
	/* A read that blocks forever, a device, a file open for writing. */
	r = res(0, NULL, p[0]);
	ck_assert_ptr_nonnull(cd_fs_res_flaw(&read, &r));
	r = res(0, NULL, ro);
	ck_assert_ptr_nonnull(cd_fs_res_flaw(&read, &r));
	r = res(0, NULL, f); /* mkstemp: O_RDWR */
	ck_assert_ptr_nonnull(cd_fs_res_flaw(&read, &r));
	r = res(0, NULL, -1);
	ck_assert_str_eq(cd_fs_res_flaw(&read, &r), "a read without its file");
	/* fs/open "replace": a regular file open for writing only, nothing else. */
	struct cd_fs_req wopen = { .op = CD_FS_OPEN_WRITE };
	int reg_wo = open(fdp, O_WRONLY);
	ck_assert_int_ge(reg_wo, 0);
	r = res(0, NULL, reg_wo);
	ck_assert_ptr_null(cd_fs_res_flaw(&wopen, &r));
	ck_assert_str_eq(cd_fs_res_flaw(&read, &r),
			 "a descriptor that is not a regular file open for reading");
	r = res(0, NULL, reg_ro);
	ck_assert_str_eq(cd_fs_res_flaw(&wopen, &r),
			 "a descriptor that is not a regular file open for writing");
	r = res(0, NULL, f); /* O_RDWR: the server could read what a sandbox may only write */
	ck_assert_ptr_nonnull(cd_fs_res_flaw(&wopen, &r));
	r = res(0, NULL, p[1]);
	ck_assert_ptr_nonnull(cd_fs_res_flaw(&wopen, &r));
	close(reg_wo);
	close(p[0]);
	close(p[1]);
	close(ro);
	close(reg_ro);
	close(f);
}
END_TEST

START_TEST(test_req_wire)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	unsigned char data[] = { 0, 1, 2, '\n' };
	struct cd_fs_req q = {
		.op = CD_FS_COPY,
		.path = (char *)"/a b",
		.dest = (char *)"/c",
		.data = data,
		.data_len = sizeof(data),
		.recursive = true,
		.walk = { .max_depth = 3, .follow = true },
	};
	ck_assert_int_eq(cd_fs_req_send(sv[0], &q), 0);
	struct cd_fs_req got;
	ck_assert_int_eq(cd_fs_req_recv(sv[1], &got), 0);
	ck_assert_int_eq(got.op, CD_FS_COPY);
	ck_assert_str_eq(got.path, "/a b");
	ck_assert_str_eq(got.dest, "/c");
	ck_assert_uint_eq(got.data_len, sizeof(data));
	ck_assert_mem_eq(got.data, data, sizeof(data));
	ck_assert(got.recursive && !got.force && got.walk.follow && got.walk.max_depth == 3);
	cd_fs_req_done(&got);
	/* Garbage is refused, not believed. */
	char junk[64];
	memset(junk, 'x', sizeof(junk));
	ck_assert_int_eq(write(sv[0], junk, sizeof(junk)), (ssize_t)sizeof(junk));
	ck_assert_int_eq(cd_fs_req_recv(sv[1], &got), -EPROTO);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* IN_OPEN events queued on fd (non-blocking inotify) since the last call. */
static int opens_seen(int in)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int n = 0;
	ssize_t len;
	while ((len = read(in, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *e = (const struct inotify_event *)p;
			n += (e->mask & IN_OPEN) != 0;
			p += sizeof(*e) + e->len;
		}
	return n;
}

/*
 * cd_open_regular opens a regular file, and never opens anything else: a
 * FIFO (or a device) at the path is looked at only. The kernel tells each
 * open to inotify (IN_OPEN) when it happens, and an O_PATH handle is no
 * open of the file.
 */
START_TEST(test_open_regular)
{
	char dir[] = "/tmp/cordon-openreg.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char fifo[128], file[128], link[128];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	int w = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(w, 0);
	ck_assert_int_eq(write(w, "abc", 3), 3);
	close(w);
	ck_assert_int_eq(symlink("file", link), 0);
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(inotify_add_watch(in, fifo, IN_OPEN), 0);
	ck_assert_int_ge(inotify_add_watch(in, file, IN_OPEN), 0);

	struct stat st;
	ck_assert_int_eq(cd_open_regular(fifo, &st), -EINVAL);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_int_eq(opens_seen(in), 0);
	/* The watch sees opens: a plain one of the FIFO is one. */
	int f = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(f, 0);
	close(f);
	ck_assert_int_eq(opens_seen(in), 1);

	ck_assert_int_eq(cd_open_regular(dir, &st), -EINVAL);
	ck_assert(S_ISDIR(st.st_mode));
	int fd = cd_open_regular(link, &st);
	ck_assert_int_ge(fd, 0);
	ck_assert(S_ISREG(st.st_mode) && st.st_size == 3);
	char got[4] = { 0 };
	ck_assert_int_eq(read(fd, got, sizeof(got)), 3);
	ck_assert_str_eq(got, "abc");
	ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	ck_assert_int_eq(opens_seen(in), 1);
	snprintf(file, sizeof(file), "%s/none", dir);
	ck_assert_int_eq(cd_open_regular(file, &st), -ENOENT);

	close(in);
	unlink(fifo);
	unlink(link);
	snprintf(file, sizeof(file), "%s/file", dir);
	unlink(file);
	rmdir(dir);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fs-ops");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_flaw_results);
	tcase_add_test(tc, test_flaw_descriptors);
	tcase_add_test(tc, test_req_wire);
	tcase_add_test(tc, test_open_regular);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

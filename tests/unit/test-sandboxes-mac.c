/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * src/serve/sandboxes-mac.c (sandboxes.h on macOS), on Linux: this file
 * stands in for macOS's sandbox_check, and SO_PEERCRED gives the pid that
 * LOCAL_PEERPID gives there.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "serve/sandboxes.h"

/* The stand-in: what it answers, and what it was asked. */
static int check_answer, check_errno, check_calls;
static pid_t check_pid;
static const char *check_operation = "unset";

int sandbox_check(pid_t pid, const char *operation, int type, ...);
int sandbox_check(pid_t pid, const char *operation, int type, ...)
{
	(void)type;
	check_calls++;
	check_pid = pid;
	check_operation = operation;
	if (check_answer < 0)
		errno = check_errno;
	return check_answer;
}

static enum cd_peer_verdict judge_pair(char *why, size_t size)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	enum cd_peer_verdict v = cd_sandboxes_judge_unix(sv[0], why, size);
	close(sv[0]);
	close(sv[1]);
	return v;
}

START_TEST(test_unix_verdicts)
{
	char why[256], want[160];
	/*
	 * Not sandboxed: undecided all the same (LOCAL_PEERPID names the
	 * socket's last user, not its holders).
	 */
	check_answer = 0;
	ck_assert_int_eq(judge_pair(why, sizeof(why)), CD_PEER_UNDECIDED);
	/* Asked about the process at the other end, for any operation. */
	ck_assert_int_eq(check_pid, getpid());
	ck_assert_ptr_null(check_operation);
	snprintf(want, sizeof(want),
		 "this host names only the last process to use a client's socket (%d, not "
		 "sandboxed), not every process that holds it",
		 (int)getpid());
	ck_assert_str_eq(why, want);

	check_answer = 1;
	ck_assert_int_eq(judge_pair(why, sizeof(why)), CD_PEER_SANDBOXED);
	snprintf(want, sizeof(want),
		 "process %d, the last to use its socket, is in a sandbox (Seatbelt)",
		 (int)getpid());
	ck_assert_str_eq(why, want);

	check_answer = -1;
	check_errno = EPERM;
	ck_assert_int_eq(judge_pair(why, sizeof(why)), CD_PEER_UNDECIDED);
	ck_assert_ptr_nonnull(strstr(why, "cannot be told: Operation not permitted"));
}
END_TEST

/* No credentials (not a socket): undecided, and sandbox_check is not asked. */
START_TEST(test_unix_no_credentials)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	check_calls = 0;
	char why[256];
	ck_assert_int_eq(cd_sandboxes_judge_unix(p[0], why, sizeof(why)), CD_PEER_UNDECIDED);
	ck_assert_ptr_nonnull(strstr(why, "the client's credentials cannot be read"));
	ck_assert_int_eq(check_calls, 0);
	close(p[0]);
	close(p[1]);
}
END_TEST

/*
 * TCP clients are undecided once the server has started any process, even
 * an unsandboxed one, and for good: the registry is not told of Seatbelt
 * sandboxes, and what a child leaves behind is not contained.
 */
START_TEST(test_tcp_exposure)
{
	char why[400];
	ck_assert(!cd_sandboxes_tcp_exposed());
	ck_assert_int_eq(cd_sandboxes_judge_tcp(1, why, sizeof(why)), CD_PEER_OUTSIDE);
	ck_assert_str_eq(why, "");
	struct cd_sandbox_entry *plain = cd_sandboxes_add(10, false, false, false);
	ck_assert(cd_sandboxes_tcp_exposed());

	struct cd_tcp_client a = { .inode = 1 }, b = { .inode = 2 };
	struct cd_tcp_client *both[] = { &a, &b };
	cd_sandboxes_judge_tcp_many(both, 2, NULL);
	ck_assert_int_eq(a.verdict, CD_PEER_UNDECIDED);
	ck_assert_int_eq(b.verdict, CD_PEER_UNDECIDED);
	ck_assert_ptr_nonnull(strstr(a.why, "cannot tell which process holds"));

	ck_assert_ptr_null(cd_sandboxes_remove(plain));
	ck_assert(cd_sandboxes_tcp_exposed());
	ck_assert_int_eq(cd_sandboxes_judge_tcp(3, why, sizeof(why)), CD_PEER_UNDECIDED);
	ck_assert_ptr_null(cd_sandboxes_remove(NULL));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sandboxes-mac");
	TCase *tc = tcase_create("judge");
	tcase_add_test(tc, test_unix_verdicts);
	tcase_add_test(tc, test_unix_no_credentials);
	tcase_add_test(tc, test_tcp_exposure);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

# Tests: Check unit suites and TAP integration scripts, all through tap-driver.sh.
TEST_EXTENSIONS = .sh
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	CORDON=$(abs_top_builddir)/cordon$(EXEEXT); \
	CD_POLICYDIR=$(abs_top_srcdir)/policies; \
	CD_TEST_HELPERS=$(abs_top_builddir)/tests/helpers; \
	CD_SRCDIR=$(abs_top_srcdir); CD_BUILDDIR=$(abs_top_builddir); \
	MANDOC=$(MANDOC); \
	CK_TAP_LOG_FILE_NAME=-; CK_VERBOSITY=silent; CK_DEFAULT_TIMEOUT=30; \
	export CORDON CD_POLICYDIR CD_TEST_HELPERS CD_SRCDIR CD_BUILDDIR MANDOC \
		CK_TAP_LOG_FILE_NAME CK_VERBOSITY CK_DEFAULT_TIMEOUT;

EXTRA_DIST += tests/lib/libtest.sh tests/data

if HAVE_CHECK
UNIT_TESTS = \
	tests/unit/test-util \
	tests/unit/test-json \
	tests/unit/test-pathuri \
	tests/unit/test-profile \
	tests/unit/test-plan \
	tests/unit/test-linux-plan
if OS_LINUX
UNIT_TESTS += tests/unit/test-landlock tests/unit/test-seccomp
endif
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
UNIT_LIBS = $(SANDBOX_LIBS) $(CHECK_LIBS)
tests_unit_test_util_SOURCES = tests/unit/test-util.c tests/unit/unit.h
tests_unit_test_util_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_util_LDADD = $(UNIT_LIBS)
tests_unit_test_json_SOURCES = tests/unit/test-json.c tests/unit/unit.h
tests_unit_test_json_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_json_LDADD = $(UNIT_LIBS)
tests_unit_test_pathuri_SOURCES = tests/unit/test-pathuri.c tests/unit/unit.h
tests_unit_test_pathuri_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_pathuri_LDADD = $(UNIT_LIBS)
tests_unit_test_profile_SOURCES = tests/unit/test-profile.c tests/unit/unit.h
tests_unit_test_profile_CFLAGS = $(UNIT_CFLAGS) -DCD_TEST_POLICYDIR='"$(abs_top_srcdir)/policies"'
tests_unit_test_profile_LDADD = $(UNIT_LIBS)
tests_unit_test_plan_SOURCES = tests/unit/test-plan.c tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_plan_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_plan_LDADD = $(UNIT_LIBS)
tests_unit_test_linux_plan_SOURCES = tests/unit/test-linux-plan.c tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_linux_plan_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_linux_plan_LDADD = $(UNIT_LIBS)
tests_unit_test_landlock_SOURCES = tests/unit/test-landlock.c tests/unit/unit.h
tests_unit_test_landlock_CFLAGS = $(UNIT_CFLAGS) $(SECCOMP_CFLAGS)
tests_unit_test_landlock_LDADD = $(UNIT_LIBS)
tests_unit_test_seccomp_SOURCES = tests/unit/test-seccomp.c tests/unit/unit.h
tests_unit_test_seccomp_CFLAGS = $(UNIT_CFLAGS) $(SECCOMP_CFLAGS)
tests_unit_test_seccomp_LDADD = $(UNIT_LIBS)
endif

# Helper programs run inside the sandbox by the integration tests.
check_PROGRAMS += tests/helpers/try-syscall
tests_helpers_try_syscall_SOURCES = tests/helpers/try-syscall.c

INTEGRATION_TESTS = \
	tests/integration/cli.sh \
	tests/integration/check.sh \
	tests/integration/explain.sh \
	tests/integration/run-workspace-write.sh \
	tests/integration/run-profiles.sh \
	tests/integration/refusals.sh \
	tests/integration/unprivileged.sh \
	tests/integration/man.sh
if WITH_JANSSON
TESTS += $(INTEGRATION_TESTS)
endif
EXTRA_DIST += $(INTEGRATION_TESTS)

valgrind:
	$(MAKE) check-TESTS TESTS="$(UNIT_TESTS)" LOG_COMPILER="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite"
.PHONY: valgrind

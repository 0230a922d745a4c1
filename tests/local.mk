# Tests: Check unit suites and TAP integration scripts, all through tap-driver.sh.
TEST_EXTENSIONS = .sh .py
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)
PY_LOG_DRIVER = $(LOG_DRIVER)
PY_LOG_COMPILER = env PYTHONDONTWRITEBYTECODE=1 python3
AM_TESTS_ENVIRONMENT = \
	CORDON=$(abs_top_builddir)/cordon$(EXEEXT); \
	CD_POLICYDIR=$(abs_top_srcdir)/policies; \
	CD_TEST_HELPERS=$(abs_top_builddir)/tests/helpers; \
	CD_SRCDIR=$(abs_top_srcdir); CD_BUILDDIR=$(abs_top_builddir); \
	MANDOC=$(MANDOC); SYSTEMD_ANALYZE=$(SYSTEMD_ANALYZE); \
	MINGW_CC=$(MINGW_CC); WINE=$(WINE); \
	CK_TAP_LOG_FILE_NAME=-; CK_VERBOSITY=silent; CK_DEFAULT_TIMEOUT=30; \
	export CORDON CD_POLICYDIR CD_TEST_HELPERS CD_SRCDIR CD_BUILDDIR MANDOC SYSTEMD_ANALYZE \
	MINGW_CC WINE \
		CK_TAP_LOG_FILE_NAME CK_VERBOSITY CK_DEFAULT_TIMEOUT;

EXTRA_DIST += tests/lib/libtest.sh tests/data

if HAVE_CHECK
UNIT_TESTS = \
	tests/unit/test-util \
	tests/unit/test-json \
	tests/unit/test-toml \
	tests/unit/test-skillmd \
	tests/unit/test-plugincache \
	tests/unit/test-pathuri \
	tests/unit/test-profile \
	tests/unit/test-plan \
	tests/unit/test-glob \
	tests/unit/test-gitindex \
	tests/unit/test-linux-plan \
	tests/unit/test-seatbelt \
	tests/unit/test-windows \
	tests/unit/test-limits \
	tests/unit/test-netpolicy \
	tests/unit/test-socks5
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
tests_unit_test_toml_SOURCES = tests/unit/test-toml.c tests/unit/unit.h
tests_unit_test_toml_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_toml_LDADD = $(UNIT_LIBS)
tests_unit_test_skillmd_SOURCES = tests/unit/test-skillmd.c tests/unit/unit.h
tests_unit_test_skillmd_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_skillmd_LDADD = $(UNIT_LIBS)
tests_unit_test_plugincache_SOURCES = tests/unit/test-plugincache.c tests/unit/unit.h
tests_unit_test_plugincache_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_plugincache_LDADD = $(UNIT_LIBS)
tests_unit_test_pathuri_SOURCES = tests/unit/test-pathuri.c tests/unit/unit.h
tests_unit_test_pathuri_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_pathuri_LDADD = $(UNIT_LIBS)
tests_unit_test_profile_SOURCES = tests/unit/test-profile.c tests/unit/unit.h
tests_unit_test_profile_CFLAGS = $(UNIT_CFLAGS) -DCD_TEST_POLICYDIR='"$(abs_top_srcdir)/policies"'
tests_unit_test_profile_LDADD = $(UNIT_LIBS)
tests_unit_test_plan_SOURCES = tests/unit/test-plan.c tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_plan_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_plan_LDADD = $(UNIT_LIBS)
tests_unit_test_glob_SOURCES = tests/unit/test-glob.c tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_glob_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_glob_LDADD = $(UNIT_LIBS)
tests_unit_test_gitindex_SOURCES = tests/unit/test-gitindex.c tests/unit/unit.h
tests_unit_test_gitindex_CFLAGS = $(UNIT_CFLAGS) -DCD_TEST_DATADIR='"$(abs_top_srcdir)/tests/data"'
tests_unit_test_gitindex_LDADD = $(UNIT_LIBS)
tests_unit_test_linux_plan_SOURCES = tests/unit/test-linux-plan.c tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_linux_plan_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_linux_plan_LDADD = $(UNIT_LIBS)
tests_unit_test_seatbelt_SOURCES = tests/unit/test-seatbelt.c tests/unit/sbpl-eval.c tests/unit/sbpl-eval.h tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_seatbelt_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_seatbelt_LDADD = $(UNIT_LIBS)
tests_unit_test_windows_SOURCES = tests/unit/test-windows.c tests/unit/unit.h tests/unit/fakefs.c tests/unit/fakefs.h
tests_unit_test_windows_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_windows_LDADD = $(UNIT_LIBS)
tests_unit_test_limits_SOURCES = tests/unit/test-limits.c tests/unit/unit.h
tests_unit_test_limits_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_limits_LDADD = $(UNIT_LIBS)
tests_unit_test_netpolicy_SOURCES = tests/unit/test-netpolicy.c tests/unit/unit.h
tests_unit_test_netpolicy_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_netpolicy_LDADD = $(UNIT_LIBS)
tests_unit_test_socks5_SOURCES = tests/unit/test-socks5.c tests/unit/unit.h
tests_unit_test_socks5_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_socks5_LDADD = $(UNIT_LIBS)
tests_unit_test_landlock_SOURCES = tests/unit/test-landlock.c tests/unit/unit.h
tests_unit_test_landlock_CFLAGS = $(UNIT_CFLAGS) $(SECCOMP_CFLAGS)
tests_unit_test_landlock_LDADD = $(UNIT_LIBS)
tests_unit_test_seccomp_SOURCES = tests/unit/test-seccomp.c tests/unit/unit.h
tests_unit_test_seccomp_CFLAGS = $(UNIT_CFLAGS) $(SECCOMP_CFLAGS)
tests_unit_test_seccomp_LDADD = $(UNIT_LIBS)
# ---- serve engine unit tests (s2): loop, proc, base64 ----
UNIT_TESTS += tests/unit/test-base64 tests/unit/test-loop tests/unit/test-proc
tests_unit_test_base64_SOURCES = tests/unit/test-base64.c tests/unit/unit.h src/serve/base64.c \
	src/serve/proc.h src/spawn.c src/spawn-common.c src/init/init.c src/shared/log.c src/shared/fd-util.c
tests_unit_test_base64_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_base64_LDADD = $(UNIT_LIBS)
tests_unit_test_loop_SOURCES = tests/unit/test-loop.c tests/unit/unit.h src/serve/loop.c \
	src/serve/loop.h src/spawn.c src/spawn-common.c src/init/init.c src/shared/log.c src/shared/fd-util.c
tests_unit_test_loop_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_loop_LDADD = $(UNIT_LIBS)
tests_unit_test_proc_SOURCES = tests/unit/test-proc.c tests/unit/unit.h src/serve/proc.c \
	src/serve/proc.h src/serve/loop.c src/serve/loop.h src/serve/base64.c src/spawn.c src/spawn-common.c src/init/init.c \
	src/serve/sandboxes.c src/serve/sandboxes.h src/serve/budget.c src/serve/budget.h \
	src/serve/metrics.c src/serve/metrics.h src/shared/log.c src/shared/fd-util.c
tests_unit_test_proc_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_proc_LDADD = $(UNIT_LIBS)
# spawn.h's contract against both implementations (tests/unit/test-spawn.c),
# the serve engine's process suite over the one macOS runs, and the peer
# judgement macOS has (sandboxes-mac.c, its sandbox_check stood in for).
if OS_LINUX
UNIT_TESTS += tests/unit/test-spawn tests/unit/test-spawn-posix tests/unit/test-proc-posix
UNIT_TESTS += tests/unit/test-sandboxes-mac
tests_unit_test_sandboxes_mac_SOURCES = tests/unit/test-sandboxes-mac.c \
	src/serve/sandboxes-mac.c src/shared/fd-util.c
tests_unit_test_sandboxes_mac_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_sandboxes_mac_LDADD = $(UNIT_LIBS)
tests_unit_test_spawn_SOURCES = tests/unit/test-spawn.c src/spawn.c src/spawn-common.c \
	src/program.c src/init/init.c src/shared/log.c src/shared/fd-util.c
tests_unit_test_spawn_CFLAGS = $(UNIT_CFLAGS) -DCD_TEST_SUFFIX='""'
tests_unit_test_spawn_LDADD = $(UNIT_LIBS)
tests_unit_test_spawn_posix_SOURCES = tests/unit/test-spawn.c src/spawn-posix.c \
	src/spawn-common.c src/program.c src/shared/log.c src/shared/fd-util.c
tests_unit_test_spawn_posix_CFLAGS = $(UNIT_CFLAGS) -DCD_TEST_SPAWN_POSIX \
	-DCD_TEST_SUFFIX='"-posix"'
tests_unit_test_spawn_posix_LDADD = $(UNIT_LIBS)
tests_unit_test_spawn_posix_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=fork
tests_unit_test_proc_posix_SOURCES = tests/unit/test-proc.c src/serve/proc.c \
	src/serve/loop.c src/serve/base64.c src/spawn-posix.c src/spawn-common.c \
	src/serve/sandboxes.c src/serve/budget.c src/serve/metrics.c src/shared/log.c \
	src/shared/fd-util.c
tests_unit_test_proc_posix_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_proc_posix_LDADD = $(UNIT_LIBS)
endif
# ---- end of the serve engine unit tests ----
# ---- serve server unit tests (s1): env policy, params getters ----
UNIT_TESTS += tests/unit/test-serve
tests_unit_test_serve_SOURCES = tests/unit/test-serve.c src/serve/intent.c src/serve/intent.h \
	src/cli-policy.c src/os-backend.c src/profile-lookup.c src/cli-util.c src/shared/log.c src/shared/fd-util.c
nodist_tests_unit_test_serve_SOURCES = src/builtin-profiles.c
tests_unit_test_serve_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_serve_LDADD = $(UNIT_LIBS)
UNIT_TESTS += tests/unit/test-fs-ops
tests_unit_test_fs_ops_SOURCES = tests/unit/test-fs-ops.c src/serve/fs-ops.c src/serve/fs-ops.h \
	src/serve/discover-scan.c src/serve/discover-scan.h \
	src/shared/fd-util.c
tests_unit_test_fs_ops_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_fs_ops_LDADD = $(UNIT_LIBS)
# ---- end of the serve server unit tests ----
endif

# Helper programs run inside the sandbox by the integration tests.
check_PROGRAMS += tests/helpers/try-syscall
tests_helpers_try_syscall_SOURCES = tests/helpers/try-syscall.c
# The escape suite's probe (tests/escape/escape.sh runs it in the sandbox).
check_PROGRAMS += tests/escape/escape-probe
tests_escape_escape_probe_SOURCES = tests/escape/escape-probe.c src/shared/fd-util.c
tests_escape_escape_probe_LDADD = libcdcore.a

INTEGRATION_TESTS = \
	tests/integration/cli.sh \
	tests/integration/check.sh \
	tests/integration/builtin-profiles.sh \
	tests/integration/completion.sh \
	tests/integration/explain.sh \
	tests/integration/explain-backends.sh \
	tests/integration/explain-golden.py \
	tests/integration/seatbelt-standin.py \
	tests/integration/macos-frontend.py \
	tests/integration/windows-wine.sh \
	tests/integration/run-workspace-write.sh \
	tests/integration/run-profiles.sh \
	tests/integration/run-mask-race.sh \
	tests/integration/run-git-index.sh \
	tests/integration/run-terminal.py \
	tests/integration/run-limits.py \
	tests/integration/run-managed-net.py \
	tests/integration/run-own-proxy.py \
	tests/integration/run-socks.py \
	tests/integration/run-proxy-confine.py \
	tests/integration/cgroup-limits.sh \
	tests/integration/refusals.sh \
	tests/integration/unprivileged.sh \
	tests/integration/man.sh \
	tests/integration/man-options.py \
	tests/integration/docs.sh \
	tests/integration/proxy.py \
	tests/integration/systemd-units.sh \
	tests/escape/escape.sh \
	tests/escape/git-metadata.sh
# The Linux programs' (macOS builds its own: check-darwin-serve, src/mac/local.mk).
if OS_LINUX
if WITH_JANSSON
TESTS += $(INTEGRATION_TESTS)
endif
endif
EXTRA_DIST += $(INTEGRATION_TESTS) tests/integration/macos-serve.py

valgrind:
	$(MAKE) check-TESTS TESTS="$(UNIT_TESTS)" LOG_COMPILER="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite"
.PHONY: valgrind

# ---- serve integration tests (s3): the JSON-RPC server driven over stdio ----
# Python 3 (standard library only) TAP scripts; tests/lib/rpcclient.py is their client
# (tests/lib/netclient.py over WebSocket and unix sockets).
SERVE_TESTS = \
	tests/integration/serve-handshake.py \
	tests/integration/serve-discover.py \
	tests/integration/serve-discover-v2.py \
	tests/integration/serve-envconfig.py \
	tests/integration/serve-framing.py \
	tests/integration/serve-process.py \
	tests/integration/serve-sandbox.py \
	tests/integration/serve-managed-route.py \
	tests/integration/serve-netproxy.py \
	tests/integration/serve-isolation.py \
	tests/integration/serve-fs.py \
	tests/integration/serve-fs-async.py \
	tests/integration/serve-fs-readfile.py \
	tests/integration/serve-fs-write-stream.py \
	tests/integration/serve-net.py \
	tests/integration/serve-loopback.py \
	tests/integration/serve-selfconnect.py \
	tests/integration/serve-hidden.py \
	tests/integration/serve-admit.py \
	tests/integration/serve-lifecycle.py \
	tests/integration/serve-limits.py \
	tests/integration/serve-stall.py \
	tests/integration/serve-memory.py \
	tests/integration/serve-resume.py \
	tests/integration/serve-fds.py \
	tests/integration/serve-fs-full.py \
	tests/integration/serve-ws-load.py \
	tests/integration/serve-hidden-race.py \
	tests/integration/serve-activation.py \
	tests/integration/serve-stop-parse.py \
	tests/integration/serve-stop-stuck.py \
	tests/integration/serve-request-id.py \
	tests/integration/serve-pathuri.py \
	tests/integration/serve-parity-sweep.py \
	tests/integration/serve-metrics.py \
	tests/integration/serve-http.py \
	tests/integration/serve-fs-watch.py \
	tests/integration/serve-codex-parity.py
if OS_LINUX
if WITH_JANSSON
TESTS += $(SERVE_TESTS)
endif
endif
EXTRA_DIST += $(SERVE_TESTS) tests/lib/rpcclient.py tests/lib/netclient.py tests/lib/upstream.py
# ---- end of the serve integration tests ----

# make check-stress: `make check` three times in a row beside two busy loops
# (tests/stress.sh), as a loaded host runs it; TESTS=... narrows it to some
# tests, CHECK_STRESS_ROUNDS and CHECK_STRESS_BUSY change the counts.
CHECK_STRESS_ROUNDS = 3
CHECK_STRESS_BUSY = 2
check-stress:
	$(SHELL) $(srcdir)/tests/stress.sh '$(MAKE)' $(CHECK_STRESS_ROUNDS) $(CHECK_STRESS_BUSY)
.PHONY: check-stress
EXTRA_DIST += tests/stress.sh
MOSTLYCLEANFILES = test-suite-stress-*.log

# make check-codex: the released Codex CLI (npm @openai/codex, pinned in the
# script, installed into tests/codex/npm of the build tree) drives `cordon
# serve` and, as the control, the released `codex exec-server`; skipped with
# the reason without node/npm or the registry. See tests/codex/check-codex.sh.
CODEX_NPM_DIR = $(abs_top_builddir)/tests/codex/npm
check-codex: cordon$(EXEEXT)
	CORDON=$(abs_top_builddir)/cordon$(EXEEXT) CODEX_NPM_DIR=$(CODEX_NPM_DIR) \
		PYTHONDONTWRITEBYTECODE=1 $(SHELL) $(srcdir)/tests/codex/check-codex.sh
distclean-local: distclean-codex distclean-wine
distclean-codex:
	rm -rf $(CODEX_NPM_DIR)
.PHONY: check-codex distclean-codex
EXTRA_DIST += tests/codex/check-codex.sh tests/codex/check-codex.py tests/codex/mock_model.py \
	tests/codex/ws_tap.py

# windows-wine.sh makes a wine prefix in the build tree (seconds to create: kept
# between runs until distclean).
distclean-wine:
	rm -rf tests/windows/wineprefix
.PHONY: distclean-wine

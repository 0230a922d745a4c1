# `make fuzz`: libFuzzer targets for the parsers (see HACKING.md, Fuzzing).
#
# They are compiled by $(FUZZ_CC) (clang; configure checks that it links
# libFuzzer) with their own flags, so their objects have names of their own
# and the normal build is the same with or without them: `make fuzz` runs a
# make of only these programs with CC=$(FUZZ_CC), then tests/fuzz/run.sh
# runs each for FUZZ_SECONDS on a working corpus seeded from
# tests/fuzz/corpus/<name>. A crash, a leak or a broken property fails it
# and leaves the input in tests/fuzz/artifacts/.
#
#   make fuzz                                  every target, 60 s each
#   make fuzz FUZZ_SECONDS=600 FUZZ_ONLY=json  one target, ten minutes
#   make fuzz-build                            build only
FUZZ_SECONDS = 60
FUZZ_ONLY =
FUZZ_FLAGS =
FUZZ_SAN = -fsanitize=fuzzer,address,undefined
FUZZ_CC_FLAGS = $(WARN_CFLAGS) -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) \
	-fno-sanitize-recover=undefined
FUZZ_LD_FLAGS = $(FUZZ_SAN)

# The core, the fake file tree and the logger, instrumented once for every target.
EXTRA_LIBRARIES = tests/fuzz/libfuzzcore.a
tests_fuzz_libfuzzcore_a_SOURCES = $(libcdcore_a_SOURCES) \
	tests/unit/fakefs.c tests/unit/fakefs.h \
	src/shared/log.c src/shared/log.h \
	tests/fuzz/fuzz.h tests/fuzz/fuzz-util.c tests/fuzz/fuzz-tree.c
tests_fuzz_libfuzzcore_a_CFLAGS = $(FUZZ_CC_FLAGS)
FUZZ_LIB = tests/fuzz/libfuzzcore.a

FUZZ_TARGETS = \
	tests/fuzz/fuzz-json \
	tests/fuzz/fuzz-pathuri \
	tests/fuzz/fuzz-glob \
	tests/fuzz/fuzz-profile \
	tests/fuzz/fuzz-intent \
	tests/fuzz/fuzz-conn \
	tests/fuzz/fuzz-gitindex \
	tests/fuzz/fuzz-toml \
	tests/fuzz/fuzz-skillmd \
	tests/fuzz/fuzz-socks5 \
	tests/fuzz/fuzz-plugincache

tests_fuzz_fuzz_json_SOURCES = tests/fuzz/fuzz-json.c
tests_fuzz_fuzz_json_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_json_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_json_LDADD = $(FUZZ_LIB)

tests_fuzz_fuzz_pathuri_SOURCES = tests/fuzz/fuzz-pathuri.c
tests_fuzz_fuzz_pathuri_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_pathuri_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_pathuri_LDADD = $(FUZZ_LIB)

tests_fuzz_fuzz_glob_SOURCES = tests/fuzz/fuzz-glob.c
tests_fuzz_fuzz_glob_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_glob_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_glob_LDADD = $(FUZZ_LIB)

tests_fuzz_fuzz_profile_SOURCES = tests/fuzz/fuzz-profile.c
tests_fuzz_fuzz_profile_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_profile_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_profile_LDADD = $(FUZZ_LIB)

tests_fuzz_fuzz_toml_SOURCES = tests/fuzz/fuzz-toml.c
tests_fuzz_fuzz_toml_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_toml_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_toml_LDADD = $(FUZZ_LIB)
tests_fuzz_fuzz_skillmd_SOURCES = tests/fuzz/fuzz-skillmd.c
tests_fuzz_fuzz_skillmd_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_skillmd_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_skillmd_LDADD = $(FUZZ_LIB)
tests_fuzz_fuzz_plugincache_SOURCES = tests/fuzz/fuzz-plugincache.c
tests_fuzz_fuzz_plugincache_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_plugincache_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_plugincache_LDADD = $(FUZZ_LIB)

tests_fuzz_fuzz_socks5_SOURCES = tests/fuzz/fuzz-socks5.c
tests_fuzz_fuzz_socks5_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_socks5_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_socks5_LDADD = $(FUZZ_LIB)

tests_fuzz_fuzz_gitindex_SOURCES = tests/fuzz/fuzz-gitindex.c
tests_fuzz_fuzz_gitindex_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_gitindex_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_gitindex_LDADD = $(FUZZ_LIB)

# Wire intents: intent.c, bound over the fake tree (fuzz-intent.c stands in
# for cli-policy.c's cd_cli_bind_profile, which binds over the host's).
tests_fuzz_fuzz_intent_SOURCES = tests/fuzz/fuzz-intent.c src/serve/intent.c src/serve/intent.h
tests_fuzz_fuzz_intent_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_intent_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_intent_LDADD = $(FUZZ_LIB)

# The line framing of stdio and unix-socket connections: conn.c over a pipe
# and a socket pair, with the rest of the server stubbed (serve-stubs.c).
FUZZ_SERVE_SRCS = tests/fuzz/serve-stubs.c tests/fuzz/serve-stubs.h \
	src/serve/testhook.c src/serve/testhook.h src/serve/budget.c src/serve/budget.h \
	src/serve/metrics.c src/serve/metrics.h src/serve/server.h src/serve/loop.h \
	src/shared/fd-util.c src/shared/fd-util.h
tests_fuzz_fuzz_conn_SOURCES = tests/fuzz/fuzz-conn.c src/serve/conn.c $(FUZZ_SERVE_SRCS)
tests_fuzz_fuzz_conn_CFLAGS = $(FUZZ_CC_FLAGS)
tests_fuzz_fuzz_conn_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_conn_LDADD = $(FUZZ_LIB)

# The WebSocket handshake and frames: ws.c (wslay) and conn.c built as cordon-ws builds them.
if WEBSOCKET
FUZZ_TARGETS += tests/fuzz/fuzz-ws
endif
tests_fuzz_fuzz_ws_SOURCES = tests/fuzz/fuzz-ws.c src/serve/ws.c src/serve/conn.c \
	src/serve/base64.c $(FUZZ_SERVE_SRCS)
tests_fuzz_fuzz_ws_CPPFLAGS = $(AM_CPPFLAGS) -DCD_WEBSOCKET
tests_fuzz_fuzz_ws_CFLAGS = $(FUZZ_CC_FLAGS) $(WS_CFLAGS)
tests_fuzz_fuzz_ws_LDFLAGS = $(FUZZ_LD_FLAGS)
tests_fuzz_fuzz_ws_LDADD = $(FUZZ_LIB) $(WS_LIBS)

EXTRA_PROGRAMS += tests/fuzz/fuzz-json tests/fuzz/fuzz-pathuri tests/fuzz/fuzz-glob \
	tests/fuzz/fuzz-profile tests/fuzz/fuzz-intent tests/fuzz/fuzz-conn tests/fuzz/fuzz-ws \
	tests/fuzz/fuzz-gitindex tests/fuzz/fuzz-toml tests/fuzz/fuzz-skillmd tests/fuzz/fuzz-socks5 \
	tests/fuzz/fuzz-plugincache
CLEANFILES += tests/fuzz/fuzz-json$(EXEEXT) tests/fuzz/fuzz-pathuri$(EXEEXT) \
	tests/fuzz/fuzz-glob$(EXEEXT) tests/fuzz/fuzz-profile$(EXEEXT) \
	tests/fuzz/fuzz-intent$(EXEEXT) tests/fuzz/fuzz-conn$(EXEEXT) tests/fuzz/fuzz-ws$(EXEEXT) \
	tests/fuzz/fuzz-gitindex$(EXEEXT) tests/fuzz/fuzz-toml$(EXEEXT) \
	tests/fuzz/fuzz-skillmd$(EXEEXT) tests/fuzz/fuzz-socks5$(EXEEXT) \
	tests/fuzz/fuzz-plugincache$(EXEEXT) $(EXTRA_LIBRARIES)
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus tests/fuzz/dict

fuzz-build:
	@if test "$(HAVE_FUZZ)" != yes; then \
		echo "make fuzz: no compiler that links libFuzzer targets (FUZZ_CC='$(FUZZ_CC)')." >&2; \
		echo "On Debian: apt-get install clang libclang-rt-dev, then run configure again" >&2; \
		echo "(or pass FUZZ_CC=/path/to/clang to configure)." >&2; \
		exit 1; \
	fi
	$(MAKE) $(AM_MAKEFLAGS) CC='$(FUZZ_CC)' $(FUZZ_TARGETS)

fuzz: fuzz-build
	$(SHELL) $(srcdir)/tests/fuzz/run.sh --seconds '$(FUZZ_SECONDS)' --only '$(FUZZ_ONLY)' \
		--srcdir '$(srcdir)/tests/fuzz' --workdir tests/fuzz -- $(FUZZ_TARGETS) \
		-- $(FUZZ_FLAGS)

clean-local: clean-fuzz
clean-fuzz:
	-rm -rf tests/fuzz/work tests/fuzz/artifacts

.PHONY: fuzz fuzz-build clean-fuzz

# cordon on macOS (src/mac/main.c): check, explain and run through
# /usr/bin/sandbox-exec, over the policy core and the Seatbelt planner, with
# the command line it shares with cordon.exe (src/front/). On a darwin host it
# is the cordon program, and the Linux programs (src/local.mk) are not built.
# On Linux it is built as the check program tests/mac/cordon-macos, whose
# wrapper is the stand-in tests/data/seatbelt-stand-in.sh, fixed at compile
# time (tests/integration/macos-frontend.py).
cd_mac_sources = src/mac/main.c src/mac/probe.c src/mac/probe.h src/front/front.c \
	src/front/front.h sandbox/posix-fs-ops.c src/profile-lookup.c src/profile-lookup.h \
	src/shared/rlimit.h src/shared/clock.h \
	src/shared/fd-util.c src/shared/fd-util.h
if OS_DARWIN
bin_PROGRAMS += cordon
cordon_SOURCES = $(cd_mac_sources)
nodist_cordon_SOURCES = src/builtin-profiles.c
cordon_LDADD = libcdcore.a
# Set here too: src/local.mk's cordon_* (another condition) would leave them empty.
cordon_CPPFLAGS = $(AM_CPPFLAGS)
cordon_CFLAGS = $(AM_CFLAGS)
cordon_LDFLAGS = $(AM_LDFLAGS)
else
check_PROGRAMS += tests/mac/cordon-macos
tests_mac_cordon_macos_SOURCES = $(cd_mac_sources)
nodist_tests_mac_cordon_macos_SOURCES = src/builtin-profiles.c
tests_mac_cordon_macos_CPPFLAGS = $(AM_CPPFLAGS) \
	-DCD_MAC_SANDBOX_EXEC='"$(abs_top_srcdir)/tests/data/seatbelt-stand-in.sh"'
tests_mac_cordon_macos_LDADD = libcdcore.a
endif

# cordon serve on macOS (issue 17) is being ported. Every file of it builds
# for macOS, with src/serve/sandboxes-mac.c in place of the Linux-only
# sandboxes.c and src/spawn-posix.c in place of src/spawn.c; CI's darwin
# stage builds them with gcc made to look like a Mac (.ci/darwin-like.sh)
# so that they stay so. What macOS lacks fails closed there (a sandboxed fs
# request, a path watch, a managed network's local-route check, a TCP
# client's owner); serve is not linked into the macOS program yet.
darwin_ready_sources = src/cmd-serve.c src/net/audit.c src/net/localroute.c src/net/proxy.c \
	src/serve/admit.c src/serve/base64.c src/serve/budget.c src/serve/conn.c \
	src/serve/discover-plugins.c src/serve/discover-scan.c src/serve/discover-v2.c \
	src/serve/discover.c src/serve/envconfig.c src/serve/fs-helper-main.c \
	src/serve/fs-helper.c src/serve/fs-ops.c src/serve/fs-stream.c src/serve/fs-watch.c \
	src/serve/fs-write.c src/serve/fs.c src/serve/http.c src/serve/intent.c \
	src/serve/listen.c src/serve/loop.c src/serve/managed-route.c src/serve/methods.c \
	src/serve/metrics.c src/serve/netproxy.c src/serve/peer-group.c src/serve/peer.c \
	src/serve/pidns.c src/serve/proc.c src/serve/sandboxes-mac.c src/serve/sd-daemon.c \
	src/serve/server.c src/serve/status.c src/serve/testhook.c src/serve/workq.c \
	src/serve/ws.c src/shared/fd-util.c src/spawn-posix.c src/spawn-common.c src/program.c
check-darwin-ready:
	@for f in $(darwin_ready_sources); do \
		$(COMPILE) $(JANSSON_CFLAGS) $(CURL_CFLAGS) -fsyntax-only $(srcdir)/$$f || exit 1; \
	done; \
	echo "check-darwin-ready: $(words $(darwin_ready_sources)) files of cordon serve build for $(host_os)"
.PHONY: check-darwin-ready

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
if MAC_SERVE
# cordon serve (with jansson): the server of the Linux build, its
# commands under the Seatbelt wrapper. What macOS lacks is refused there:
# sandboxed fs requests (no fs helper under Seatbelt yet), path watches,
# a managed network's local-route check, a TCP client's owner, the unix
# clients of the server's own user (see src/serve/sandboxes-mac.c).
cordon_SOURCES += $(cd_mac_serve_sources)
cordon_CPPFLAGS += -DCD_MAC_SERVE
cordon_CFLAGS += $(JANSSON_CFLAGS) -pthread
cordon_LDADD += $(JANSSON_LIBS)
cordon_LDFLAGS += -pthread
# The ws:// transport (and http/request), as on Linux in a program of its
# own that cordon serve --listen ws:// executes (src/local.mk says why).
if WEBSOCKET
pkglibexec_PROGRAMS += cordon-ws
cordon_ws_SOURCES = $(cd_mac_sources) $(cd_mac_serve_sources) src/serve/ws.c
nodist_cordon_ws_SOURCES = src/builtin-profiles.c
cordon_ws_CPPFLAGS = $(AM_CPPFLAGS) -DCD_MAC_SERVE -DCD_WEBSOCKET
cordon_ws_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(WS_CFLAGS) -pthread
cordon_ws_LDADD = libcdcore.a $(JANSSON_LIBS) $(WS_LIBS)
if HTTP
cordon_ws_CPPFLAGS += -DCD_HTTP
cordon_ws_CFLAGS += $(CURL_CFLAGS)
cordon_ws_LDADD += $(CURL_LIBS)
endif
cordon_ws_LDFLAGS = $(AM_LDFLAGS) -pthread
endif
endif
else
check_PROGRAMS += tests/mac/cordon-macos
tests_mac_cordon_macos_SOURCES = $(cd_mac_sources)
nodist_tests_mac_cordon_macos_SOURCES = src/builtin-profiles.c
tests_mac_cordon_macos_CPPFLAGS = $(AM_CPPFLAGS) \
	-DCD_MAC_SANDBOX_EXEC='"$(abs_top_srcdir)/tests/data/seatbelt-stand-in.sh"'
tests_mac_cordon_macos_LDADD = libcdcore.a
endif

# cordon serve on macOS: the Linux build's server with src/serve/sandboxes-mac.c
# in place of sandboxes.c and src/spawn-posix.c in place of src/spawn.c.
# CI's darwin stage builds it with gcc made to look like a Mac
# (.ci/darwin-like.sh), links it, and drives it (tests/integration/macos-serve.py).
cd_mac_serve_sources = src/cli.h src/cli-util.c src/cli-policy.c src/cli-policy.h \
	src/os-backend.c src/os-backend.h src/spawn-posix.c src/spawn.h src/spawn-common.c \
	src/spawn-common.h src/program.c src/cmd-serve.c \
	src/serve/server.c src/serve/server.h src/serve/conn.c src/serve/methods.c \
	src/serve/intent.c src/serve/intent.h src/serve/loop.c src/serve/loop.h \
	src/serve/proc.c src/serve/proc.h src/serve/base64.c src/serve/pidns.c \
	src/serve/fs.c src/serve/fs.h src/serve/fs-stream.c src/serve/fs-stream.h \
	src/serve/fs-write.c src/serve/managed-route.c src/serve/managed-route.h \
	src/serve/netproxy.c src/serve/netproxy.h src/serve/discover.c src/serve/discover.h \
	src/serve/discover-scan.c src/serve/discover-scan.h src/serve/discover-v2.c \
	src/serve/discover-v2.h src/serve/discover-plugins.c src/serve/discover-plugins.h \
	src/serve/envconfig.c src/serve/envconfig.h src/serve/fs-ops.c src/serve/fs-ops.h \
	src/serve/fs-watch.c src/serve/fs-watch.h src/serve/fs-helper.c src/serve/fs-helper.h \
	src/serve/listen.c src/serve/peer.c src/serve/peer-group.c src/serve/peer.h \
	src/serve/sandboxes-mac.c src/serve/sandboxes.h src/serve/workq.c src/serve/workq.h \
	src/serve/admit.c src/serve/testhook.c src/serve/testhook.h src/serve/budget.c \
	src/serve/budget.h src/serve/sd-daemon.c src/serve/sd-daemon.h src/serve/metrics.c \
	src/serve/metrics.h src/serve/status.c src/serve/status.h src/serve/http.c \
	src/serve/http.h src/net/proxy.c src/net/proxy.h src/net/audit.c src/net/audit.h \
	src/net/localroute.c src/net/localroute.h src/shared/log.c src/shared/log.h \
	src/shared/random.h
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
# cordon serve of a macOS build made on Linux by .ci/darwin-like.sh, with
# the suite's stand-in for sandbox-exec compiled in (CPPFLAGS=
# -DCD_MAC_SANDBOX_EXEC='"SRCDIR/tests/data/seatbelt-stand-in.sh"'), driven
# over stdio by tests/darwin-serve.sh: CI's darwin stage runs it.
if MAC_SERVE
check-darwin-serve: cordon$(EXEEXT)
	@$(SHELL) $(srcdir)/tests/darwin-serve.sh $(abs_builddir)/cordon$(EXEEXT) $(abs_builddir)
else
check-darwin-serve:
	@echo "check-darwin-serve: this build has no cordon serve (a darwin host with jansson)"; exit 1
endif
CLEANFILES += darwin-serve-*.log
EXTRA_DIST += tests/darwin-serve.sh
.PHONY: check-darwin-serve

check-darwin-ready:
	@for f in $(darwin_ready_sources); do \
		$(COMPILE) $(JANSSON_CFLAGS) $(CURL_CFLAGS) -fsyntax-only $(srcdir)/$$f || exit 1; \
	done; \
	echo "check-darwin-ready: $(words $(darwin_ready_sources)) files of cordon serve build for $(host_os)"
.PHONY: check-darwin-ready

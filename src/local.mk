# The cordon program (Linux; on macOS it is src/mac/local.mk's).
if !OS_DARWIN
if WITH_JANSSON
bin_PROGRAMS += cordon
cordon_common_sources = \
	src/main.c src/cli.h src/cli-util.c \
	src/cli-policy.c src/cli-policy.h src/builtin-profiles.h \
	src/profile-lookup.c src/profile-lookup.h \
	src/cmd-run.c src/cmd-explain.c src/cmd-probe.c src/cmd-check.c \
	src/spawn.c src/spawn.h src/spawn-common.c src/spawn-common.h src/program.c src/os-backend.c src/os-backend.h \
	src/init/init.c src/init/init.h src/init/init-sys.h \
	src/cmd-serve.c \
	src/serve/server.c src/serve/server.h src/serve/conn.c src/serve/methods.c \
	src/serve/intent.c src/serve/intent.h \
	src/serve/loop.c src/serve/loop.h src/serve/proc.c src/serve/proc.h \
	src/serve/base64.c src/serve/pidns.c \
	src/serve/fs.c src/serve/fs.h src/serve/fs-stream.c src/serve/fs-stream.h \
	src/serve/fs-write.c \
	src/serve/managed-route.c src/serve/managed-route.h \
	src/serve/netproxy.c src/serve/netproxy.h \
	src/serve/discover.c src/serve/discover.h src/serve/discover-scan.c src/serve/discover-scan.h \
	src/serve/discover-v2.c src/serve/discover-v2.h \
	src/serve/discover-plugins.c src/serve/discover-plugins.h \
	src/serve/envconfig.c src/serve/envconfig.h \
	src/serve/fs-ops.c src/serve/fs-ops.h src/serve/fs-watch.c src/serve/fs-watch.h \
	src/serve/fs-helper.c src/serve/fs-helper.h src/serve/listen.c \
	src/serve/peer.c src/serve/peer-group.c src/serve/peer.h src/serve/sandboxes.c src/serve/sandboxes.h \
	src/serve/workq.c src/serve/workq.h src/serve/admit.c \
	src/serve/testhook.c src/serve/testhook.h src/serve/budget.c src/serve/budget.h \
	src/serve/sd-daemon.c src/serve/sd-daemon.h \
	src/serve/metrics.c src/serve/metrics.h src/serve/status.c src/serve/status.h \
	src/serve/http.c src/serve/http.h \
	src/cmd-proxy.c src/net/proxy.c src/net/proxy.h src/net/audit.c src/net/audit.h \
	src/net/localroute.c src/net/localroute.h \
	src/own-proxy.c src/own-proxy.h \
	src/shared/log.c src/shared/log.h \
	src/shared/fd-util.c src/shared/fd-util.h src/shared/clock.h src/shared/random.h
cordon_SOURCES = $(cordon_common_sources)
nodist_cordon_SOURCES = src/builtin-profiles.c
cordon_CPPFLAGS = $(AM_CPPFLAGS)
cordon_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -pthread
cordon_LDADD = $(SANDBOX_LIBS) $(JANSSON_LIBS)
# -static-pie unless --disable-static-cordon (see configure.ac).
cordon_LDFLAGS = $(AM_LDFLAGS) $(STATIC_LDFLAGS) -pthread

# The same server with the WebSocket transport, which cordon serve --listen
# ws:// executes: wslay comes as a shared library only, and linking it into
# cordon would cost every cordon run the start-up of a dynamic program.
if WEBSOCKET
pkglibexec_PROGRAMS += cordon-ws
cordon_ws_SOURCES = $(cordon_common_sources) src/serve/ws.c
nodist_cordon_ws_SOURCES = src/builtin-profiles.c
cordon_ws_CPPFLAGS = $(AM_CPPFLAGS) -DCD_WEBSOCKET
cordon_ws_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(WS_CFLAGS) -pthread
cordon_ws_LDADD = $(SANDBOX_LIBS) $(JANSSON_LIBS) $(WS_LIBS)
# http/request's transfers (src/serve/http.c): libcurl, in this program only.
if HTTP
cordon_ws_CPPFLAGS += -DCD_HTTP
cordon_ws_CFLAGS += $(CURL_CFLAGS)
cordon_ws_LDADD += $(CURL_LIBS)
endif
cordon_ws_LDFLAGS = $(AM_LDFLAGS) -pthread
else
EXTRA_DIST += src/serve/ws.c
endif

# The program that performs sandboxed fs/... requests of cordon serve
# (src/serve/fs-helper-main.c): static like cordon, since it starts once
# per request and inside sandboxes that may not read the shared libraries.
pkglibexec_PROGRAMS += cordon-fs-helper
cordon_fs_helper_SOURCES = src/serve/fs-helper-main.c src/serve/fs-ops.c src/serve/fs-ops.h \
	src/serve/discover-scan.c src/serve/discover-scan.h \
	src/shared/fd-util.c src/shared/fd-util.h
cordon_fs_helper_CFLAGS = $(AM_CFLAGS)
cordon_fs_helper_LDADD = libcdcore.a
cordon_fs_helper_LDFLAGS = $(AM_LDFLAGS) $(STATIC_LDFLAGS)

# The init of the pid namespaces of the sandboxes cordon serve starts
# (src/init/init.h): without a C library where init-sys.h has the system
# call glue, so that its start costs what the kernel's exec does. Never
# with sanitizers (they need the C library).
pkglibexec_PROGRAMS += cordon-init
cordon_init_SOURCES = src/init/init.c src/init/init-main.c src/init/init.h src/init/init-sys.h
if INIT_NOLIBC
cordon_init_CPPFLAGS = $(AM_CPPFLAGS) -DCD_INIT_NOLIBC
cordon_init_CFLAGS = $(WARN_CFLAGS) -ffreestanding
cordon_init_LDFLAGS = -nostdlib -static
cordon_init_LDADD = -lgcc
else
cordon_init_CFLAGS = $(WARN_CFLAGS)
cordon_init_LDFLAGS = $(STATIC_LDFLAGS)
endif
endif
endif

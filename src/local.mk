# The cordon program.
if WITH_JANSSON
bin_PROGRAMS += cordon
cordon_common_sources = \
	src/main.c src/cli.h src/cli-util.c \
	src/cli-policy.c src/cli-policy.h \
	src/cmd-run.c src/cmd-explain.c src/cmd-probe.c src/cmd-check.c \
	src/spawn.c src/spawn.h \
	src/cmd-serve.c \
	src/serve/server.c src/serve/server.h src/serve/conn.c src/serve/methods.c \
	src/serve/intent.c src/serve/intent.h \
	src/serve/loop.c src/serve/loop.h src/serve/proc.c src/serve/proc.h \
	src/serve/base64.c src/serve/pidns.c \
	src/serve/fs.c src/serve/fs.h src/serve/listen.c \
	src/serve/peer.c src/serve/peer.h \
	src/serve/workq.c src/serve/workq.h \
	src/shared/log.c src/shared/log.h \
	src/shared/fd-util.c src/shared/fd-util.h
cordon_SOURCES = $(cordon_common_sources)
cordon_CPPFLAGS = $(AM_CPPFLAGS) -DCD_PKGLIBEXECDIR='"$(pkglibexecdir)"'
cordon_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -pthread
cordon_LDADD = $(SANDBOX_LIBS) $(JANSSON_LIBS)
# -static-pie unless --disable-static-cordon (see configure.ac).
cordon_LDFLAGS = $(AM_LDFLAGS) $(STATIC_LDFLAGS) -pthread

# The same server with the WebSocket transport, which cordon serve --listen
# ws:// executes: wslay comes as a shared library only, and linking it into
# cordon would cost every cordon run the start-up of a dynamic program.
if WEBSOCKET
pkglibexec_PROGRAMS = cordon-ws
cordon_ws_SOURCES = $(cordon_common_sources) src/serve/ws.c
cordon_ws_CPPFLAGS = $(AM_CPPFLAGS) -DCD_WEBSOCKET
cordon_ws_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(WS_CFLAGS) -pthread
cordon_ws_LDADD = $(SANDBOX_LIBS) $(JANSSON_LIBS) $(WS_LIBS)
cordon_ws_LDFLAGS = $(AM_LDFLAGS) -pthread
else
EXTRA_DIST += src/serve/ws.c
endif
endif

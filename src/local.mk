# The cordon program.
if WITH_JANSSON
bin_PROGRAMS += cordon
cordon_SOURCES = \
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
	src/serve/workq.c src/serve/workq.h \
	src/shared/log.c src/shared/log.h \
	src/shared/fd-util.c src/shared/fd-util.h
cordon_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(WS_CFLAGS) -pthread
cordon_LDADD = $(SANDBOX_LIBS) $(JANSSON_LIBS) $(WS_LIBS)
if WEBSOCKET
cordon_SOURCES += src/serve/ws.c
else
EXTRA_DIST += src/serve/ws.c
endif
# -static-pie unless --disable-static-cordon (see configure.ac).
cordon_LDFLAGS = $(AM_LDFLAGS) $(STATIC_LDFLAGS) -pthread
endif

# The cordon program.
if WITH_JANSSON
bin_PROGRAMS += cordon
cordon_SOURCES = \
	src/main.c src/cli.h src/cli-util.c \
	src/cli-policy.c src/cli-policy.h \
	src/cmd-run.c src/cmd-explain.c src/cmd-probe.c src/cmd-check.c \
	src/spawn.c src/spawn.h \
	src/shared/log.c src/shared/log.h
cordon_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
cordon_LDADD = $(SANDBOX_LIBS) $(JANSSON_LIBS)
endif

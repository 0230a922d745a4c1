# Backends. Only the contract header is shared.
noinst_LIBRARIES += libcdsandbox.a
libcdsandbox_a_SOURCES = sandbox/backend.h sandbox/posix-fs-ops.c
libcdsandbox_a_CFLAGS = $(AM_CFLAGS)
if OS_LINUX
libcdsandbox_a_SOURCES += \
	sandbox/linux/backends.c \
	sandbox/linux/namespaces.c \
	sandbox/linux/caps.c \
	sandbox/linux/landlock.c \
	sandbox/linux/seccomp.c \
	sandbox/linux/probe.c \
	sandbox/linux/linux-util.h
libcdsandbox_a_CFLAGS += $(SECCOMP_CFLAGS) $(CAP_CFLAGS)
endif
SANDBOX_LIBS = libcdsandbox.a libcdcore.a $(SECCOMP_LIBS) $(CAP_LIBS)

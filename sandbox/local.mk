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
	sandbox/linux/seccomp.h \
	sandbox/linux/seccomp-compile.c \
	sandbox/linux/probe.c \
	sandbox/linux/cgroup.c \
	sandbox/linux/cgroup.h \
	sandbox/linux/limits.c src/shared/rlimit.h \
	sandbox/linux/netfence.c \
	sandbox/linux/netfence.h \
	sandbox/linux/confine.c \
	sandbox/linux/confine.h \
	sandbox/linux/linux-util.h
nodist_libcdsandbox_a_SOURCES = sandbox/linux/seccomp-filters.c
libcdsandbox_a_CFLAGS += $(SECCOMP_CFLAGS) $(CAP_CFLAGS)

# The seccomp programs are compiled at build time by seccomp-gen, which runs
# the same compiler code as the run-time fallback (seccomp.h). It is built
# with $(CC) for the host, so it can run only when host and build machine are
# the same; otherwise the generated file holds no programs and the backend
# compiles at run time. Comparing the triplets is conservative: a false
# "cross" only costs run time, never correctness.
noinst_PROGRAMS = sandbox/linux/seccomp-gen
sandbox_linux_seccomp_gen_SOURCES = \
	sandbox/linux/seccomp-gen.c \
	sandbox/linux/seccomp-compile.c \
	sandbox/linux/seccomp.h
sandbox_linux_seccomp_gen_CFLAGS = $(AM_CFLAGS) $(SECCOMP_CFLAGS)
sandbox_linux_seccomp_gen_LDADD = libcdcore.a $(SECCOMP_LIBS)

sandbox/linux/seccomp-filters.c: sandbox/linux/seccomp-gen$(EXEEXT)
	$(AM_V_GEN)if test "$(build)" = "$(host)"; then \
		sandbox/linux/seccomp-gen$(EXEEXT) $@; \
	else \
		printf '%s\n' \
			'/* SPDX-License-Identifier: LGPL-2.1-or-later */' \
			'/* Generated: cross build, no precompiled seccomp programs. */' \
			'#include "sandbox/linux/seccomp.h"' \
			'const struct cd_seccomp_precompiled cd_seccomp_precompiled[] = { { 0 } };' \
			'const uint32_t cd_seccomp_precompiled_arch = 0;' \
			'const unsigned cd_seccomp_precompiled_version[3] = { 0, 0, 0 };' \
			>$@.tmp && mv -f $@.tmp $@; \
	fi
CLEANFILES += sandbox/linux/seccomp-filters.c sandbox/linux/seccomp-filters.c.tmp
endif
# Each backend's planner is pure (no OS headers): the Linux wrapper as data, the macOS
# Seatbelt policy and the Windows restricted token are built and tested on every host, and
# held to the core's portability check.
libcdcore_a_SOURCES += sandbox/linux/plan.c sandbox/linux/plan.h sandbox/linux/plan-netfence.c \
	sandbox/seatbelt/sbpl.c sandbox/seatbelt/sbpl.h \
	sandbox/windows/plan.c sandbox/windows/plan.h
SANDBOX_LIBS = libcdsandbox.a libcdcore.a $(SECCOMP_LIBS) $(CAP_LIBS)

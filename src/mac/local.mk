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

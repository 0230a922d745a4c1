# cordon.exe: the Windows build, cross-compiled with mingw-w64 when configure
# finds it (x86_64-w64-mingw32-gcc). It is the policy core, the Windows
# planner and launch, and a command line of its own (src/win/main.c): check,
# explain and run. tests/windows/test-win.exe tests the Windows-only code; both
# run under wine64 in tests/integration/windows-wine.sh (skipped without it).
# jansson is not packaged for mingw: cordon.exe writes its JSON itself.
cd_win_srcs = \
	$(top_srcdir)/src/core/util.c $(top_srcdir)/src/core/json.c \
	$(top_srcdir)/src/core/pathuri.c $(top_srcdir)/src/core/profile.c \
	$(top_srcdir)/src/core/plan.c $(top_srcdir)/src/core/glob.c \
	$(top_srcdir)/src/core/gitindex.c $(top_srcdir)/src/core/limits.c \
	$(top_srcdir)/src/core/netpolicy.c $(top_srcdir)/src/core/netaddr.c \
	$(top_srcdir)/sandbox/windows/plan.c $(top_srcdir)/sandbox/windows/launch.c \
	$(top_srcdir)/sandbox/windows/win-fs-ops.c
cd_win_hdrs = $(top_srcdir)/src/win/config.h $(top_srcdir)/sandbox/windows/launch.h \
	$(top_srcdir)/sandbox/windows/win-util.h
EXTRA_DIST += src/win/main.c src/win/config.h tests/windows/test-win.c \
	sandbox/windows/launch.c sandbox/windows/launch.h sandbox/windows/win-fs-ops.c \
	sandbox/windows/win-util.h
WIN_CFLAGS = -std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers -D__USE_MINGW_ANSI_STDIO=1 -D_WIN32_WINNT=0x0A00 \
	-DCD_WIN_VERSION='"$(PACKAGE_VERSION)"' -I$(top_srcdir)/src/win -I$(top_srcdir)/src \
	-I$(top_srcdir) -I$(top_builddir)/src
WIN_LIBS = -ladvapi32 -lshell32
if HAVE_MINGW
if WERROR
WIN_CFLAGS += -Werror
endif
# The command line is shared with cordon on macOS (src/front/).
cordon.exe: $(top_srcdir)/src/win/main.c src/builtin-profiles.c $(cd_win_srcs) \
		$(cd_win_hdrs) $(top_srcdir)/src/front/front.c $(top_srcdir)/src/front/front.h
	$(AM_V_CC)$(MINGW_CC) $(WIN_CFLAGS) -o $@ $(top_srcdir)/src/win/main.c \
		$(top_srcdir)/src/front/front.c src/builtin-profiles.c $(cd_win_srcs) $(WIN_LIBS)
tests/windows/test-win.exe: $(top_srcdir)/tests/windows/test-win.c $(cd_win_srcs) \
		$(cd_win_hdrs)
	@$(MKDIR_P) tests/windows
	$(AM_V_CC)$(MINGW_CC) $(WIN_CFLAGS) -o $@ $(top_srcdir)/tests/windows/test-win.c \
		$(cd_win_srcs) $(WIN_LIBS)
check_DATA = cordon.exe tests/windows/test-win.exe
CLEANFILES += cordon.exe tests/windows/test-win.exe
endif

# `make bench`: benchmark programs print figures beside baselines measured in the same run.
# Built only on demand (EXTRA_PROGRAMS): never part of `make all` or `make check`.
EXTRA_PROGRAMS = bench/bench-spawn
bench_bench_spawn_SOURCES = bench/bench-spawn.c
# Without AM_CPPFLAGS: its -I$(top_srcdir)/src would make <spawn.h> find src/spawn.h.
bench_bench_spawn_CPPFLAGS = -include $(top_builddir)/config.h
CLEANFILES += bench/bench-spawn$(EXEEXT)
bench: bench/bench-spawn$(EXEEXT) cordon$(EXEEXT)
	$(builddir)/bench/bench-spawn$(EXEEXT) $(abs_builddir)/cordon$(EXEEXT) $(abs_srcdir)/policies
.PHONY: bench

# `make bench`: benchmark programs print figures beside baselines measured in the same run.
# Built only on demand (EXTRA_PROGRAMS): never part of `make all` or `make check`.
EXTRA_PROGRAMS = bench/bench-spawn bench/bench-serve
bench_bench_spawn_SOURCES = bench/bench-spawn.c bench/bench-util.c bench/bench-util.h
# Without AM_CPPFLAGS: its -I$(top_srcdir)/src would make <spawn.h> find src/spawn.h.
bench_bench_spawn_CPPFLAGS = -include $(top_builddir)/config.h
CLEANFILES += bench/bench-spawn$(EXEEXT)
# bench-serve drives `cordon serve` over pipes; CODEX_BIN=/path/to/codex adds Codex beside it.
bench_bench_serve_SOURCES = bench/bench-serve.c bench/bench-util.c bench/bench-util.h
bench_bench_serve_CPPFLAGS = -include $(top_builddir)/config.h
CLEANFILES += bench/bench-serve$(EXEEXT)
bench: bench/bench-spawn$(EXEEXT) bench/bench-serve$(EXEEXT) cordon$(EXEEXT)
	$(builddir)/bench/bench-spawn$(EXEEXT) $(abs_builddir)/cordon$(EXEEXT) $(abs_srcdir)/policies
	$(builddir)/bench/bench-serve$(EXEEXT) $(abs_builddir)/cordon$(EXEEXT)
.PHONY: bench

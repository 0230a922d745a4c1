# `make bench`: benchmark programs print figures beside baselines measured in the same run.
EXTRA_PROGRAMS = bench/bench-spawn
bench_bench_spawn_SOURCES = bench/bench-spawn.c
CLEANFILES += bench/bench-spawn
bench: bench/bench-spawn cordon
	$(builddir)/bench/bench-spawn $(abs_builddir)/cordon $(abs_srcdir)/policies
.PHONY: bench

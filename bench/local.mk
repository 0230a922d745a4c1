# `make bench`: benchmark programs print figures beside baselines measured in the same run.
# Built only on demand (EXTRA_PROGRAMS): never part of `make all` or `make check`.
EXTRA_PROGRAMS = bench/bench-spawn bench/bench-serve bench/bench-floor
bench_bench_spawn_SOURCES = bench/bench-spawn.c bench/bench-util.c bench/bench-util.h
# Without AM_CPPFLAGS: its -I$(top_srcdir)/src would make <spawn.h> find src/spawn.h.
bench_bench_spawn_CPPFLAGS = -include $(top_builddir)/config.h
CLEANFILES += bench/bench-spawn$(EXEEXT)
# bench-floor: a workspace-write run's kernel work without cordon, linked like cordon. With
# musl-gcc (apt-get install musl-tools) it is also built against musl, as bench-floor-musl.
bench_bench_floor_SOURCES = bench/bench-floor.c
bench_bench_floor_CPPFLAGS = -include $(top_builddir)/config.h
bench_bench_floor_LDFLAGS = $(AM_LDFLAGS) $(STATIC_LDFLAGS)
CLEANFILES += bench/bench-floor$(EXEEXT) bench/bench-floor-musl
if HAVE_MUSL_GCC
bench_floor_musl = bench/bench-floor-musl
bench/bench-floor-musl: bench/bench-floor.c
	$(AM_V_CC)$(MUSL_GCC) -O2 -static -o $@ $(srcdir)/bench/bench-floor.c
endif
# bench-serve drives `cordon serve` over pipes; CODEX_BIN=/path/to/codex adds Codex beside it.
bench_bench_serve_SOURCES = bench/bench-serve.c bench/bench-util.c bench/bench-util.h
bench_bench_serve_CPPFLAGS = -include $(top_builddir)/config.h
CLEANFILES += bench/bench-serve$(EXEEXT)
bench: bench/bench-spawn$(EXEEXT) bench/bench-serve$(EXEEXT) bench/bench-floor$(EXEEXT) \
		$(bench_floor_musl) cordon$(EXEEXT)
	@test -n "$(bench_floor_musl)" || \
		echo "musl-gcc not found: no musl floor (apt-get install musl-tools)"
	$(builddir)/bench/bench-spawn$(EXEEXT) $(abs_builddir)/cordon$(EXEEXT) $(abs_srcdir)/policies \
		$(builddir)/bench/bench-floor$(EXEEXT) $(bench_floor_musl)
	$(builddir)/bench/bench-serve$(EXEEXT) $(abs_builddir)/cordon$(EXEEXT)
	python3 $(srcdir)/bench/bench-stall.py $(abs_builddir)/cordon$(EXEEXT)
	python3 $(srcdir)/bench/bench-proxy.py $(abs_builddir)/cordon$(EXEEXT)
.PHONY: bench
# bench-stall.py: how long one client's large or slow requests hold up another client.
EXTRA_DIST += bench/bench-stall.py
# bench-proxy.py: the managed network's proxy beside direct loopback (throughput, open time).
EXTRA_DIST += bench/bench-proxy.py

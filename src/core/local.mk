# The OS-free core: policy model, binding, plans, tables. No OS headers (check-core-portable).
noinst_LIBRARIES += libcdcore.a
libcdcore_a_SOURCES = \
	src/core/util.c src/core/util.h \
	src/core/json.c src/core/json.h \
	src/core/pathuri.c src/core/pathuri.h \
	src/core/profile.c src/core/profile.h \
	src/core/plan.c src/core/plan.h \
	src/core/glob.c src/core/glob.h \
	src/core/gitindex.c src/core/gitindex.h \
	src/core/limits.c src/core/limits.h \
	src/core/netaddr.c src/core/netaddr.h \
	src/core/netpolicy.c src/core/netpolicy.h \
	src/core/socks5.c src/core/socks5.h \
	src/core/toml.c src/core/toml.h \
	src/core/skillmd.c src/core/skillmd.h \
	src/core/plugincache.c src/core/plugincache.h

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#ifdef __linux__
#include <sys/sysinfo.h>
#else
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include "serve/budget.h"

#define DEFAULT_MAX (1024ull * 1024 * 1024)
#define DEFAULT_MIN (64ull * 1024 * 1024)

static atomic_size_t used[CD_MEM_KIND_COUNT];
static atomic_size_t total, peak;
static atomic_ulong pressure;
static size_t limit = SIZE_MAX;

size_t cd_mem_default_limit(void)
{
	unsigned long long v = DEFAULT_MAX, ram = 0;
#ifdef __linux__
	struct sysinfo si;
	if (sysinfo(&si) == 0 && si.mem_unit > 0)
		ram = (unsigned long long)si.totalram * si.mem_unit;
#else
	/* macOS: the physical memory, in bytes. */
	uint64_t mem = 0;
	size_t len = sizeof(mem);
	if (sysctlbyname("hw.memsize", &mem, &len, NULL, 0) == 0 && len == sizeof(mem))
		ram = mem;
#endif
	if (ram && ram / 8 < v)
		v = ram / 8;
	if (v < DEFAULT_MIN)
		v = DEFAULT_MIN;
	return (size_t)v;
}

void cd_mem_set_limit(size_t l)
{
	limit = l;
}

size_t cd_mem_limit(void)
{
	return limit;
}

void cd_mem_charge(enum cd_mem_kind k, size_t n)
{
	if (!n)
		return;
	atomic_fetch_add_explicit(&used[k], n, memory_order_relaxed);
	size_t t = atomic_fetch_add_explicit(&total, n, memory_order_relaxed) + n;
	size_t p = atomic_load_explicit(&peak, memory_order_relaxed);
	while (t > p && !atomic_compare_exchange_weak_explicit(&peak, &p, t, memory_order_relaxed,
							       memory_order_relaxed))
		;
}

void cd_mem_release(enum cd_mem_kind k, size_t n)
{
	if (!n)
		return;
	atomic_fetch_sub_explicit(&used[k], n, memory_order_relaxed);
	atomic_fetch_sub_explicit(&total, n, memory_order_relaxed);
}

void cd_mem_set(enum cd_mem_kind k, size_t *charged, size_t n)
{
	if (n > *charged)
		cd_mem_charge(k, n - *charged);
	else
		cd_mem_release(k, *charged - n);
	*charged = n;
}

size_t cd_mem_used(void)
{
	return atomic_load_explicit(&total, memory_order_relaxed);
}

size_t cd_mem_used_kind(enum cd_mem_kind k)
{
	return atomic_load_explicit(&used[k], memory_order_relaxed);
}

size_t cd_mem_peak(void)
{
	return atomic_load_explicit(&peak, memory_order_relaxed);
}

bool cd_mem_room(size_t n)
{
	size_t t = cd_mem_used();
	return t <= limit && n <= limit - t;
}

const char *cd_mem_kind_name(enum cd_mem_kind k)
{
	switch (k) {
	case CD_MEM_QUEUED:
		return "queued";
	case CD_MEM_RETAINED:
		return "retained";
	case CD_MEM_FILES:
		return "files";
	case CD_MEM_INBOUND:
		return "inbound";
	case CD_MEM_KIND_COUNT:
		break;
	}
	return "?";
}

void cd_mem_note_pressure(void)
{
	atomic_fetch_add_explicit(&pressure, 1, memory_order_relaxed);
}

unsigned long cd_mem_pressure_count(void)
{
	return atomic_load_explicit(&pressure, memory_order_relaxed);
}

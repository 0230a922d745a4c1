/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seccomp backend. prepare (parent) picks the BPF program for the plan's
 * rule groups: normally one compiled at build time by seccomp-gen, so the
 * run path does no libseccomp work (compiling takes about 100 us, most of
 * `cordon run`'s sandbox setup); otherwise it compiles one now with the same
 * code (seccomp-compile.c). The child only loads the program.
 */
#include "sandbox/linux/seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/backend.h"
#include "sandbox/linux/linux-util.h"

struct cd_backend_state {
	const struct sock_filter *insns; /* == owned, or static data when precompiled */
	struct sock_filter *owned;	 /* what destroy frees: insns, or NULL */
	size_t n_insns;
	struct sock_fprog prog; /* points at insns; filled by prepare */
	unsigned n_unknown;	/* rule names this libseccomp does not know (skipped) */
	bool precompiled;	/* insns is static data from seccomp-filters.c */
};

/*
 * AUDIT_ARCH of the code this file is compiled into, known at compile time
 * for the common architectures. The generator ran on the build machine, so
 * this guards the precompiled programs against a mismatched build.
 */
#if defined(__x86_64__) && defined(__LP64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__i386__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_I386
#elif defined(__aarch64__) && defined(__LP64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#elif defined(__riscv) && __riscv_xlen == 64
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_RISCV64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_S390X
#endif

static bool precompiled_arch_ok(void)
{
	if (cd_seccomp_precompiled_arch == 0)
		return false;
#ifdef NATIVE_AUDIT_ARCH
	return cd_seccomp_precompiled_arch == NATIVE_AUDIT_ARCH;
#else
	/* Not in the list above (x32, big-endian arm, ...): ask libseccomp, which is cheap. */
	return cd_seccomp_precompiled_arch == seccomp_arch_native();
#endif
}

static const struct cd_seccomp_precompiled *find_precompiled(cd_sc_when when)
{
	if (!precompiled_arch_ok() || cd_linux_test_disabled("seccomp-precompiled"))
		return NULL;
	for (const struct cd_seccomp_precompiled *p = cd_seccomp_precompiled; p->insns; p++)
		if (p->when == when)
			return p;
	return NULL;
}

static void seccomp_destroy(struct cd_backend_state *s)
{
	if (!s)
		return;
	free(s->owned);
	free(s);
}

static int seccomp_prepare(const struct cd_linux_plan *lp, struct cd_backend_state **ret_state,
			   char **reterr)
{
	const struct cd_seccomp_precompiled *pre;
	struct cd_backend_state *s;

	*ret_state = NULL;
	if (!lp->sandboxed || !lp->seccomp)
		return 0;

	s = cd_xcalloc(1, sizeof(*s));
	pre = find_precompiled(lp->sc_when);
	if (pre) {
		s->insns = pre->insns;
		s->n_insns = pre->n_insns;
		s->n_unknown = pre->n_unknown;
		s->precompiled = true;
	} else {
		int r = cd_seccomp_compile(lp->sc_when, &s->owned, &s->n_insns, &s->n_unknown,
					   reterr);

		if (r < 0) {
			free(s);
			return r;
		}
		s->insns = s->owned;
	}
	/* cd_seccomp_compile and the generator both keep n_insns <= BPF_MAXINSNS. */
	s->prog.len = (unsigned short)s->n_insns;
	/* The kernel only reads the program; sock_fprog just is not const-qualified. */
	s->prog.filter = (struct sock_filter *)s->insns;
	*ret_state = s;
	return 0;
}

static int seccomp_apply(struct cd_backend_state *s)
{
	if (!s)
		return 0;
	/* Loading a filter without CAP_SYS_ADMIN needs no_new_privs; idempotent. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &s->prog) < 0)
		return -errno;
	return 0;
}

const struct cd_backend cd_backend_seccomp = {
	.name = "seccomp",
	.prepare = seccomp_prepare,
	.apply = seccomp_apply,
	.finish = NULL,
	.destroy = seccomp_destroy,
};

size_t cd_seccomp_state_insns(const struct cd_backend_state *s, const void **ret_insns)
{
	*ret_insns = s ? s->insns : NULL;
	return s ? s->n_insns : 0;
}

unsigned cd_seccomp_state_unknown(const struct cd_backend_state *s)
{
	return s ? s->n_unknown : 0;
}

bool cd_seccomp_state_precompiled(const struct cd_backend_state *s)
{
	return s && s->precompiled;
}

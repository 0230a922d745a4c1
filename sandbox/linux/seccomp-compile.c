/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The seccomp filter compiler, run by seccomp-gen at build time and by the
 * backend when no precompiled program fits (see seccomp.h). It compiles the
 * plan's rule table with libseccomp and exports the BPF through a memfd
 * (Debian 12's libseccomp 2.5.4 has no seccomp_export_bpf_mem()).
 *
 * Architecture: the filter is for the native architecture only; every other
 * one (i386 through int 0x80, and so on) hits the bad-arch action, which is
 * KILL_PROCESS. On x86_64, libseccomp 2.5.4 also sends x32 system call
 * numbers (bit 30 set) to the bad-arch action when x32 is not in the filter
 * (checked with seccomp_export_pfc and by test-seccomp).
 *
 * libseccomp 2.5.4 rejects two comparisons on the same argument in one rule
 * (-EINVAL), so CD_SC_ARG_NOT_IN2 and CD_SC_ARG_MASKED_NOT_IN2 ("allow two
 * values, deny the rest") cannot be written with it (nor has it a masked
 * "not equal"). Those rules are compiled by hand into a short BPF prologue
 * placed in front of libseccomp's program: the prologue returns the rule's
 * action on a match and otherwise falls through into libseccomp's code,
 * which reloads everything it needs.
 */
#include <assert.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/linux/seccomp.h"

static uint32_t action_ret(enum cd_sc_action a)
{
	switch (a) {
	case CD_SC_EPERM:
		return SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
	case CD_SC_ENOSYS:
		return SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
	case CD_SC_ACTION_COUNT:
		break;
	}
	/* Unknown action: the strictest answer. */
	return SECCOMP_RET_KILL_PROCESS;
}

static int action_scmp(enum cd_sc_action a, uint32_t *ret)
{
	switch (a) {
	case CD_SC_EPERM:
		*ret = SCMP_ACT_ERRNO(EPERM);
		return 0;
	case CD_SC_ENOSYS:
		*ret = SCMP_ACT_ERRNO(ENOSYS);
		return 0;
	case CD_SC_ACTION_COUNT:
		break;
	}
	return -EINVAL;
}

/* ---- hand-written prologue for CD_SC_ARG_NOT_IN2 and CD_SC_ARG_MASKED_NOT_IN2 ---- */

#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i)))
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LO_OFF 0
#define HI_OFF 4
#else
#define LO_OFF 4
#define HI_OFF 0
#endif

struct insn_buf {
	struct sock_filter *v;
	size_t n, cap;
};

static void emit(struct insn_buf *b, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 32;
		b->v = cd_xreallocarray(b->v, b->cap, sizeof(*b->v));
	}
	b->v[b->n++] = (struct sock_filter){ .code = code, .jt = jt, .jf = jf, .k = k };
}

/* Point the jt (or jf) of the jump at `at` to instruction `target`, further on. */
static void jump_to(struct insn_buf *b, size_t at, bool jt, size_t target)
{
	size_t d = target - at - 1;

	/* The blocks below are at most 15 instructions long. */
	assert(target > at && d <= 255);
	if (jt)
		b->v[at].jt = (uint8_t)d;
	else
		b->v[at].jf = (uint8_t)d;
}

/* Load one 32-bit half of the argument and mask it; false (nothing emitted) for an empty mask. */
static bool emit_load_half(struct insn_buf *b, uint32_t off, uint32_t mask)
{
	if (mask == 0)
		return false;
	emit(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, off);
	if (mask != 0xffffffffU)
		emit(b, BPF_ALU | BPF_AND | BPF_K, 0, 0, mask);
	return true;
}

/*
 * One (MASKED_)NOT_IN2 rule, entered with A = syscall number and left (when
 * it does not match) with A = syscall number. Unmasked (mask all ones), 12
 * instructions:
 *
 *   0  jeq nr          ? 1 : 11
 *   1  ld  arg.hi
 *   2  jeq hi(v1)      ? 3 : 5
 *   3  ld  arg.lo
 *   4  jeq lo(v1)      ? 10 : 5
 *   5  ld  arg.hi
 *   6  jeq hi(v2)      ? 7 : 9
 *   7  ld  arg.lo
 *   8  jeq lo(v2)      ? 10 : 9
 *   9  ret action
 *  10  ld  nr
 *  11  (next rule)
 *
 * A mask adds an "and" after a load of a half it does not keep whole, and
 * drops the load and compare of a half it clears (the socket type: only the
 * low half, "ld arg.lo; and 0xf; jeq v ? ok : next" per value).
 */
static void emit_not_in2(struct insn_buf *b, int nr, const struct cd_sc_rule *r, uint64_t mask)
{
	const uint64_t allowed[2] = { r->value, r->value2 };
	uint32_t lo = ARG_LO(r->arg) + LO_OFF, hi = ARG_LO(r->arg) + HI_OFF;
	size_t first = b->n, hit[2], miss[2][2], n_miss[2] = { 0, 0 };

	emit(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint32_t)nr);
	for (size_t i = 0; i < 2; i++) {
		if (i > 0)
			for (size_t m = 0; m < n_miss[i - 1]; m++)
				jump_to(b, miss[i - 1][m], false, b->n);
		if (emit_load_half(b, hi, (uint32_t)(mask >> 32))) {
			emit(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint32_t)(allowed[i] >> 32));
			miss[i][n_miss[i]++] = b->n - 1;
		}
		if (emit_load_half(b, lo, (uint32_t)mask)) {
			emit(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint32_t)allowed[i]);
			miss[i][n_miss[i]++] = b->n - 1;
		}
		/* The last compare of a value: equal means allowed. */
		hit[i] = b->n - 1;
	}
	for (size_t m = 0; m < n_miss[1]; m++)
		jump_to(b, miss[1][m], false, b->n);
	emit(b, BPF_RET | BPF_K, 0, 0, action_ret(r->action));
	for (size_t i = 0; i < 2; i++)
		jump_to(b, hit[i], true, b->n);
	emit(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
	jump_to(b, first, false, b->n);
}

/*
 * Architectures whose new system calls (Linux 5.1 on) take the unified
 * numbers of cd_sc_rule.nr_unified: all that libseccomp knows but the mips
 * ABIs (offset by 4000, 5000 or 6000). x32 numbers are killed anyway.
 */
static bool arch_has_unified_numbers(uint32_t arch)
{
	switch (arch) {
	case SCMP_ARCH_MIPS:
	case SCMP_ARCH_MIPS64:
	case SCMP_ARCH_MIPS64N32:
	case SCMP_ARCH_MIPSEL:
	case SCMP_ARCH_MIPSEL64:
	case SCMP_ARCH_MIPSEL64N32:
	case SCMP_ARCH_X32:
		return false;
	default:
		return true;
	}
}

static int add_rule(scmp_filter_ctx ctx, struct insn_buf *pro, const struct cd_sc_rule *r,
		    unsigned *n_unknown, char **reterr)
{
	struct scmp_arg_cmp cmp;
	uint32_t act;
	int nr, k;

	nr = seccomp_syscall_resolve_name(r->syscall);
	/*
	 * A name this libseccomp does not know yet (older than the call): by
	 * its unified number where the architecture has them, else skipped and
	 * counted (the kernel may have the call: a gap the tests show).
	 */
	if (nr == __NR_SCMP_ERROR && r->nr_unified > 0 &&
	    arch_has_unified_numbers(seccomp_arch_native()))
		nr = r->nr_unified;
	if (nr == __NR_SCMP_ERROR) {
		(*n_unknown)++;
		return 0;
	}
	/* Negative pseudo numbers: the call does not exist on this architecture (fcntl64). */
	if (nr < 0)
		return 0;
	if (action_scmp(r->action, &act) < 0 || r->arg > 5) {
		*reterr = cd_xasprintf("seccomp: malformed rule for %s", r->syscall);
		return -EINVAL;
	}

	switch (r->cmp) {
	case CD_SC_ALWAYS:
		k = seccomp_rule_add_exact(ctx, act, nr, 0);
		break;
	case CD_SC_ARG_MASKED_EQ:
		cmp = (struct scmp_arg_cmp){ r->arg, SCMP_CMP_MASKED_EQ, r->mask, r->value };
		k = seccomp_rule_add_exact_array(ctx, act, nr, 1, &cmp);
		break;
	case CD_SC_ARG_NE:
		cmp = (struct scmp_arg_cmp){ r->arg, SCMP_CMP_NE, r->value, 0 };
		k = seccomp_rule_add_exact_array(ctx, act, nr, 1, &cmp);
		break;
	case CD_SC_ARG_MASKED_ANY:
		/* (arg & mask) != 0 as one MASKED_EQ(bit, bit) rule per bit; the rules are OR-ed. */
		if (r->mask == 0) {
			*reterr =
				cd_xasprintf("seccomp: empty mask in the rule for %s", r->syscall);
			return -EINVAL;
		}
		k = 0;
		for (unsigned b = 0; b < 64 && k >= 0; b++) {
			uint64_t bit = 1ULL << b;

			if (!(r->mask & bit))
				continue;
			cmp = (struct scmp_arg_cmp){ r->arg, SCMP_CMP_MASKED_EQ, bit, bit };
			k = seccomp_rule_add_exact_array(ctx, act, nr, 1, &cmp);
		}
		break;
	case CD_SC_ARG_NOT_IN2:
		emit_not_in2(pro, nr, r, ~0ULL);
		k = 0;
		break;
	case CD_SC_ARG_MASKED_NOT_IN2:
		/* A value with bits outside the mask could never be allowed. */
		if (r->mask == 0 || (r->value & ~r->mask) || (r->value2 & ~r->mask)) {
			*reterr = cd_xasprintf(
				"seccomp: a value outside the mask in the rule for %s", r->syscall);
			return -EINVAL;
		}
		emit_not_in2(pro, nr, r, r->mask);
		k = 0;
		break;
	case CD_SC_CMP_COUNT:
	default:
		*reterr = cd_xasprintf("seccomp: unknown comparison kind %d for %s", (int)r->cmp,
				       r->syscall);
		return -EINVAL;
	}
	if (k < 0) {
		*reterr = cd_xasprintf("seccomp: cannot add the rule for %s: %s", r->syscall,
				       strerror(-k));
		return k;
	}
	return 0;
}

/* Export ctx's BPF through a memfd and append it to *b. */
static int export_bpf(scmp_filter_ctx ctx, struct insn_buf *b, char **reterr)
{
	off_t size;
	size_t n;
	int fd, r;

	fd = memfd_create("cordon-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		*reterr = cd_xasprintf("seccomp: memfd_create: %s", strerror(-r));
		return r;
	}
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0) {
		close(fd);
		*reterr = cd_xasprintf("seccomp: cannot export the filter: %s", strerror(-r));
		return r;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % sizeof(struct sock_filter) != 0) {
		close(fd);
		*reterr = cd_xasprintf("seccomp: libseccomp exported a malformed program");
		return -EIO;
	}
	n = (size_t)size / sizeof(struct sock_filter);
	b->v = cd_xreallocarray(b->v, b->n + n, sizeof(*b->v));
	b->cap = b->n + n;
	for (size_t done = 0; done < (size_t)size;) {
		ssize_t k =
			pread(fd, (char *)(b->v + b->n) + done, (size_t)size - done, (off_t)done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = k < 0 ? -errno : -EIO;
			close(fd);
			*reterr = cd_xasprintf("seccomp: cannot read the filter back: %s",
					       strerror(-r));
			return r;
		}
		done += (size_t)k;
	}
	close(fd);
	b->n += n;
	return 0;
}

int cd_seccomp_compile(cd_sc_when when, struct sock_filter **ret, size_t *ret_len,
		       unsigned *ret_unknown, char **reterr)
{
	struct insn_buf pro = { 0 };
	scmp_filter_ctx ctx;
	unsigned n_unknown = 0;
	int r;

	*ret = NULL;
	*ret_len = 0;
	*ret_unknown = 0;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		*reterr = cd_xasprintf("seccomp: seccomp_init failed");
		return -ENOMEM;
	}
	/* The supervisor sets no_new_privs itself (and so does apply). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (r >= 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/*
	 * A binary tree over the system call numbers instead of a linear
	 * chain: loading the filter costs the kernel one emulated run per
	 * system call number (to cache the ones always allowed), so a chain of
	 * 50 comparisons took 80 us of every sandboxed start; each system call
	 * the command makes also runs a few comparisons instead of up to 50.
	 */
	if (r >= 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0) {
		*reterr =
			cd_xasprintf("seccomp: cannot set the filter attributes: %s", strerror(-r));
		goto fail;
	}

	/*
	 * Prologue: anything not of the native architecture (or an x32 number)
	 * is left to libseccomp's code below, which kills it. The NOT_IN2
	 * blocks then run with A = nr.
	 */
	emit(&pro, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
	emit(&pro, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, seccomp_arch_native());
	emit(&pro, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));

	for (const struct cd_sc_rule *rule = cd_sc_rules; rule->syscall; rule++) {
		if (!(rule->when & when))
			continue;
		r = add_rule(ctx, &pro, rule, &n_unknown, reterr);
		if (r < 0)
			goto fail;
	}

	if (pro.n == 3) {
		/* No hand-written block: no prologue at all. */
		pro.n = 0;
	} else {
		/* Non-native arch: jump over the whole prologue (jf is 8 bits). */
		if (pro.n - 2 > 255) {
			*reterr = cd_xasprintf("seccomp: too many two-value rules");
			r = -E2BIG;
			goto fail;
		}
		pro.v[1].jf = (uint8_t)(pro.n - 2);
	}

	r = export_bpf(ctx, &pro, reterr);
	if (r < 0)
		goto fail;
	seccomp_release(ctx);
	if (pro.n > BPF_MAXINSNS) {
		free(pro.v);
		*reterr = cd_xasprintf("seccomp: the filter is too long (%zu instructions)", pro.n);
		return -E2BIG;
	}

	*ret = pro.v;
	*ret_len = pro.n;
	*ret_unknown = n_unknown;
	return 0;

fail:
	free(pro.v);
	seccomp_release(ctx);
	return r;
}

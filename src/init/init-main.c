/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cordon-init: the init of the pid namespace of a sandbox that `cordon
 * serve` starts (see init.h for why it is a program of its own). The
 * server's child executes it by descriptor once the sandbox is applied,
 * with the arguments init.h describes; it is pid 1 of the namespace and
 * already confined like the command. Run any other way, it refuses.
 *
 * Without a C library (CD_INIT_NOLIBC) this file also provides the
 * program's entry point and the few things the compiler may call on its
 * own: memcpy, memset and the stack protector's guard, seeded from the
 * kernel's AT_RANDOM bytes before any protected function runs.
 */
#ifndef CD_INIT_NOLIBC
#include "config.h"
#endif

#include "init/init-sys.h"
#include "init/init.h"

static bool streq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static void say(const char *msg)
{
	size_t n = 0;
	while (msg[n])
		n++;
	(void)cd_isys3(__NR_write, 2, msg, n);
}

/* A non-negative decimal int, or -1. */
static int parse_fd(const char *s)
{
	long v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 1000000)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return (int)v;
}

static int init_main(int argc, char **argv, char **envp)
{
	if (argc <= CD_INIT_ARGS || !streq(argv[1], CD_INIT_MAGIC) || cd_isys0(__NR_getpid) != 1) {
		say("cordon-init: the init of cordon's sandboxes, started by cordon serve; "
		    "not for direct use\n");
		return CD_EXIT_SETUP;
	}
	struct cd_init_args a = {
		.argv = argv + CD_INIT_ARGS,
		.envp = envp,
		.file = argv[4],
		.report_fd = parse_fd(argv[2]),
	};
	bool search = false;
	for (const char *f = argv[3]; *f; f++) {
		if (*f == 't')
			a.tty = true;
		else if (*f == 'p')
			search = true;
	}
	a.path = search ? argv[5] : NULL;
	if (a.report_fd < 0) {
		say("cordon-init: bad arguments\n");
		return CD_EXIT_SETUP;
	}
	/* The supervisor cleared it so that the descriptor survived our exec. */
	long r = cd_isys3(__NR_fcntl, a.report_fd, F_SETFD, FD_CLOEXEC);
	if (r < 0)
		cd_init_fail(a.report_fd, CD_EXIT_SETUP, (int)-r, "pid namespace init",
			     "report descriptor");
	cd_init_run(&a);
}

#ifdef CD_INIT_NOLIBC

#if defined(__has_attribute)
#if __has_attribute(no_stack_protector)
#define NO_STACK_PROTECTOR __attribute__((no_stack_protector))
#endif
#endif
#ifndef NO_STACK_PROTECTOR
#define NO_STACK_PROTECTOR __attribute__((optimize("no-stack-protector")))
#endif

#define CD_AT_NULL   0
#define CD_AT_RANDOM 25

/*
 * What the compiler may call on its own (it turns loops like those of
 * init.c into such calls). Through volatile pointers, so that these loops
 * are not turned into calls to themselves.
 */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
_Noreturn void __stack_chk_fail(void);
_Noreturn void cd_init_start(long *sp);

void *memcpy(void *dst, const void *src, size_t n)
{
	return memmove(dst, src, n);
}

void *memmove(void *dst, const void *src, size_t n)
{
	volatile unsigned char *d = dst;
	const volatile unsigned char *s = src;
	if (d < s)
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	else
		while (n--)
			d[n] = s[n];
	return dst;
}

void *memset(void *dst, int c, size_t n)
{
	volatile unsigned char *d = dst;
	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)c;
	return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return x[i] - y[i];
	return 0;
}

size_t strlen(const char *s)
{
	const volatile char *p = s;
	size_t n = 0;
	while (p[n])
		n++;
	return n;
}

_Noreturn void __stack_chk_fail(void)
{
	for (;;)
		(void)cd_isys1(__NR_exit_group, CD_EXIT_SETUP);
}

#if defined(__x86_64__)
/*
 * x86_64 reads the guard at %fs:0x28: a thread control block of our own,
 * its first word pointing at itself as the ABI wants.
 */
static unsigned long tcb[8] __attribute__((aligned(64)));
#define ARCH_SET_FS 0x1002

static NO_STACK_PROTECTOR void set_guard(unsigned long guard)
{
	tcb[0] = (unsigned long)tcb;
	tcb[5] = guard;
	(void)cd_isys2(__NR_arch_prctl, ARCH_SET_FS, tcb);
}

__asm__(".text\n"
	".global _start\n"
	".type _start,@function\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call cd_init_start\n"
	"	hlt\n");
#elif defined(__aarch64__)
/* aarch64 reads the guard from this global. */
uintptr_t __stack_chk_guard;

static NO_STACK_PROTECTOR void set_guard(unsigned long guard)
{
	__stack_chk_guard = guard;
}

__asm__(".text\n"
	".global _start\n"
	".type _start,%function\n"
	"_start:\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	mov x0, sp\n"
	"	bl cd_init_start\n"
	"	brk #0\n");
#endif

/* The kernel's initial stack: argc, argv..., NULL, envp..., NULL, auxv pairs. */
NO_STACK_PROTECTOR _Noreturn void cd_init_start(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	char **e = envp;
	while (*e)
		e++;
	unsigned long guard = 0x5a17c0de9e3779b9ul;
	for (unsigned long *av = (unsigned long *)(e + 1); av[0] != CD_AT_NULL; av += 2) {
		if (av[0] == CD_AT_RANDOM) {
			const unsigned char *rnd = (const unsigned char *)av[1];
			guard = 0;
			for (int i = 0; i < 8; i++)
				guard = guard << 8 | rnd[i];
			/* A zero byte first, as glibc does, stops string overflows at it. */
			guard &= ~0xfful;
		}
	}
	set_guard(guard);
	int code = init_main(argc, argv, envp);
	for (;;)
		(void)cd_isys1(__NR_exit_group, code);
}

#else /* !CD_INIT_NOLIBC */

int main(int argc, char **argv, char **envp)
{
	return init_main(argc, argv, envp);
}

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The system calls of init.c, as static inline functions returning the
 * result or -errno (never touching errno).
 *
 * With CD_INIT_NOLIBC (cordon-init on x86_64 and aarch64): raw system call
 * instructions and the kernel's uapi headers, no C library at all. A
 * static glibc program spends about 0.35 ms of its start in the library's
 * own initialisation here (CPU feature probing traps on a virtual machine),
 * which every sandboxed `cordon serve` start would pay; without it the
 * program's exec costs what the kernel's does (about 0.05 ms).
 *
 * Otherwise: the C library's syscall(2). cd_init_spawn() is then vfork():
 * the init that calls it is a fork of cordon, whose page tables a fork
 * would copy once more. Without a C library it is a fork of a process of
 * a few pages (vfork cannot be written safely in C).
 */

#include <stddef.h>
#include <stdint.h>

#ifdef CD_INIT_NOLIBC
#include <asm/ioctls.h>
#include <asm/signal.h>
#include <asm/unistd.h>
#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/prctl.h>
#include <linux/signalfd.h>
#include <linux/wait.h>
#else
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef FD_CLOEXEC
#define FD_CLOEXEC 1
#endif

/* waitpid status words, as the kernel makes them. */
#define CD_WTERMSIG(s)	  ((s)&0x7f)
#define CD_WIFSIGNALED(s) (CD_WTERMSIG(s) != 0 && CD_WTERMSIG(s) != 0x7f)
#define CD_WEXITSTATUS(s) (((s) >> 8) & 0xff)

#ifdef CD_INIT_NOLIBC

#if defined(__x86_64__)
static inline long cd_isys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
static inline long cd_isys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory", "cc");
	return x0;
}
#else
#error "CD_INIT_NOLIBC is for x86_64 and aarch64 (configure decides)"
#endif

/* The kernel's sigset_t: one word of 64 signals on both architectures. */
typedef uint64_t cd_isigset;
#define CD_ISIGSET_SIZE 8

static inline void cd_isig_empty(cd_isigset *s)
{
	*s = 0;
}

static inline void cd_isig_add(cd_isigset *s, int sig)
{
	*s |= (uint64_t)1 << (sig - 1);
}

/*
 * fork(): a copy of our few pages (see the top). The pid, 0 in the child,
 * or -errno; cd_init_spawn_errno() gives the errno of a failure.
 */
#define cd_init_spawn()	       ((int)cd_isys6(__NR_clone, SIGCHLD, 0, 0, 0, 0, 0))
#define cd_init_spawn_errno(r) (-(r))

#else /* !CD_INIT_NOLIBC */

static inline long cd_isys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r = syscall(n, a, b, c, d, e, f);
	return r < 0 ? -errno : r;
}

typedef sigset_t cd_isigset;
#define CD_ISIGSET_SIZE	       (_NSIG / 8)

static inline void cd_isig_empty(cd_isigset *s)
{
	sigemptyset(s);
}

static inline void cd_isig_add(cd_isigset *s, int sig)
{
	sigaddset(s, sig);
}

/*
 * vfork(): it must be called from the function the child then goes on in,
 * hence a macro. The pid, 0 in the child, or -1 with errno.
 */
#define cd_init_spawn()	       ((int)vfork())
#define cd_init_spawn_errno(r) (errno)
#endif /* CD_INIT_NOLIBC */

#define cd_isys0(n)		cd_isys6((n), 0, 0, 0, 0, 0, 0)
#define cd_isys1(n, a)		cd_isys6((n), (long)(a), 0, 0, 0, 0, 0)
#define cd_isys2(n, a, b)	cd_isys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define cd_isys3(n, a, b, c)	cd_isys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define cd_isys4(n, a, b, c, d) cd_isys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define cd_isys5(n, a, b, c, d, e) \
	cd_isys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CORDON_TEST_EVENTS and CORDON_TEST_HOLD (see testhook.h). Events come
 * from the loop and from the workers: one line, one send() under a lock.
 * The socket blocks: a test that stops reading stops the server, which is
 * what a test wants rather than events lost. Held workers read the test's
 * "release" lines in turn (one reads while the others wait on the
 * condition), and look at their cancel flag every HOLD_POLL_MS.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "serve/testhook.h"
#include "shared/fd-util.h"
#include "shared/log.h"

#define HOLD_POLL_MS 20
#define EVENT_MAX    1024

static int hook_fd = -1;
static char *held_methods; /* owned: ",fs/copy,fs/writeFile," */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

/* The release lines read so far and not yet taken by their held job. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static char **released; /* owned, each owned: "conn=N id=ID" */
static size_t n_released;
static bool reading;
static bool test_gone; /* end of the test's side: nothing held waits any more */
static char inbuf[4096];
static size_t inlen;

int cd_testhook_init(void)
{
	const char *path = getenv("CORDON_TEST_EVENTS");
	const char *hold = getenv("CORDON_TEST_HOLD");
	if (hold && *hold && !(path && *path)) {
		cd_log_error("serve: CORDON_TEST_HOLD needs CORDON_TEST_EVENTS (where the "
			     "test releases what is held)");
		return -1;
	}
	if (!path || !*path)
		return 0;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path)) {
		cd_log_error("serve: CORDON_TEST_EVENTS: '%s' is too long for a unix socket", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	int fd = cd_socket(AF_UNIX, SOCK_STREAM, 0, false);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		cd_log_error("serve: CORDON_TEST_EVENTS: cannot connect to '%s': %s", path,
			     strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	hook_fd = fd;
	if (hold && *hold)
		held_methods = cd_xasprintf(",%s,", hold);
	cd_testhook_event("hooks pid=%ld hold=%s", (long)getpid(), hold && *hold ? hold : "-");
	return 0;
}

bool cd_testhook_on(void)
{
	return hook_fd >= 0;
}

void cd_testhook_event(const char *fmt, ...)
{
	if (hook_fd < 0)
		return;
	char line[EVENT_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	pthread_mutex_lock(&write_lock);
	for (size_t done = 0; done < (size_t)n;) {
		ssize_t w = send(hook_fd, line + done, (size_t)n - done, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* the test went away: nobody to tell */
		done += (size_t)w;
	}
	pthread_mutex_unlock(&write_lock);
}

bool cd_testhook_holds(const char *method)
{
	if (!held_methods)
		return false;
	char *want = cd_xasprintf(",%s,", method);
	bool r = strstr(held_methods, want) != NULL;
	free(want);
	return r;
}

/* Called with hold_lock held: take key's release if it came. */
static bool take_release(const char *key)
{
	for (size_t i = 0; i < n_released; i++) {
		if (strcmp(released[i], key) != 0)
			continue;
		free(released[i]);
		released[i] = released[--n_released];
		return true;
	}
	return false;
}

/* Called with hold_lock held, and drops it while it waits: read what the test wrote. */
static void read_releases(void)
{
	reading = true;
	pthread_mutex_unlock(&hold_lock);
	struct pollfd pfd = { .fd = hook_fd, .events = POLLIN };
	ssize_t n = 0;
	if (poll(&pfd, 1, HOLD_POLL_MS) > 0)
		n = recv(hook_fd, inbuf + inlen, sizeof(inbuf) - 1 - inlen, MSG_DONTWAIT);
	pthread_mutex_lock(&hold_lock);
	reading = false;
	if (n > 0)
		inlen += (size_t)n;
	else if (n == 0 && (pfd.revents & (POLLIN | POLLHUP)))
		test_gone = true;
	char *nl;
	while ((nl = memchr(inbuf, '\n', inlen))) {
		*nl = '\0';
		static const char verb[] = "release ";
		if (!strncmp(inbuf, verb, sizeof(verb) - 1)) {
			released = cd_xreallocarray(released, n_released + 1, sizeof(*released));
			released[n_released++] = cd_xstrdup(inbuf + sizeof(verb) - 1);
		}
		size_t used = (size_t)(nl - inbuf) + 1;
		memmove(inbuf, nl + 1, inlen - used);
		inlen -= used;
	}
	if (inlen == sizeof(inbuf) - 1)
		inlen = 0; /* a line longer than any key: not ours */
	pthread_cond_broadcast(&hold_cond);
}

void cd_testhook_hold(const char *key, const char *method, const atomic_bool *cancel)
{
	cd_testhook_event("fs-held %s method=%s", key, method);
	pthread_mutex_lock(&hold_lock);
	while (!take_release(key) && !atomic_load(cancel) && !test_gone) {
		if (!reading) {
			read_releases();
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += HOLD_POLL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&hold_cond, &hold_lock, &ts);
	}
	pthread_mutex_unlock(&hold_lock);
}

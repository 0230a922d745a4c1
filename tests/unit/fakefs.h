/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * An in-memory file tree behind struct cd_fs_ops, for unit tests of the
 * plan and its consumers. Nodes are directories, regular files (with
 * contents), symlinks (with a target) and "other" (device, fifo, socket).
 * "/" always exists. Lookups behave like the kernel's: intermediate
 * symlinks are followed (at most 40), a missing component or a
 * non-directory in the middle reads as missing.
 *
 * The builders abort on misuse (a test bug): creating a node whose parent
 * is not a directory, or a node of a different kind where one exists.
 * Parents are created as directories (mkdir -p) as needed.
 */

#include <stdint.h>

#include "core/plan.h"

struct cd_fakefs;

struct cd_fakefs *cd_fakefs_new(void);
/* NULL-safe; returns NULL. */
struct cd_fakefs *cd_fakefs_free(struct cd_fakefs *fs);

/* mkdir -p. Creating an existing directory is fine. */
void cd_fakefs_dir(struct cd_fakefs *fs, const char *path);
/* A regular file with contents (copied; NULL means empty). Replaces an existing file. */
void cd_fakefs_file(struct cd_fakefs *fs, const char *path, const char *contents);
/* A regular file holding len bytes of data (NULs included). */
void cd_fakefs_file_bytes(struct cd_fakefs *fs, const char *path, const void *data, size_t len);
/*
 * A sparse regular file of size bytes: len bytes of data, then zeros (only
 * open_file and read_at see the zeros; read_file reads the data alone).
 */
void cd_fakefs_file_sparse(struct cd_fakefs *fs, const char *path, const void *data, size_t len,
			   uint64_t size);
/* A symlink holding target verbatim (relative or absolute). */
void cd_fakefs_symlink(struct cd_fakefs *fs, const char *path, const char *target);
/* A device, fifo or socket. */
void cd_fakefs_other(struct cd_fakefs *fs, const char *path);
/* An existing directory the caller may not create names in (may_create says false). */
void cd_fakefs_lock_dir(struct cd_fakefs *fs, const char *path);
/* Make every shim call on exactly this path fail with -err (e.g. EACCES), but may_create. */
void cd_fakefs_fail(struct cd_fakefs *fs, const char *path, int err);

/* The shim; valid until cd_fakefs_free. */
const struct cd_fs_ops *cd_fakefs_ops(struct cd_fakefs *fs);
/* Number of shim calls made so far (every operation). */
unsigned cd_fakefs_calls(const struct cd_fakefs *fs);
/* Bytes read so far through read_at (the file reads at offsets). */
size_t cd_fakefs_bytes_read(const struct cd_fakefs *fs);
/* Files opened with open_file and not closed yet. */
int cd_fakefs_open_files(const struct cd_fakefs *fs);

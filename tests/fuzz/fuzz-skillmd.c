/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The SKILL.md front-matter reader (core/skillmd.c). Beyond "no crash, no
 * leak": an accepted file gives a name of 1 to 64 characters and a
 * non-empty description, each with no leading, trailing or doubled space
 * and no other white space; a refusal fills nothing and says why. The same
 * bytes are read as an agents/openai.yaml too (cd_skillmd_agents).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/skillmd.h"
#include "fuzz.h"

static void check_line(const char *s)
{
	size_t n = strlen(s);
	fuzz_assert(n > 0 && s[0] != ' ' && s[n - 1] != ' ' && !strstr(s, "  "));
	for (size_t i = 0; i < n; i++)
		fuzz_assert(s[i] != '\t' && s[i] != '\n' && s[i] != '\r');
}

/* The same bytes as an agents/openai.yaml: JSON objects or nothing; a refusal says why. */
static void check_agents(const char *s, size_t n)
{
	char *deps = (char *)1, *pol = (char *)1;
	const char *why = NULL;
	int r = cd_skillmd_agents(s, n, &deps, &pol, &why);
	if (r != CD_SKILLMD_OK) {
		fuzz_assert(r == CD_SKILLMD_INVALID || r == CD_SKILLMD_UNSUPPORTED);
		fuzz_assert(why && why[0] && !deps && !pol);
		return;
	}
	fuzz_assert(!deps || !strncmp(deps, "{\"tools\":[{", 11));
	fuzz_assert(!pol || !strncmp(pol, "{\"allowImplicitInvocation\":", 27));
	free(deps);
	free(pol);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cd_skillmd m;
	check_agents((const char *)data, size);
	const char *why = NULL;
	int r = cd_skillmd_parse((const char *)data, size, "dir  name", &m, &why);
	if (r != CD_SKILLMD_OK) {
		fuzz_assert(r == CD_SKILLMD_INVALID || r == CD_SKILLMD_UNSUPPORTED);
		fuzz_assert(why && why[0]);
		fuzz_assert(!m.name && !m.description && !m.short_description);
		return 0;
	}
	check_line(m.name);
	check_line(m.description);
	if (m.short_description)
		check_line(m.short_description);
	size_t chars = 0;
	for (const char *p = m.name; *p; p++)
		chars += ((unsigned char)*p & 0xc0) != 0x80;
	fuzz_assert(chars >= 1 && chars <= CD_SKILLMD_MAX_NAME);
	cd_skillmd_done(&m);
	return 0;
}

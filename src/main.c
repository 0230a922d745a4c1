/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
int main(void)
{
	puts("placeholder");
	return 0;
}

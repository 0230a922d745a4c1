/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* config.h of the Windows build (cordon.exe, mingw-w64): what the sources ask of configure. */
#pragma once
#define PACKAGE_NAME	"cordon"
#define PACKAGE_VERSION CD_WIN_VERSION

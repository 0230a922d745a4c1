#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# How the git indexes here were made (git 2.39), for tests/unit/test-gitindex.c:
# a.txt, lib/b.txt and two gitlinks (lib/s1, s2) in index versions 2, 3 (a.txt
# skip-worktree, so an extended entry), 4; a split index whose main file replaces
# lib/b.txt (a file in the shared index) and s2 with gitlinks; a SHA-256
# repository with one gitlink (m/sub). Run it in an empty directory.
set -eu
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
S1=1639a46970b2913f90a8410767bc46a910c7a80d
S2=6d54c1017f9f6b40a0358ed4a194f00bbe3f702c
git init -q g
cd g
echo a >a.txt
mkdir lib
echo b >lib/b.txt
git add .
git update-index --add --cacheinfo 160000,$S1,lib/s1 --cacheinfo 160000,$S1,s2
git update-index --index-version 2
cp .git/index ../v2.idx
git update-index --index-version 3
git update-index --skip-worktree a.txt
cp .git/index ../v3.idx
git update-index --no-skip-worktree a.txt
git update-index --index-version 4
cp .git/index ../v4.idx
git update-index --index-version 2
git update-index --split-index
git update-index --cacheinfo 160000,$S1,lib/b.txt --cacheinfo 160000,$S2,s2
cp .git/index ../split.idx
cp .git/sharedindex.* ../split-shared.idx
cd ..
git init -q --object-format=sha256 g256
cd g256
echo a >a.txt
git add a.txt
git update-index --add --cacheinfo 160000,$(printf 'ab%.0s' $(seq 32)),m/sub
cp .git/index ../sha256.idx

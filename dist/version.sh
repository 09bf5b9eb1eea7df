#!/bin/sh
# Prints the version oxsupervise is built as, usable as a Debian version:
# from `git describe` (tag v1.2.3 -> 1.2.3; 4 commits later ->
# 1.2.3+4.gHASH), or 0~gitYYYYMMDD.HASH without a tag; +dirty when the
# work tree has changes. $VERSION, when set, wins.
set -eu
if [ -n "${VERSION:-}" ]; then
	echo "$VERSION"
	exit 0
fi
cd "$(dirname "$0")/.."
if ! hash=$(git rev-parse --short HEAD 2>/dev/null); then
	echo "0~unknown"
	exit 0
fi
dirty=""
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty="+dirty"
fi
if d=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
	# v1.2.3-4-gabc1234 -> 1.2.3+4.gabc1234
	d=$(printf '%s' "${d#v}" | sed -E 's/-([0-9]+)-(g[0-9a-f]+)$/+\1.\2/')
else
	d="0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$hash"
fi
echo "$d$dirty"

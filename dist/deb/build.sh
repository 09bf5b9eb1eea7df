#!/bin/sh
# make deb: builds OUT/oxsupervise_VERSION_ARCH.deb (oxsupervise and its
# COMPANIONS, the Makefile's list, in /usr/libexec/oxsupervise) with the standard tools
# (go build, dpkg-shlibdeps, dpkg-deb --root-owner-group) and prints its
# path. OUT is $DEBDIR or bin/. VERSION comes from dist/version.sh; the
# page dates and file times from SOURCE_DATE_EPOCH (default: the last
# commit's time), so that two builds of one commit are byte-identical.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
cd "$src"
GO=${GO:-go}
: "${COMPANIONS:?COMPANIONS= the programs beside oxsupervise (make deb passes the Makefile list)}"
OUT=${DEBDIR:-$src/bin}
VERSION=$(dist/version.sh)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
ARCH=$(dpkg --print-architecture)
umask 022

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/root
mkdir -m 0755 "$stage"

# STATIC (the Makefile's list) are built without cgo: oxsupervise and the
# session launcher start for every session and client request, and a
# static program skips the dynamic loader and libc's start
# (dist/deb/lintian-overrides says so to lintian). oxsupervise asks NSS
# through getent (libc-bin, essential) for users /etc/passwd lacks
# (internal/account). The others keep cgo and Debian's hardening:
# position-independent, full RELRO, bind now.
: "${STATIC:?STATIC= the programs built without cgo (make deb passes the Makefile list)}"
for p in oxsupervise $COMPANIONS; do
	case " $STATIC " in
	*" $p "*) CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$work/$p" "./cmd/$p" ;;
	*) "$GO" build -trimpath -buildmode=pie \
		-ldflags "-s -w -X main.version=$VERSION -extldflags '-Wl,-z,relro -Wl,-z,now'" \
		-o "$work/$p" "./cmd/$p" ;;
	esac
done
"$GO" run ./internal/clidoc/cmd/clidoc --bin "$work/oxsupervise" --version "$VERSION" \
	--date "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" --out "$work/doc"

BIN=$work/oxsupervise COMPANIONS=$COMPANIONS DOCGEN=$work/doc DESTDIR=$stage PREFIX=/usr UNITDIR=/lib/systemd/system GZIP_MAN=1 \
	dist/install.sh
# The postinst creates the audit log directory (0700): dpkg would
# otherwise own it, and lintian expects 0755 for shipped directories.
rmdir "$stage/var/log/oxsupervise" "$stage/var/log" "$stage/var"

doc=$stage/usr/share/doc/oxsupervise
install -d -m 0755 "$stage/usr/share/lintian/overrides"
install -m 0644 dist/deb/lintian-overrides "$stage/usr/share/lintian/overrides/oxsupervise"
install -m 0644 dist/deb/copyright "$doc/copyright"
sed -e "s|@VERSION@|$VERSION|" -e "s|@REVISION@|$(git rev-parse --short HEAD 2>/dev/null || echo unknown)|" \
	-e "s|@DATE@|$(date -u -R -d "@$SOURCE_DATE_EPOCH")|" dist/deb/changelog.in | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Shared-library dependencies as dpkg-shlibdeps finds them (libc6 for the
# cgo daemon, which resolves users and groups through NSS; none for the
# static programs), plus deb-systemd-helper for the maintainer scripts.
mkdir "$work/shlibs" "$work/shlibs/debian"
printf 'Source: oxsupervise\n\nPackage: oxsupervise\nArchitecture: any\n' >"$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$stage/usr/bin/oxsupervise" \
	$(for c in $COMPANIONS; do echo "$stage/usr/libexec/oxsupervise/$c"; done) 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
depends="init-system-helpers (>= 1.54~)${shlibs:+, $shlibs}"

mkdir -m 0755 "$stage/DEBIAN"
(cd "$stage" && find etc -type f | sort | sed 's|^|/|') >"$stage/DEBIAN/conffiles"
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print | sed 's|^\./||' | sort | xargs md5sum) >"$stage/DEBIAN/md5sums"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$VERSION|" -e "s|@ARCH@|$ARCH|" -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" \
	dist/deb/control.in >"$stage/DEBIAN/control"
install -m 0755 dist/deb/postinst dist/deb/prerm dist/deb/postrm "$stage/DEBIAN/"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$OUT"
deb=$OUT/oxsupervise_${VERSION}_$ARCH.deb
dpkg-deb --build --root-owner-group -Zxz "$stage" "$deb" >/dev/null
echo "$deb"

#!/bin/sh
# Installs a built oxsupervise into DESTDIR/PREFIX (make install):
#
#   BIN=bin/oxsupervise COMPANIONS="oxsupervised" DOCGEN=DIR PREFIX=/usr/local DESTDIR= dist/install.sh
#
# BIN is the binary; COMPANIONS the names of the programs it executes
# (internal/companion; the Makefile's list), built beside BIN and
# installed in BINDIR/../libexec/oxsupervise, where oxsupervise looks for
# them; DOCGEN the output of internal/clidoc/cmd/clidoc (man pages,
# completions). The managed policy lives in /etc/oxsupervise
# whatever PREFIX is (the binary reads it there); an existing
# /etc/oxsupervise/policy.toml is never overwritten. GZIP_MAN=1
# compresses the man pages (Debian's layout). UNITDIR is where systemd
# looks for the unit (PREFIX/lib/systemd/system by default).
set -eu
: "${BIN:?BIN= the built binary}" "${COMPANIONS:?COMPANIONS= the names of the programs built beside BIN}" \
	"${DOCGEN:?DOCGEN= the clidoc output directory}"
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
BINDIR=${BINDIR:-$PREFIX/bin}
# Not a choice: companion.LibexecSubdir, relative to BINDIR.
LIBEXECDIR=$(dirname "$BINDIR")/libexec/oxsupervise
DATADIR=${DATADIR:-$PREFIX/share}
MANDIR=${MANDIR:-$DATADIR/man}
DOCDIR=${DOCDIR:-$DATADIR/doc/oxsupervise}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
src=$(cd "$(dirname "$0")/.." && pwd)

install -d -m 0755 "$DESTDIR$BINDIR" "$DESTDIR$LIBEXECDIR" "$DESTDIR$UNITDIR" "$DESTDIR$MANDIR/man1" "$DESTDIR$DOCDIR" \
	"$DESTDIR$DATADIR/bash-completion/completions" "$DESTDIR$DATADIR/zsh/vendor-completions" \
	"$DESTDIR$DATADIR/fish/vendor_completions.d" "$DESTDIR$SYSCONFDIR/oxsupervise/policy.d"
install -m 0755 "$BIN" "$DESTDIR$BINDIR/oxsupervise"
for c in $COMPANIONS; do
	install -m 0755 "$(dirname "$BIN")/$c" "$DESTDIR$LIBEXECDIR/$c"
done
# The unit names the binary where this install puts it.
sed "s|/usr/bin/oxsupervise|$BINDIR/oxsupervise|g" "$src/dist/systemd/oxsupervise.service" >"$DESTDIR$UNITDIR/oxsupervise.service"
chmod 0644 "$DESTDIR$UNITDIR/oxsupervise.service"
if [ ! -e "$DESTDIR$SYSCONFDIR/oxsupervise/policy.toml" ]; then
	install -m 0644 "$src/dist/policy/policy.toml" "$DESTDIR$SYSCONFDIR/oxsupervise/policy.toml"
fi
install -m 0644 "$src/dist/policy/README.policy.d" "$DESTDIR$SYSCONFDIR/oxsupervise/policy.d/README"
for page in "$DOCGEN"/man/man1/*.1; do
	install -m 0644 "$page" "$DESTDIR$MANDIR/man1/"
	if [ "${GZIP_MAN:-0}" = 1 ]; then
		gzip -9nf "$DESTDIR$MANDIR/man1/$(basename "$page")"
	fi
done
install -m 0644 "$DOCGEN/bash/oxsupervise" "$DESTDIR$DATADIR/bash-completion/completions/oxsupervise"
install -m 0644 "$DOCGEN/zsh/_oxsupervise" "$DESTDIR$DATADIR/zsh/vendor-completions/_oxsupervise"
install -m 0644 "$DOCGEN/fish/oxsupervise.fish" "$DESTDIR$DATADIR/fish/vendor_completions.d/oxsupervise.fish"
install -m 0644 "$src/README.md" "$src/docs/daemon.md" "$src/docs/audit-schema.md" "$DESTDIR$DOCDIR/"
# The audit log's directory: root only (systemd's LogsDirectoryMode agrees).
install -d -m 0700 "$DESTDIR/var/log/oxsupervise"

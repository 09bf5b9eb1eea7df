#!/usr/bin/env bash
# fetch-kernel.sh SUITE DEST: download Debian's linux-image-amd64 from SUITE
# (for example bookworm-backports) and unpack the kernel image, its config
# and its modules under DEST (DEST/boot/vmlinuz-V, DEST/lib/modules/V), for
# the kernel-test VM's second kernel (issue 20: both enforcement paths on
# more than one kernel, as cilium/ebpf tests on several).
#
# The archive is the one this machine already uses: the URI is taken from
# its own apt sources (the entry serving its release's main suite), never
# written into the repository. Nothing on the host changes: apt runs with a
# private source list, package lists and cache below DEST, and the package
# is unpacked with dpkg-deb -x, not installed.
set -euo pipefail

suite=${1:?usage: fetch-kernel.sh SUITE DEST}
dest=${2:?usage: fetch-kernel.sh SUITE DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

# Done already: one unpacked kernel with its modules.
if compgen -G "$dest/boot/vmlinuz-*" >/dev/null && compgen -G "$dest/lib/modules/*/kernel" >/dev/null; then
	echo "fetch-kernel: $(basename "$(ls "$dest"/boot/vmlinuz-* | head -1)") already in $dest"
	exit 0
fi

. /etc/os-release
codename=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}

# The URI and keyring of the entry that serves "$codename main": deb822
# files first (Debian 12's default), then one-line sources.list entries.
uri= keyring=
for f in /etc/apt/sources.list.d/*.sources; do
	[ -e "$f" ] || continue
	read -r uri keyring < <(awk -v want="$codename" '
		function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && comps ~ /(^| )main( |$)/ && uri != "") { print uri, (key == "" ? "-" : key); found = 1; exit } }
		/^[ \t]*$/ { flush(); types = suites = comps = uri = key = ""; next }
		/^[ \t]*#/ { next }
		tolower($1) == "types:" { $1 = ""; types = $0 }
		tolower($1) == "uris:" { uri = $2 }
		tolower($1) == "suites:" { $1 = ""; suites = $0 }
		tolower($1) == "components:" { $1 = ""; comps = $0 }
		tolower($1) == "signed-by:" { key = $2 }
		END { if (!found) flush() }' "$f") || true
	[ -n "$uri" ] && break
done
if [ -z "$uri" ] && [ -e /etc/apt/sources.list ]; then
	uri=$(awk -v want="$codename" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i+1) == want) { print $i; exit } }' /etc/apt/sources.list)
	keyring=-
fi
if [ -z "$uri" ]; then
	echo "fetch-kernel: no apt source of this machine serves '$codename main'; cannot derive where $suite lives" >&2
	exit 1
fi
[ "$keyring" = "-" ] && keyring=/usr/share/keyrings/debian-archive-keyring.gpg

apt_dir="$dest/.apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' "$uri" "$suite" "$keyring" >"$apt_dir/sources.sources"
: >"$apt_dir/status"
apt_opts=(
	-o "Dir::Etc::SourceList=-" -o "Dir::Etc::SourceParts=-"
	-o "Dir::Etc::sourcelist=$apt_dir/sources.sources"
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
	-o "Dir::State::status=$apt_dir/status"
	-o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
)
echo "fetch-kernel: $suite from $uri (derived from this machine's apt sources)"
apt-get "${apt_opts[@]}" -qq update
# The metapackage names the versioned image package it depends on.
image=$(apt-cache "${apt_opts[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
if [ -z "$image" ]; then
	echo "fetch-kernel: linux-image-amd64 in $suite depends on no versioned image package" >&2
	exit 1
fi
(cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download "$image")
dpkg-deb -x "$apt_dir"/debs/"$image"_*.deb "$dest"
ls "$dest"/boot/vmlinuz-* >/dev/null
rm -rf "$apt_dir/cache" "$apt_dir/lists"
echo "fetch-kernel: unpacked $image into $dest"

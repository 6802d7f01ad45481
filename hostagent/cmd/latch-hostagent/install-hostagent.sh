#!/bin/sh
# install-hostagent.sh: install latch-hostagent from a release (a directory
# or an http(s) URL holding .ci/release's output) on a machine without the
# Debian package.
#
#   install-hostagent.sh [--root DIR] [--arch amd64|arm64] [--version V] SOURCE
#
# It fetches SHA256SUMS and the files it needs, refuses any file whose
# checksum does not match (or that SHA256SUMS does not list), then installs
#
#   ROOT/usr/local/bin/latch-hostagent                 the binary (0755)
#   ROOT/etc/systemd/system/latch-hostagent.service    the unit (0644), running /usr/local/bin's binary
#   ROOT/etc/latch/latch-hostagent.yaml                the config, when the release ships one
#
# Each file is written only when it differs (a second run of the same
# release changes nothing and says so), through a temporary file and a
# rename. The config is the administrator's once installed: the checksum
# of the release's copy is recorded in
# ROOT/usr/local/lib/latch-hostagent/config.sha256; a newer release replaces
# the config only if it is still the copy the last run installed. A config
# changed on this machine is kept, the release's copy is written beside it
# as latch-hostagent.yaml.new, and the script exits 3.
#
# It never creates users and never starts or restarts the service; with
# ROOT / it runs `systemctl daemon-reload` when the unit changed and prints
# the commands that remain.
#
# Exit status: 0 installed or nothing to do; 1 a failure (nothing of the
# failing file was installed); 2 bad arguments; 3 installed, but a changed
# config was kept (merge latch-hostagent.yaml.new into it).
set -eu

root=/
arch=
version=
source=

usage() {
	echo "usage: install-hostagent.sh [--root DIR] [--arch amd64|arm64] [--version V] SOURCE (a release directory or http(s) URL)" >&2
	exit 2
}
die() {
	echo "install-hostagent: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--root) [ $# -ge 2 ] || usage; root=$2; shift 2 ;;
	--root=*) root=${1#--root=}; shift ;;
	--arch) [ $# -ge 2 ] || usage; arch=$2; shift 2 ;;
	--arch=*) arch=${1#--arch=}; shift ;;
	--version) [ $# -ge 2 ] || usage; version=$2; shift 2 ;;
	--version=*) version=${1#--version=}; shift ;;
	-h | --help) usage ;;
	-*) echo "install-hostagent: unknown option $1" >&2; usage ;;
	*) [ -z "$source" ] || usage; source=$1; shift ;;
	esac
done
[ -n "$source" ] || usage
[ -d "$root" ] || die "--root $root is not a directory: create it or pass the right one"

if [ -z "$arch" ]; then
	case $(uname -m) in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) die "no release for this machine's architecture $(uname -m): pass --arch amd64 or --arch arm64" ;;
	esac
fi
case $arch in amd64 | arm64) ;; *) die "--arch $arch: want amd64 or arm64" ;; esac
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found: install coreutils"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# fetch NAME: copy the release's file NAME into $tmp.
fetch() {
	case $source in
	http://* | https://*)
		url=${source%/}/$1
		if command -v curl >/dev/null 2>&1; then
			curl -fsSL --proto '=http,https' -o "$tmp/$1" "$url" || die "download $url failed: is the URL a release directory holding $1?"
		elif command -v wget >/dev/null 2>&1; then
			wget -q -O "$tmp/$1" "$url" || die "download $url failed: is the URL a release directory holding $1?"
		else
			die "neither curl nor wget is installed: install one, or download the release and pass its directory"
		fi
		;;
	*)
		[ -f "$source/$1" ] || die "$source/$1 not found: SOURCE must be a release directory (.ci/release OUT)"
		cp "$source/$1" "$tmp/$1"
		;;
	esac
}

# listed NAME: the checksum SHA256SUMS gives NAME ("" when absent).
listed() {
	awk -v n="$1" '{ f = $2; sub(/^\*/, "", f) } f == n { print $1; exit }' "$tmp/SHA256SUMS"
}

# verify NAME: fail unless NAME matches its SHA256SUMS line.
verify() {
	want=$(listed "$1")
	[ -n "$want" ] || die "SHA256SUMS does not list $1: refusing a file it does not vouch for"
	got=$(sha256sum "$tmp/$1" | cut -d' ' -f1)
	[ "$got" = "$want" ] || die "$1: checksum $got does not match SHA256SUMS ($want): the download is damaged or was tampered with; nothing was installed from it"
}

fetch SHA256SUMS
if [ -z "$version" ]; then
	# The one latch-hostagent binary for this architecture the release holds.
	names=$(awk '{ f = $2; sub(/^\*/, "", f); print f }' "$tmp/SHA256SUMS" | grep "^latch-hostagent_.*_linux_${arch}\$" || true)
	count=$(printf '%s' "$names" | grep -c . || true)
	[ "$count" = 1 ] || die "SHA256SUMS lists $count latch-hostagent binaries for linux/$arch, want exactly 1: pass --version"
	bin=$names
else
	bin=latch-hostagent_${version}_linux_${arch}
fi
fetch "$bin"
verify "$bin"
fetch latch-hostagent.service
verify latch-hostagent.service
config=
if [ -n "$(listed latch-hostagent.yaml)" ]; then
	fetch latch-hostagent.yaml
	verify latch-hostagent.yaml
	config=$tmp/latch-hostagent.yaml
fi

changed=0
kept=0
unit_changed=0
prefix=${root%/}

sum() { sha256sum "$1" | cut -d' ' -f1; }

# put SRC DEST MODE: install SRC as DEST unless DEST already has its bytes;
# did is 1 when it wrote DEST.
put() {
	did=0
	if [ -f "$2" ] && [ "$(sum "$1")" = "$(sum "$2")" ]; then
		echo "unchanged  $2"
		return 0
	fi
	what=installed
	[ ! -e "$2" ] || what=updated
	mkdir -p "$(dirname "$2")" || die "cannot create $(dirname "$2")"
	cp "$1" "$2.tmp.$$" || die "cannot write $2.tmp.$$"
	chmod "$3" "$2.tmp.$$" || die "cannot chmod $2.tmp.$$"
	mv -f "$2.tmp.$$" "$2" || die "cannot rename $2.tmp.$$ to $2"
	echo "$what  $2"
	did=1
	changed=1
}

put "$tmp/$bin" "$prefix/usr/local/bin/latch-hostagent" 0755
# The release's unit runs the packaged /usr/bin/latch-hostagent; this
# script installs into /usr/local/bin, so the unit it installs runs that.
sed 's#^ExecStart=/usr/bin/latch-hostagent #ExecStart=/usr/local/bin/latch-hostagent #' "$tmp/latch-hostagent.service" >"$tmp/unit" || die "cannot rewrite the unit's ExecStart"
grep -q '^ExecStart=/usr/local/bin/latch-hostagent ' "$tmp/unit" || die "the release's latch-hostagent.service has no ExecStart=/usr/bin/latch-hostagent line to point at /usr/local/bin"
put "$tmp/unit" "$prefix/etc/systemd/system/latch-hostagent.service" 0644
unit_changed=$did

if [ -n "$config" ]; then
	dest=$prefix/etc/latch/latch-hostagent.yaml
	record=$prefix/usr/local/lib/latch-hostagent/config.sha256
	new=$(sum "$config")
	last=
	[ ! -f "$record" ] || last=$(cat "$record")
	if [ ! -e "$dest" ] || [ "$(sum "$dest")" = "$new" ] || [ "$(sum "$dest")" = "$last" ]; then
		# Absent, already this release's, or still the copy we installed.
		put "$config" "$dest" 0644
		rm -f "$dest.new"
	else
		kept=1
		if [ -f "$dest.new" ] && [ "$(sum "$dest.new")" = "$new" ]; then
			echo "kept       $dest (changed on this machine; the release's copy is already at $dest.new)"
		else
			put "$config" "$dest.new" 0644 >/dev/null
			echo "kept       $dest (changed on this machine); the release's copy is at $dest.new: merge it"
		fi
	fi
	if [ "$last" != "$new" ]; then
		mkdir -p "$(dirname "$record")"
		echo "$new" >"$record"
	fi
fi

if [ "$changed" = 0 ] && [ "$kept" = 0 ]; then
	echo "install-hostagent: nothing changed: $bin is already installed under $root"
	exit 0
fi
if [ "$prefix" = "" ]; then
	if [ "$unit_changed" = 1 ] && command -v systemctl >/dev/null 2>&1; then
		systemctl daemon-reload || echo "install-hostagent: systemctl daemon-reload failed: run it before starting the service" >&2
	fi
	unit_user=$(sed -n 's/^User=//p' /etc/systemd/system/latch-hostagent.service | head -n 1)
	if [ -n "$unit_user" ] && ! id "$unit_user" >/dev/null 2>&1; then
		echo "install-hostagent: the unit runs as $unit_user, who does not exist here: create the account the control plane logs in as over SSH, or set User= in a drop-in (systemctl edit latch-hostagent)" >&2
	fi
	echo "next: systemctl enable --now latch-hostagent (or systemctl restart latch-hostagent after an upgrade: running commands keep running)"
fi
if [ "$kept" = 1 ]; then
	exit 3
fi

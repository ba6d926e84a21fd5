#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# build-fio.sh - a fio with the libiscsi engine, built from Debian's fio
# source (Debian's own fio package has no libiscsi engine), for
# bench/stripe-scaling.sh.  Prints the path of the fio binary on stdout.
#
# usage: bench/build-fio.sh [--cache DIR] [--rebuild]
#   --cache DIR   where the source, the build and the binary live (default
#                 $TAPSTRIPE_FIO_CACHE or /var/cache/tapstripe-fio); a fio
#                 built there before, that has the libiscsi engine, is
#                 reused without touching the network
#   --rebuild     build again even when a binary is there
#
# How: a private apt configuration in DIR/apt with a deb-src entry for
# every Debian deb entry of the machine (same URIs, suites, components and
# keyring; the machine's own sources and package lists are not changed),
# "apt-get update" on it, "apt-get source --download-only fio", the
# upstream tarball unpacked, then "./configure --enable-libiscsi && make".
#
# One patch: fio's libiscsi engine (3.33, and upstream still) declares
# itself FIO_SYNCIO although it queues commands asynchronously, so fio
# caps its iodepth at 1 ("queue depth will be capped at 1").  The flag is
# removed, so that --iodepth=N keeps N commands in flight per LUN like
# tapdisk's stripe driver does; fio's JSON "iodepth_level" then shows
# depth N.  A binary built without that patch is not reused.
# Installs the build dependencies it needs (build-essential, pkg-config,
# libiscsi-dev, zlib1g-dev, libaio-dev) with apt-get when they
# are missing.  Needs root for that and for the default cache directory.
# Progress goes to stderr, the binary's path alone to stdout.
set -eu
CACHE=${TAPSTRIPE_FIO_CACHE:-/var/cache/tapstripe-fio}
REBUILD=0

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--cache) CACHE=$2; shift ;;
	--rebuild) REBUILD=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "build-fio.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

say() { echo "build-fio.sh: $*" >&2; }
die() { say "$*"; exit 1; }

bin=$CACHE/bin/fio
STAMP="libiscsi engine, FIO_SYNCIO removed (v1)"
has_libiscsi() {
	[ -x "$1" ] && "$1" --enghelp 2>/dev/null | grep -qx '[[:space:]]*libiscsi' &&
		[ "$(cat "$1.stamp" 2>/dev/null)" = "$STAMP" ]
}

if [ "$REBUILD" = 0 ] && has_libiscsi "$bin"; then
	echo "$bin"
	exit 0
fi

mkdir -p "$CACHE" || die "cannot create $CACHE (run as root, or use --cache DIR)"
CACHE=$(cd "$CACHE" && pwd)
bin=$CACHE/bin/fio
# One build at a time per cache (td-bench and an operator may both ask).
exec 9>"$CACHE/.lock"
flock 9
if [ "$REBUILD" = 0 ] && has_libiscsi "$bin"; then
	echo "$bin"
	exit 0
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

# Build dependencies.
missing=()
for p in build-essential pkg-config libiscsi-dev zlib1g-dev libaio-dev; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
fi

# A private apt configuration: deb-src twins of the machine's Debian deb
# entries (deb822 .sources stanzas and one-line .list entries).
apt=$CACHE/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial"
python3 - "$apt/sources.list" <<'EOF'
import glob, re, sys
out = []
def debian(uri):
    return re.search(r"/debian(-security)?/?$", uri) is not None
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        f = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            k, v = line.split(":", 1)
            f[k.strip().lower()] = v.strip()
        if "deb" not in f.get("types", "").split() or f.get("enabled", "yes") == "no":
            continue
        opts = " [signed-by=%s]" % f["signed-by"] if f.get("signed-by", "").startswith("/") else ""
        for uri in f.get("uris", "").split():
            if debian(uri):
                for suite in f.get("suites", "").split():
                    out.append("deb-src%s %s %s %s" % (opts, uri, suite, f.get("components", "main")))
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        m = re.match(r"\s*deb\s+(\[[^]]*\]\s+)?(\S+)\s+(.*)", line)
        if m and debian(m.group(2)):
            out.append("deb-src %s%s %s" % (m.group(1) or "", m.group(2), m.group(3)))
if not out:
    sys.exit("no Debian deb entry in /etc/apt/sources.list{,.d}")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
say "deb-src entries: $(tr '\n' ';' <"$apt/sources.list")"
aptopts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=-"
	-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives"
	-o "APT::Sandbox::User=root")
say "apt-get update (private lists in $apt)"
apt-get "${aptopts[@]}" update -q >&2 || die "apt-get update of the deb-src entries failed"
src=$CACHE/src
rm -rf "$src"
mkdir -p "$src"
say "apt-get source --download-only fio"
(cd "$src" && apt-get "${aptopts[@]}" source --download-only fio >&2) ||
	die "apt-get source --download-only fio failed"
orig=$(ls "$src"/fio_*.orig.tar.* 2>/dev/null | head -1)
[ -n "$orig" ] || die "no fio_*.orig.tar.* in $src"
tar -C "$src" -xf "$orig"
dir=$(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'fio*' | head -1)
[ -n "$dir" ] || die "the fio tarball held no fio-* directory"
sed -i 's/= FIO_SYNCIO | FIO_DISKLESSIO/= FIO_DISKLESSIO/' "$dir/engines/libiscsi.c"
grep -q FIO_SYNCIO "$dir/engines/libiscsi.c" &&
	die "could not remove FIO_SYNCIO from $dir/engines/libiscsi.c (a new fio source?)"
say "building $(basename "$dir") with the libiscsi engine in $dir"
(cd "$dir" && ./configure --enable-libiscsi >"$CACHE/configure.log" 2>&1) ||
	die "configure failed; see $CACHE/configure.log"
grep -q '^iscsi engine *yes' "$CACHE/configure.log" ||
	die "configure found no libiscsi (libiscsi-dev, pkg-config); see $CACHE/configure.log"
(cd "$dir" && make -j"$(nproc)" >"$CACHE/make.log" 2>&1) ||
	die "make failed; see $CACHE/make.log"
mkdir -p "$CACHE/bin"
install -m 0755 "$dir/fio" "$bin.new"
mv "$bin.new" "$bin"
echo "$STAMP" >"$bin.stamp"
has_libiscsi "$bin" || die "$bin has no libiscsi engine"
say "built $("$bin" --version) with libiscsi: $bin"
echo "$bin"

#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# man-pages.sh - the man pages made at build time (tools/man/mkman.py) from
# the programs' --help, and every program's --version (issue #20).
#
# Cases, for tapdisk, tap-ctl, stripe-master, stripe-ctl, tapstripe-xenwatch
# (section 8), td-front and td-bench (section 1):
#   render    `man -l` and `groff -man -ww` render the page without a warning
#   sections  the page has NAME, SYNOPSIS, DESCRIPTION, SEE ALSO and option
#             entries
#   options   every long option that --help (or COMMAND --help, for each
#             command its COMMANDS list names) names is in the page, and every
#             one it describes is described there: fails when the page and
#             --help drift
#   version   PROG --version prints "PROG (tapstripe) VERSION", VERSION the
#             configured one
#   install   `make install-man` puts the pages in man1/ and man8/
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all pass,
# 1 when one fails, 77 (automake's skip) when man, groff or python3 is missing.
# BUILDDIR (set by make check) is where bin/ and man/ were built.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
here=$(cd "$(dirname "$0")" && pwd)
TDBENCH=$here/../../tools/td-bench/td-bench
PASSED=0
FAILED=0
PAGES="tapdisk.8 tap-ctl.8 stripe-master.8 stripe-ctl.8 td-front.1 td-bench.1
	tapstripe-xenwatch.8"

for tool in man groff python3; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not found (apt-get install man-db groff python3)"
		exit 77
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() {
	echo "PASS: $*"
	PASSED=$((PASSED + 1))
}
fail() {
	echo "FAIL: $*"
	FAILED=$((FAILED + 1))
}

# The program NAME as a command line.
prog() {
	if [ "$1" = td-bench ]; then
		echo "python3 $TDBENCH"
	else
		echo "$BUILDDIR/bin/$1"
	fi
}

# Its commands: the first words of the lines of its COMMANDS list (tap-ctl,
# stripe-ctl), or of argparse's positional arguments (td-bench).
commands() {
	$(prog "$1") --help | awk '
		/^[^ ]/ { on = ($0 == "COMMANDS" || $0 == "positional arguments:") }
		on && match($0, /[^ ]/) <= 5 &&
		match($0, /^ +[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*/) {
			c = substr($0, RSTART, RLENGTH); sub(/^ +/, "", c)
			if (c != "help" && !(c in seen)) { seen[c] = 1; print c }
		}'
}

# Every --help text of NAME: its own and its commands'.
all_help() {
	local p
	p=$(prog "$1")
	$p --help
	commands "$1" | while read -r cmd; do
		# shellcheck disable=SC2086 # a command is several words
		$p $cmd --help
	done
}

# The page's text without roff escapes: \- is -, fonts dropped.
page_text() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\\e/\\/g' "$1"
}

check_render() {
	local page=$1 out
	out=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
	out+=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	if [ -n "$out" ]; then
		fail "render $(basename "$page"): $out"
	else
		pass "render $(basename "$page")"
	fi
}

check_sections() {
	local page=$1 missing="" s
	for s in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
		grep -qx "\.SH $s" "$page" || missing+=" $s"
	done
	# td-front groups its options under RING, WORKLOAD...: any option entry
	grep -qx '\.TP' "$page" || missing+=" an option"
	if [ -n "$missing" ]; then
		fail "sections $(basename "$page"): missing$missing"
	else
		pass "sections $(basename "$page")"
	fi
}

check_options() {
	local name=$1 page=$2 missing="" opt n=0
	all_help "$name" >"$tmp/help" 2>&1 || {
		fail "options $name: a --help failed: $(tail -1 "$tmp/help")"
		return
	}
	page_text "$page" >"$tmp/page"
	for opt in $(grep -Eo -- '(^|[^a-zA-Z0-9-])--[a-z][a-z0-9-]*[a-z0-9]' \
		"$tmp/help" | sed 's/^[^-]*//' | sort -u); do
		n=$((n + 1))
		grep -qF -- "$opt" "$tmp/page" || missing+=" $opt"
	done
	# Every option --help describes (a line "  -x, --opt ARG  text", at
	# most 4 columns in) is described in the page (".TP" then ".B -x, --opt").
	awk '/^\.TP$/ { getline; if ($1 == ".B") print }' "$tmp/page" >"$tmp/tags"
	for opt in $(grep -E '^ {1,4}-' "$tmp/help" |
		grep -Eo -- '--[a-z][a-z0-9-]*[a-z0-9]' | sort -u); do
		grep -qF -- "$opt" "$tmp/tags" || missing+=" $opt(described)"
	done
	if [ -n "$missing" ]; then
		fail "options $name: in --help, not in the page:$missing"
	elif [ "$n" -lt 2 ]; then
		fail "options $name: found only $n options in --help"
	else
		pass "options $name: the page names all $n options of --help"
	fi
}

check_version() {
	local name=$1 want got
	want="$name (tapstripe) $(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
		"$BUILDDIR/config.h")"
	got=$($(prog "$name") --version 2>&1)
	if [ "$got" = "$want" ]; then
		pass "version $name"
	else
		fail "version $name: '$got', expected '$want'"
	fi
}

for p in $PAGES; do
	name=${p%.*}
	page=$BUILDDIR/man/$p
	if [ ! -s "$page" ]; then
		fail "page $p: $page was not built"
	else
		check_render "$page"
		check_sections "$page"
		check_options "$name" "$page"
	fi
	check_version "$name"
done

# make install puts them where man finds them.
if make -s -C "$BUILDDIR" install-man DESTDIR="$tmp/root" >"$tmp/install" 2>&1 &&
	[ "$(find "$tmp/root" -path '*/man8/*.8' | wc -l)" -eq 5 ] &&
	[ "$(find "$tmp/root" -path '*/man1/*.1' | wc -l)" -eq 2 ]; then
	pass "install: 5 pages in man8, 2 in man1"
else
	fail "install: $(tail -3 "$tmp/install")"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]

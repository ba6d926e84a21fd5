#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lab.sh - a lab of N iSCSI storage servers and a stripe master on one host.
#
# Each server is a tgtd in its own network namespace, reached through a
# veth pair at its own address, exporting one LUN backed by a sparse file,
# with tgtd's iSCSI limits raised.  Each may be capped in bandwidth (tc tbf
# on both ends of its veth: the host end limits writes, the namespace end
# reads) and in disk bytes/s and IOPS (the LUN is then a loop device opened
# O_DIRECT by a tgtd placed in a cgroup v1 blkio group with throttle rules).
# A stripe-master runs on a port and database of its own (or MASTER is
# used) and every server is registered with it.  The lab's own master
# listens on NET.0.1 (an address on lo), so that the lab's hosts ("host
# add": more Xen hosts, each a network namespace, issue #18) reach it as
# well as this one; NET.0.0/16 may change it.
#
# With LAB_HA=1 (or "up N --ha") the lab is highly available (issue #23):
# a 3-member etcd cluster on 127.0.0.1 (tests/lab/etcd-lib.sh, data and
# logs in the state directory) and two stripe-masters on it, both on
# NET.0.1 (ports P and the next free one), sharing the state through
# --store etcd://HOSTS/lab-NAME, each with a local replica of its own;
# servers are registered through the first.
#
# COMMANDS
#   up N [--ha] start N servers (1-16) and the master (--ha: LAB_HA=1);
#               prints the servers' iSCSI URLs
#   down        stop and remove everything "up" made; safe to repeat
#   kill I      server I dies: its tgtd gets SIGKILL, connections are reset
#   revive I    restart server I's tgtd with the same LUN file and target
#   rate R      every server's bandwidth cap to R MiB/s (0 = no cap)
#   slow I R    server I's bandwidth cap to R MiB/s (0 = no cap)
#   cut I       server I's network cut: its link goes down inside its
#               namespace (packets dropped, no reset: connections hang)
#   restore I   server I's link up again after a cut
#   lun I FILE  server I's LUN 1 deleted and made again on FILE (the LUN's
#               size is FILE's): a LUN that shrinks, or moves to a full or
#               failing filesystem; tgtd and its sessions stay up
#   host add H  a Xen host of its own: network namespace NAME-hK (K = 1..8,
#               the next free) with address NET.(200+K).2, routed through
#               this host to every server and to the master; H is its host
#               id (1-32 of [a-z0-9-]); prints K
#   host del H  remove host H (its processes must have ended: a namespace
#               with processes in it is refused)
#   host exec H CMD...  run CMD inside host H, with TAPSTRIPE_HOST_ID=H
#   host cut H  host H's network cut: this end of its link goes down
#               (its packets are dropped, no reset: connections hang)
#   host restore H  host H's link up again after a cut
#   host list   the hosts: id, namespace, address, cut or not
#   status      per server: alive or dead, caps, qdisc counters; the master
#               (with LAB_HA=1: both masters, the etcd members and leader)
#   urls        the servers' iSCSI URLs, one a line
#   env         shell assignments describing the lab, for eval in scripts
#   master      the master's HOST:PORT (with LAB_HA=1 the first; "env" gives
#               LAB_MASTERS, both, and LAB_STORE, their --store)
#   -h, --help  this text
#
# KNOBS (environment; those marked * are read by "up" only and remembered)
#   LAB_STATE=/run/tapstripe-lab  state directory: PIDs, logs, the master's
#                database; one per lab, so that labs do not clash
#   LAB_NET=10.78 *   server I is NET.I.2, the host side NET.I.1; "auto"
#                picks a free 10.X (X = 100..199) and names the lab after it
#   LAB_NAME=tlX *    prefix of namespaces (NAME-sI), veths (NAMEhI, NAMEnI),
#                cgroups and targets; default tl + NET's second number
#   LAB_SIZE=4G *     LUN size (sparse file, truncate -s syntax)
#   LAB_DIR=/dev/shm/tapstripe-lab-NAME *   where the LUN files go
#   LAB_RATE=100 *    bandwidth cap per server and direction, MiB/s (0 = none)
#   LAB_DISK_BPS= *   disk cap in MiB/s (reads and writes each), and/or
#   LAB_DISK_IOPS= *  disk cap in IOPS: the LUN becomes a loop device in a
#                blkio cgroup (cgroup v1 must be mounted on /sys/fs/cgroup/blkio)
#   LAB_BSTYPE=rdwr * tgtd backing store: rdwr or aio
#   LAB_BSOFLAGS= *   "", direct or sync (forced to direct with LAB_DISK_*)
#   LAB_THREADS= *    tgtd I/O threads (tgtd -t; its default is 16)
#   LAB_MTU=9000 *    veth MTU
#   LAB_TUNE=1 *      raise tgtd's iSCSI limits (256 KiB data segments,
#                1 MiB bursts); 0 keeps tgtd's defaults (8 KiB segments)
#   LAB_CPORT= *      tgtd control port base: server I uses -C CPORT+I
#                (default 4000 + 32 * NET's second number)
#   LAB_IQN=iqn.2026-11.org.tapstripe.lab *  target I is IQN:NAME-srvI, LUN 1
#   LAB_CHAP= *       USER:SECRET: every target gets this CHAP account
#   LAB_THIN=0 *      1: LUNs are thin (tgtd's thin_provisioning=1: READ
#                CAPACITY(16) says LBPME and LBPRZ, GET LBA STATUS and UNMAP
#                work on the sparse file)
#                (tgtadm --mode account, bound to the target: initiators
#                must log in with it) and is registered with it (server
#                add --chap-user USER --chap-secret-file STATE/chap.secret,
#                mode 0600); the secret is kept in no other lab file
#   MASTER= *         HOST:PORT of a running stripe-master to register the
#                servers with, instead of starting one (they are removed
#                from it again on "down" when they hold no extent)
#   LAB_MASTER_PORT= *  the lab's own master's port on 127.0.0.1 (default
#                7700 + NET's second number, or the next free port)
#   LAB_EXTENT=64M *  extent size of the lab's own master
#   LAB_HA=0 *        1: 3 etcd members and 2 masters on them (needs etcd:
#                apt-get install etcd-server); not with MASTER
#   LAB_KEEP=0        1: "down" keeps the LUN files
#   BUILDDIR          where stripe-master and stripe-ctl were built
#                (BUILDDIR/bin); default ../../build/bin, else PATH
#
# Every process the lab starts is recorded with its PID and start time and
# is the only thing it ever signals.  Needs root, iproute2 and tgt.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/lab/etcd-lib.sh
. "$HERE/etcd-lib.sh"
STATE=${LAB_STATE:-/run/tapstripe-lab}
CLAIMS=/run/tapstripe-lab.claims
CGROOT=/sys/fs/cgroup/blkio
MAX_SERVERS=16

die() {
	echo "lab.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -u/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
}

# --- helpers -----------------------------------------------------------------

is_rate() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

server_index() { # I: a server number of the running lab
	[[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$N" ] ||
		die "no server '$1': this lab has servers 1..$N"
}

find_tool() { # NAME: the path of a tapstripe program
	local d
	for d in ${BUILDDIR:+"$BUILDDIR/bin"} "$TOP/build/bin"; do
		[ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
	done
	command -v "$1" 2>/dev/null && return 0
	die "$1 not found: build tapstripe (./setup.sh build) or set BUILDDIR"
}

# The start time of a process (field 22 of /proc/PID/stat), or nothing.
starttime() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# after "comm) ": state is field 3, starttime field 22
	set -- $stat
	[ "$1" != Z ] || return 1
	echo "${20}"
}

record_pid() { # FILE PID
	local st
	st=$(starttime "$2") || return 1
	echo "$2 $st" >"$1"
}

# alive FILE: the process recorded in FILE runs (same PID, same start time).
alive() {
	local pid st
	[ -s "$1" ] || return 1
	read -r pid st <"$1"
	[ -n "$pid" ] && [ "$(starttime "$pid")" = "$st" ]
}

recorded_pid() { local pid _; read -r pid _ <"$1"; echo "$pid"; }

# stop FILE [GRACE_TENTHS]: SIGTERM (unless 0 tenths), then SIGKILL, to the
# recorded process only; removes FILE.
stop_recorded() {
	local file=$1 grace=${2:-30} pid t
	[ -e "$file" ] || return 0
	if alive "$file"; then
		pid=$(recorded_pid "$file")
		[ "$grace" -gt 0 ] && kill -TERM "$pid" 2>/dev/null
		for ((t = 0; t < grace; t++)); do
			alive "$file" || break
			sleep 0.1
		done
		if alive "$file"; then
			kill -KILL "$pid" 2>/dev/null
			for ((t = 0; t < 50; t++)); do
				alive "$file" || break
				sleep 0.1
			done
		fi
	fi
	alive "$file" && { echo "lab.sh: process $(recorded_pid "$file") would not die" >&2; return 1; }
	rm -f "$file"
}

mib_to_bytes() { awk -v r="$1" 'BEGIN { printf "%d", r * 1048576 }'; }

ctl() { "$CTL" --master "$MASTER_ADDR" --timeout 5 --retries 1 "$@"; }

# --- names, derived from the remembered settings ------------------------------

ns() { echo "$NAME-s$1"; }
hveth() { echo "${NAME}h$1"; }
nveth() { echo "${NAME}n$1"; }
addr() { echo "$NET.$1.2"; }
target() { echo "$IQN:$NAME-srv$1"; }
cport() { echo $((CPORT + $1)); }
lunfile() { echo "$DIR/srv$1.img"; }
cgroup() { echo "$CGROOT/${NAME}_srv$1"; }
url() { echo "iscsi://$(addr "$1"):3260/$(target "$1")/1"; }

load_env() {
	[ -e "$STATE/env" ] || die "no lab is up in $STATE (start one: lab.sh up N)"
	# shellcheck source=/dev/null
	. "$STATE/env"
	CHAP_USER=${CHAP_USER:-} # a lab made before LAB_CHAP
	THIN=${THIN:-0}         # a lab made before LAB_THIN
	HA=${HA:-0}             # a lab made before LAB_HA
}

# --- network ---------------------------------------------------------------------

# shape I DIRECTION: apply server I's cap to one end of its veth.
shape() {
	local i=$1 dir=$2 rate bytes burst dev nsx=()
	rate=$(cat "$STATE/srv$i.rate")
	if [ "$dir" = write ]; then
		dev=$(hveth "$i")
	else
		dev=$(nveth "$i")
		nsx=(ip netns exec "$(ns "$i")")
	fi
	if [ "$rate" = 0 ] || [ "$(mib_to_bytes "$rate")" = 0 ]; then
		"${nsx[@]}" tc qdisc del dev "$dev" root 2>/dev/null
		return 0
	fi
	bytes=$(mib_to_bytes "$rate")
	# a bucket of at least 256 KiB and 4 ms of traffic; 100 ms of queue so
	# that a slow server mostly delays packets instead of dropping them
	burst=$((bytes / 250))
	[ $burst -lt 262144 ] && burst=262144
	"${nsx[@]}" tc qdisc replace dev "$dev" root tbf rate "${bytes}bps" \
		burst "$burst" latency 100ms
}

set_rate() { # I R
	echo "$2" >"$STATE/srv$1.rate"
	shape "$1" write && shape "$1" read ||
		die "tc failed on server $1's veth (is the sch_tbf qdisc available?)"
}

net_up() { # I
	local i=$1 n h
	n=$(nveth "$i") h=$(hveth "$i")
	ip netns add "$(ns "$i")" ||
		die "ip netns add $(ns "$i") failed (is another lab named $NAME up? set LAB_NAME, or take it down)"
	: >"$STATE/srv$i.netns"
	ip link add "$h" mtu "$MTU" type veth peer name "$n" mtu "$MTU" ||
		die "cannot create veth $h (an old lab not taken down? lab.sh down, or ip link del $h)"
	: >"$STATE/srv$i.veth"
	ip link set "$n" netns "$(ns "$i")" &&
		ip addr add "$NET.$i.1/24" dev "$h" &&
		ip link set "$h" up &&
		ip -n "$(ns "$i")" addr add "$(addr "$i")/24" dev "$n" &&
		ip -n "$(ns "$i")" link set "$n" up &&
		ip -n "$(ns "$i")" link set lo up &&
		ip -n "$(ns "$i")" route add default via "$NET.$i.1" ||
		die "cannot configure server $i's network"
}

# Only what this lab made (the markers say so): a clashing "up" that
# failed must not take another lab's namespace down with it.
net_down() { # I
	if [ -e "$STATE/srv$1.netns" ]; then
		ip netns del "$(ns "$1")" 2>/dev/null # its end of the veth goes too
		rm -f "$STATE/srv$1.netns"
	fi
	if [ -e "$STATE/srv$1.veth" ]; then
		ip link show "$(hveth "$1")" >/dev/null 2>&1 && ip link del "$(hveth "$1")" 2>/dev/null
		rm -f "$STATE/srv$1.veth"
	fi
	return 0
}

# --- the disk cap: a loop device in a blkio cgroup --------------------------------

disk_up() { # I: sets LUN_PATH
	local i=$1 dev mm cg
	LUN_PATH=$(lunfile "$i")
	if [ ! -e "$LUN_PATH" ]; then
		truncate -s "$SIZE" "$LUN_PATH" || die "cannot create $LUN_PATH"
		: >"$STATE/srv$i.lunfile"
	fi
	[ -n "$DISK_BPS$DISK_IOPS" ] || return 0
	if [ ! -e "$STATE/srv$i.loop" ]; then
		dev=$(losetup -f --show "$LUN_PATH") || die "losetup failed (no loop devices?)"
		echo "$dev" >"$STATE/srv$i.loop"
	fi
	dev=$(cat "$STATE/srv$i.loop")
	mm=$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')
	cg=$(cgroup "$i")
	if [ ! -e "$STATE/srv$i.cgroup" ]; then
		mkdir "$cg" || die "cannot create $cg (another lab named $NAME?)"
		: >"$STATE/srv$i.cgroup"
	fi
	if [ -n "$DISK_BPS" ]; then
		echo "$mm $(mib_to_bytes "$DISK_BPS")" >"$cg/blkio.throttle.read_bps_device" &&
			echo "$mm $(mib_to_bytes "$DISK_BPS")" >"$cg/blkio.throttle.write_bps_device" ||
			die "cannot set the bytes/s throttle in $cg"
	fi
	if [ -n "$DISK_IOPS" ]; then
		echo "$mm $DISK_IOPS" >"$cg/blkio.throttle.read_iops_device" &&
			echo "$mm $DISK_IOPS" >"$cg/blkio.throttle.write_iops_device" ||
			die "cannot set the IOPS throttle in $cg"
	fi
	LUN_PATH=$dev
}

disk_down() { # I
	local cg
	cg=$(cgroup "$1")
	if [ -e "$STATE/srv$1.loop" ]; then
		losetup -d "$(cat "$STATE/srv$1.loop")" 2>/dev/null
		rm -f "$STATE/srv$1.loop"
	fi
	if [ -e "$STATE/srv$1.cgroup" ]; then
		rmdir "$cg" 2>/dev/null
		rm -f "$STATE/srv$1.cgroup"
	fi
	if [ -e "$STATE/srv$1.lunfile" ]; then
		[ "${LAB_KEEP:-0}" = 1 ] || rm -f "$(lunfile "$1")"
		rm -f "$STATE/srv$1.lunfile"
	fi
}

# --- tgtd ----------------------------------------------------------------------

tgtadm_i() { # I ARGS...
	local i=$1
	shift
	tgtadm -C "$(cport "$i")" --lld iscsi "$@"
}

lun_thin() { # I: make LUN 1 thin when LAB_THIN=1
	[ "$THIN" = 1 ] || return 0
	tgtadm_i "$1" --op update --mode logicalunit --tid 1 --lun 1 \
		--params thin_provisioning=1 || die "server $1: cannot make LUN 1 thin"
}

# Start server I's tgtd (in its namespace, in its cgroup when capped) and
# give it its target and LUN.  tgtd keeps nothing on disk: revive does the same.
tgtd_up() {
	local i=$1 pid cg='' log kv t oflags=$BSOFLAGS
	log=$STATE/srv$i.log
	disk_up "$i"
	[ -n "$DISK_BPS$DISK_IOPS" ] && cg=$(cgroup "$i") oflags=direct
	tgtadm -C "$(cport "$i")" --op show --mode system >/dev/null 2>&1 &&
		die "a tgtd already answers on control port $(cport "$i") (set LAB_CPORT)"
	rm -f "/var/run/tgtd/socket.$(cport "$i")" "/var/run/tgtd/socket.$(cport "$i").lock"
	# setsid and ip netns exec both exec in place, and sh execs too after
	# joining the cgroup: $! is tgtd's own PID.  Its own session keeps a
	# terminal's ^C away from it.
	setsid sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs" || exit 1; shift; exec "$@"' \
		sh "$cg" ip netns exec "$(ns "$i")" \
		tgtd -f -C "$(cport "$i")" ${THREADS:+-t "$THREADS"} \
		--iscsi "portal=$(addr "$i"):3260" >>"$log" 2>&1 </dev/null &
	pid=$!
	record_pid "$STATE/srv$i.pid" "$pid" || die "tgtd of server $i did not start: $(tail -3 "$log")"
	for ((t = 0; t < 100; t++)); do
		tgtadm -C "$(cport "$i")" --op show --mode system >/dev/null 2>&1 && break
		alive "$STATE/srv$i.pid" || die "tgtd of server $i died: $(tail -3 "$log")"
		sleep 0.1
	done
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = tgtd ] ||
		die "server $i: process $pid is not tgtd"
	tgtadm_i "$i" --op new --mode target --tid 1 -T "$(target "$i")" ||
		die "server $i: cannot create target $(target "$i")"
	tgtadm_i "$i" --op new --mode logicalunit --tid 1 --lun 1 --bstype "$BSTYPE" \
		${oflags:+--bsoflags "$oflags"} -b "$LUN_PATH" ||
		die "server $i: cannot create LUN 1 on $LUN_PATH (bstype $BSTYPE)"
	lun_thin "$i"
	if [ "$TUNE" = 1 ]; then
		for kv in MaxRecvDataSegmentLength=262144 MaxXmitDataSegmentLength=262144 \
			MaxBurstLength=1048576 FirstBurstLength=262144; do
			tgtadm_i "$i" --op update --mode target --tid 1 -n "${kv%=*}" -v "${kv#*=}" ||
				die "server $i: cannot set $kv"
		done
	fi
	tgtadm_i "$i" --op bind --mode target --tid 1 -I ALL || die "server $i: cannot bind target"
	[ -z "$CHAP_USER" ] && return 0
	tgtadm_i "$i" --op new --mode account --user "$CHAP_USER" \
		--password "$(cat "$STATE/chap.secret")" || die "server $i: cannot create the CHAP account"
	tgtadm_i "$i" --op bind --mode account --tid 1 --user "$CHAP_USER" ||
		die "server $i: cannot bind the CHAP account to the target"
}

# Stop server I's tgtd: the clean way (tgtd ignores SIGTERM: delete the
# target, then the system), then SIGKILL.
tgtd_down() {
	local i=$1 t
	if alive "$STATE/srv$i.pid"; then
		tgtadm_i "$i" --op delete --mode target --tid 1 --force >/dev/null 2>&1
		tgtadm -C "$(cport "$i")" --op delete --mode system >/dev/null 2>&1
		for ((t = 0; t < 30; t++)); do
			alive "$STATE/srv$i.pid" || break
			sleep 0.1
		done
	fi
	stop_recorded "$STATE/srv$i.pid" 0
	rm -f "/var/run/tgtd/socket.$(cport "$i")" "/var/run/tgtd/socket.$(cport "$i").lock"
}

# --- the master -------------------------------------------------------------------

free_port() { # FIRST: the first port from FIRST on that nothing listens on
	local p=$1
	while [ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ]; do
		p=$((p + 1))
		[ $p -gt $(($1 + 100)) ] && die "no free port from $1 on for the master"
	done
	echo "$p"
}

# --- LAB_HA: 3 etcd members (etcd-lib.sh), recorded like every process ---------

ETCD_N=3

etcd_up() {
	local i rc
	ETCD_LIB_DATA_ROOT=$STATE etcd_cluster_start "$STATE" $ETCD_N
	rc=$?
	for ((i = 0; i < ETCD_N; i++)); do
		[ -n "${ETCD_PIDS[i]:-}" ] && record_pid "$STATE/etcd$i.pid" "${ETCD_PIDS[i]}"
		[ -n "${ETCD_LIB_DATA_DIRS[i]:-}" ] && echo "${ETCD_LIB_DATA_DIRS[i]}" >"$STATE/etcd$i.data"
	done
	printf 'ETCD_ENDPOINTS=%q\n' "$ETCD_ENDPOINTS" >>"$STATE/env"
	[ $rc = 0 ] || die "the etcd cluster did not come up (logs: $STATE/etcd-I.log)"
}

etcd_down() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		stop_recorded "$STATE/etcd$i.pid" 30
		[ -e "$STATE/etcd$i.data" ] && rm -rf "$(cat "$STATE/etcd$i.data")"
		rm -f "$STATE/etcd$i.data" "$STATE/etcd-$i.log"
	done
}

# The store the masters share, and etcd-lib's view of the running members
# (for etcd_leader).
etcd_store() { echo "etcd://${ETCD_ENDPOINTS//http:\/\//}/lab-$NAME"; }
etcd_load() {
	local i
	IFS=, read -r -a ETCD_URLS <<<"$ETCD_ENDPOINTS"
	for ((i = 0; i < ETCD_N; i++)); do
		ETCD_PIDS[i]=
		alive "$STATE/etcd$i.pid" && ETCD_PIDS[i]=$(recorded_pid "$STATE/etcd$i.pid")
	done
}

# --- the master -------------------------------------------------------------------

# master_start K ADDR: the lab's master K (1, or 2 with LAB_HA), recorded
# in STATE/masterK.pid (master.pid for the first), its replica or database
# STATE/masterK.db, its log STATE/masterK.log (master.* for the first).
mfile() { [ "$1" = 1 ] && echo "$STATE/master" || echo "$STATE/master$1"; }
master_start() {
	local f pid store=()
	f=$(mfile "$1")
	[ "$HA" = 1 ] && store=(--store "$(etcd_store)")
	setsid "$(find_tool stripe-master)" --foreground --db "$f.db" --listen "$2" \
		--allow 127.0.0.0/8 --allow "$NET.0.0/16" "${store[@]}" \
		--extent-size "$EXTENT" >>"$f.log" 2>&1 </dev/null &
	pid=$!
	record_pid "$f.pid" "$pid" || die "stripe-master did not start: $(tail -3 "$f.log")"
}

master_wait() { # K ADDR
	local t f
	f=$(mfile "$1")
	for ((t = 0; t < 300; t++)); do
		"$CTL" --master "$2" --timeout 1 --retries 0 info >/dev/null 2>&1 && return 0
		[ -e "$f.pid" ] && ! alive "$f.pid" && die "stripe-master died: $(tail -3 "$f.log")"
		sleep 0.1
	done
	die "the master at $2 does not answer (see $f.log)"
}

master_up() {
	local port
	if [ -n "${MASTER:-}" ]; then
		MASTER_ADDR=$MASTER
	else
		ip addr add "$NET.0.1/32" dev lo ||
			die "cannot add $NET.0.1 to lo for the master (another lab on $NET?)"
		: >"$STATE/master.addr"
		port=$(free_port "${LAB_MASTER_PORT:-$((7700 + ${NET#*.}))}")
		MASTER_ADDR=$NET.0.1:$port
		echo "MASTER_ADDR=$MASTER_ADDR" >>"$STATE/env"
		master_start 1 "$MASTER_ADDR"
		if [ "$HA" = 1 ]; then
			MASTER2_ADDR=$NET.0.1:$(free_port $((port + 1)))
			echo "MASTER2_ADDR=$MASTER2_ADDR" >>"$STATE/env"
			master_start 2 "$MASTER2_ADDR"
			master_wait 2 "$MASTER2_ADDR"
		fi
	fi
	grep -q '^MASTER_ADDR=' "$STATE/env" || echo "MASTER_ADDR=$MASTER_ADDR" >>"$STATE/env"
	master_wait 1 "$MASTER_ADDR"
}

register() { # I
	local out chap=()
	[ -n "$CHAP_USER" ] && chap=(--chap-user "$CHAP_USER" --chap-secret-file "$STATE/chap.secret")
	out=$(ctl server add --portal "$(addr "$1"):3260" --target "$(target "$1")" --lun 1 \
		--size "$SIZE" --address "$(addr "$1")" "${chap[@]}" 2>&1) ||
		die "cannot register server $1 with the master at $MASTER_ADDR: $out"
}

# --- claims of 10.X networks for LAB_NET=auto ---------------------------------------

# A claim is the directory CLAIMS/X holding the state path of its lab and
# the claiming "up" (PID and start time).  It is stale when that lab's
# state is gone and the "up" that made it has ended.  Claims are made
# under a lock, so that concurrent "up"s cannot take the same one.
claim_net() {
	local x owner
	mkdir -p "$CLAIMS" || die "cannot create $CLAIMS"
	exec 8>"$CLAIMS/.lock"
	flock 8 || die "cannot lock $CLAIMS/.lock"
	for ((x = 100; x <= 199; x++)); do
		if [ -d "$CLAIMS/$x" ]; then
			owner=$(cat "$CLAIMS/$x/state" 2>/dev/null)
			[ -n "$owner" ] && [ -e "$owner/env" ] && continue
			alive "$CLAIMS/$x/pid" && continue
			[ -e "/run/netns/tl$x-s1" ] && continue
			rm -rf "${CLAIMS:?}/$x"
		fi
		ip -4 -o addr show | grep -q " 10\.$x\." && continue
		mkdir "$CLAIMS/$x" && echo "$STATE" >"$CLAIMS/$x/state" &&
			record_pid "$CLAIMS/$x/pid" $$ || die "cannot write the claim $CLAIMS/$x"
		echo "10.$x"
		return 0
	done
	die "no free 10.X network (X = 100..199) for LAB_NET=auto"
}


# --- hosts: more Xen hosts, each a network namespace (issue #18) -------------------

MAX_HOSTS=8
hns() { echo "$NAME-h$1"; }
hgw() { echo "${NAME}g$1"; } # the veth end on this host
hif() { echo "${NAME}i$1"; } # the veth end inside host K

host_index() { # H: its K, or nothing
	local f
	for f in "$STATE"/host*.id; do
		[ -e "$f" ] && [ "$(cat "$f")" = "$1" ] && { f=${f##*/host}; echo "${f%.id}"; return 0; }
	done
	return 1
}

host_of() { # H: its K, or die
	[[ $1 =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || die "a host id is 1-32 of [a-z0-9-]: '$1'"
	host_index "$1" || die "no host '$1' in this lab (lab.sh host add $1)"
}

# Forwarding only on the lab's own links, never machine-wide.
host_forwarding() { # K
	local i
	sysctl -qw "net.ipv4.conf.$(hgw "$1").forwarding=1" || return 1
	for ((i = 1; i <= N; i++)); do
		sysctl -qw "net.ipv4.conf.$(hveth "$i").forwarding=1" || return 1
	done
}

host_add() { # H
	local h=$1 k
	[[ $h =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || die "a host id is 1-32 of [a-z0-9-]: '$h'"
	host_index "$h" >/dev/null && die "host '$h' exists"
	for ((k = 1; k <= MAX_HOSTS; k++)); do [ -e "$STATE/host$k.id" ] || break; done
	[ $k -le $MAX_HOSTS ] || die "at most $MAX_HOSTS hosts"
	echo "$h" >"$STATE/host$k.id"
	ip netns add "$(hns "$k")" || { rm -f "$STATE/host$k.id"; die "ip netns add $(hns "$k") failed"; }
	if ! { ip link add "$(hgw "$k")" mtu "$MTU" type veth peer name "$(hif "$k")" mtu "$MTU" &&
		ip link set "$(hif "$k")" netns "$(hns "$k")" &&
		ip addr add "$NET.$((200 + k)).1/24" dev "$(hgw "$k")" &&
		ip link set "$(hgw "$k")" up &&
		ip -n "$(hns "$k")" addr add "$NET.$((200 + k)).2/24" dev "$(hif "$k")" &&
		ip -n "$(hns "$k")" link set "$(hif "$k")" up &&
		ip -n "$(hns "$k")" link set lo up &&
		ip -n "$(hns "$k")" route add default via "$NET.$((200 + k)).1" &&
		host_forwarding "$k"; }; then
		host_del_k "$k"
		die "cannot configure host $h's network"
	fi
	echo "$k"
}

host_del_k() { # K
	if [ -n "$(ip netns pids "$(hns "$1")" 2>/dev/null)" ]; then
		echo "lab.sh: host $(cat "$STATE/host$1.id") still runs processes:" \
			"$(ip netns pids "$(hns "$1")" | tr '\n' ' ')" >&2
		return 1
	fi
	ip netns del "$(hns "$1")" 2>/dev/null
	ip link show "$(hgw "$1")" >/dev/null 2>&1 && ip link del "$(hgw "$1")" 2>/dev/null
	rm -f "$STATE/host$1.id" "$STATE/host$1.cut"
	return 0
}

hosts_down() {
	local f k
	for f in "$STATE"/host*.id; do
		[ -e "$f" ] || continue
		k=${f##*/host} k=${k%.id}
		host_del_k "$k" || echo "lab.sh: host $k left up" >&2
	done
}

cmd_host() {
	local sub=${1:-} k f
	load_env
	shift
	case $sub in
	add) host_add "${1:-}" ;;
	del) k=$(host_of "${1:-}") && { host_del_k "$k" || die "stop its processes first"; } ;;
	exec)
		k=$(host_of "${1:-}") || exit 1
		shift
		[ $# -gt 0 ] || die "usage: lab.sh host exec H CMD..."
		exec ip netns exec "$(hns "$k")" env TAPSTRIPE_HOST_ID="$(cat "$STATE/host$k.id")" "$@"
		;;
	cut)
		k=$(host_of "${1:-}") || exit 1
		# this end goes down: host H keeps its link and routes (no carrier),
		# its packets are dropped; no error, no reset: connections hang
		ip link set "$(hgw "$k")" down || die "cannot put host $1's link down"
		: >"$STATE/host$k.cut"
		echo "host $1 cut off" >&2
		;;
	restore)
		k=$(host_of "${1:-}") || exit 1
		ip link set "$(hgw "$k")" up &&
			ip -n "$(hns "$k")" neigh flush dev "$(hif "$k")" ||
			die "cannot bring host $1's link up"
		rm -f "$STATE/host$k.cut"
		echo "host $1 restored" >&2
		;;
	list)
		for f in "$STATE"/host*.id; do
			[ -e "$f" ] || continue
			k=${f##*/host} k=${k%.id}
			echo "$(cat "$f") $(hns "$k") $NET.$((200 + k)).2$([ -e "$STATE/host$k.cut" ] && echo " cut")"
		done
		;;
	*) die "usage: lab.sh host add|del|exec|cut|restore|list ..." ;;
	esac
}

# --- commands -------------------------------------------------------------------------

cmd_up() {
	local n=${1:-} i net
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le $MAX_SERVERS ] ||
		die "usage: lab.sh up N [--ha] (N = 1..$MAX_SERVERS)"
	case ${2:-} in
	--ha) HA=1 ;;
	"") HA=${LAB_HA:-0} ;;
	*) die "usage: lab.sh up N [--ha]: unknown option '$2'" ;;
	esac
	[ "$HA" = 0 ] || [ "$HA" = 1 ] || die "LAB_HA must be 0 or 1"
	if [ "$HA" = 1 ]; then
		[ -z "${MASTER:-}" ] || die "LAB_HA=1 starts the lab's own masters: unset MASTER"
		etcd_lib_have || die "LAB_HA=1 needs etcd and python3: apt-get install etcd-server python3"
	fi
	[ -e "$STATE/env" ] && die "a lab is already up in $STATE (lab.sh down first, or set LAB_STATE)"
	[ "$(id -u)" = 0 ] || die "the lab needs root (network namespaces, tc, loop devices)"
	command -v tgtd >/dev/null && command -v tgtadm >/dev/null ||
		die "tgtd missing: apt-get install tgt"
	command -v ip >/dev/null && command -v tc >/dev/null && command -v ss >/dev/null ||
		die "ip/tc/ss missing: apt-get install iproute2"
	is_rate "${LAB_RATE:-100}" || die "LAB_RATE must be MiB/s, e.g. 100 (0 = no cap)"
	if [ -n "${LAB_DISK_BPS:-}${LAB_DISK_IOPS:-}" ]; then
		[ -w "$CGROOT/cgroup.procs" ] ||
			die "LAB_DISK_BPS/LAB_DISK_IOPS need cgroup v1 blkio mounted on $CGROOT"
		[ "${LAB_BSTYPE:-rdwr}" != null ] || die "LAB_DISK_* needs a file-backed LUN"
	fi
	CTL=$(find_tool stripe-ctl)
	[ -n "${MASTER:-}" ] || find_tool stripe-master >/dev/null
	net=${LAB_NET:-10.78}
	[ "$net" = auto ] && net=$(claim_net)
	[[ $net =~ ^[0-9]+\.[0-9]+$ ]] || die "LAB_NET must be A.B (e.g. 10.78) or auto"
	if [ "${LAB_NET:-}" != auto ] && ip -4 -o addr show | grep -q " ${net//./\\.}\."; then
		die "addresses in $net.0.0/16 are already in use (another lab? lab.sh down, or set LAB_NET)"
	fi
	NAME=${LAB_NAME:-tl${net#*.}}
	[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "LAB_NAME must be 1-8 of [a-z0-9], a letter first"
	N=$n NET=$net
	SIZE=${LAB_SIZE:-4G} DIR=${LAB_DIR:-/dev/shm/tapstripe-lab-$NAME}
	BSTYPE=${LAB_BSTYPE:-rdwr} BSOFLAGS=${LAB_BSOFLAGS:-} THREADS=${LAB_THREADS:-}
	MTU=${LAB_MTU:-9000} TUNE=${LAB_TUNE:-1}
	CPORT=${LAB_CPORT:-$((4000 + 32 * ${NET#*.}))}
	IQN=${LAB_IQN:-iqn.2026-11.org.tapstripe.lab}
	DISK_BPS=${LAB_DISK_BPS:-} DISK_IOPS=${LAB_DISK_IOPS:-}
	THIN=${LAB_THIN:-0}
	EXTENT=${LAB_EXTENT:-64M}
	CHAP_USER=''
	if [ -n "${LAB_CHAP:-}" ]; then
		[[ $LAB_CHAP =~ ^[!-~]+:[!-~]+$ ]] || die "LAB_CHAP must be USER:SECRET, printable, no spaces"
		CHAP_USER=${LAB_CHAP%%:*}
	fi
	mkdir -p "$STATE" || die "cannot create $STATE"
	if [ -n "$CHAP_USER" ]; then
		(umask 077 && printf '%s\n' "${LAB_CHAP#*:}" >"$STATE/chap.secret") ||
			die "cannot write $STATE/chap.secret"
	fi
	{
		for k in N NET NAME SIZE DIR BSTYPE BSOFLAGS THREADS MTU TUNE CPORT IQN \
			DISK_BPS DISK_IOPS EXTENT CTL CHAP_USER THIN HA; do
			printf '%s=%q\n' "$k" "${!k}"
		done
		printf 'EXTERNAL_MASTER=%q\n' "${MASTER:-}"
	} >"$STATE/env"
	[ "${LAB_NET:-}" = auto ] && echo "CLAIM=${NET#*.}" >>"$STATE/env"
	# from here on, a failure takes down whatever was made
	trap 'echo "lab.sh: up failed, taking the lab down" >&2; cmd_down >&2' EXIT
	mkdir -p "$DIR" || die "cannot create $DIR"
	[ "$HA" = 1 ] && etcd_up
	master_up
	for ((i = 1; i <= N; i++)); do
		net_up "$i"
		set_rate "$i" "${LAB_RATE:-100}"
		tgtd_up "$i"
		register "$i"
		echo "srv$i $(addr "$i") tgtd $(recorded_pid "$STATE/srv$i.pid") net ${LAB_RATE:-100} MiB/s" \
			"disk ${DISK_BPS:-no cap}${DISK_BPS:+ MiB/s} ${DISK_IOPS:-no cap}${DISK_IOPS:+ IOPS}" \
			"$(url "$i")" >&2
	done
	trap - EXIT
	echo "master $MASTER_ADDR ($N servers registered)" >&2
	[ "$HA" = 1 ] && echo "master $MASTER2_ADDR, both on $(etcd_store)" >&2
	cmd_urls
}

cmd_down() {
	local i n
	[ -e "$STATE/env" ] || { echo "lab is down"; return 0; }
	. "$STATE/env"
	n=$N
	if [ -n "$EXTERNAL_MASTER" ]; then
		MASTER_ADDR=$EXTERNAL_MASTER
		for ((i = 1; i <= n; i++)); do
			ctl server remove --target "$(target "$i")" --lun 1 >/dev/null 2>&1 ||
				echo "lab.sh: server $i stays registered with $MASTER_ADDR (it holds extents)" >&2
		done
	fi
	for ((i = 1; i <= n; i++)); do
		tgtd_down "$i"
		disk_down "$i"
		net_down "$i"
		rm -f "$STATE/srv$i.rate" "$STATE/srv$i.log" "$STATE/srv$i.pid" "$STATE/srv$i.cut"
	done
	stop_recorded "$STATE/master.pid" 50
	stop_recorded "$STATE/master2.pid" 50
	etcd_down
	hosts_down
	if [ -e "$STATE/master.addr" ]; then
		ip addr del "$NET.0.1/32" dev lo 2>/dev/null
		rm -f "$STATE/master.addr"
	fi
	rmdir "$DIR" 2>/dev/null
	[ -n "${CLAIM:-}" ] && rm -rf "${CLAIMS:?}/$CLAIM"
	rm -f "$STATE/env" "$STATE/master.db" "$STATE/master.db-wal" "$STATE/master.db-shm" \
		"$STATE/master.log" "$STATE/chap.secret" "$STATE/master2.db" \
		"$STATE/master2.db-wal" "$STATE/master2.db-shm" "$STATE/master2.log"
	rmdir "$STATE" 2>/dev/null || echo "lab.sh: left $STATE (files not made by the lab)" >&2
	echo "lab down ($n servers)"
}

cmd_kill() {
	load_env
	server_index "${1:-}"
	alive "$STATE/srv$1.pid" || die "server $1 is already dead (lab.sh revive $1)"
	kill -KILL "$(recorded_pid "$STATE/srv$1.pid")"
	stop_recorded "$STATE/srv$1.pid" 0 || die "server $1's tgtd survived SIGKILL"
	rm -f "/var/run/tgtd/socket.$(cport "$1")" "/var/run/tgtd/socket.$(cport "$1").lock"
	echo "srv$1 killed" >&2
}

cmd_revive() {
	load_env
	server_index "${1:-}"
	alive "$STATE/srv$1.pid" && die "server $1 is alive (lab.sh kill $1 first)"
	tgtd_up "$1"
	echo "srv$1 revived: tgtd $(recorded_pid "$STATE/srv$1.pid") $(url "$1")" >&2
}

cmd_rate() {
	local i
	load_env
	is_rate "${1:-}" || die "usage: lab.sh rate MiB_PER_S (0 = no cap)"
	for ((i = 1; i <= N; i++)); do set_rate "$i" "$1"; done
}

cmd_slow() {
	load_env
	server_index "${1:-}"
	is_rate "${2:-}" || die "usage: lab.sh slow I MiB_PER_S (0 = no cap)"
	set_rate "$1" "$2"
}

cmd_cut() {
	load_env
	server_index "${1:-}"
	ip -n "$(ns "$1")" link set "$(nveth "$1")" down ||
		die "cannot put server $1's link down"
	: >"$STATE/srv$1.cut"
	echo "srv$1 cut off" >&2
}

cmd_restore() {
	load_env
	server_index "${1:-}"
	ip -n "$(ns "$1")" link set "$(nveth "$1")" up ||
		die "cannot put server $1's link up"
	rm -f "$STATE/srv$1.cut"
	echo "srv$1 restored" >&2
}

cmd_lun() {
	local out
	load_env
	server_index "${1:-}"
	[ -f "${2:-}" ] || [ -b "${2:-}" ] || die "usage: lab.sh lun I FILE (a file or block device)"
	alive "$STATE/srv$1.pid" || die "server $1 is dead (lab.sh revive $1)"
	out=$(tgtadm_i "$1" --op delete --mode logicalunit --tid 1 --lun 1 2>&1) ||
		die "server $1: cannot delete LUN 1: $out"
	out=$(tgtadm_i "$1" --op new --mode logicalunit --tid 1 --lun 1 --bstype "$BSTYPE" \
		${BSOFLAGS:+--bsoflags "$BSOFLAGS"} -b "$2" 2>&1) ||
		die "server $1: cannot make LUN 1 on $2: $out"
	lun_thin "$1"
	echo "srv$1 LUN 1 now on $2 ($(stat -Lc %s "$2" 2>/dev/null) bytes)" >&2
}

qdisc_line() { # [ns] DEV: "sent B bytes P pkt, dropped D, overlimits O" or "no cap"
	local out
	out=$("$@" 2>/dev/null | awk '/^qdisc tbf/ { t = 1 } t && /Sent/ {
		gsub(/[(),]/, ""); printf "sent %s bytes %s pkt, dropped %s, overlimits %s", $2, $4, $7, $9; exit }')
	echo "${out:-no cap}"
}

cmd_status() {
	local i state rate disk
	[ -e "$STATE/env" ] || { echo "lab is down ($STATE)"; return 0; }
	load_env
	echo "lab $NAME: $N servers on $NET.I.2, LUNs of $SIZE in $DIR, state $STATE"
	if [ -n "$EXTERNAL_MASTER" ]; then
		echo "master $MASTER_ADDR (external)"
	else
		master_status 1 "$MASTER_ADDR"
	fi
	[ "$HA" = 1 ] && master_status 2 "$MASTER2_ADDR" && etcd_status
	disk="disk ${DISK_BPS:-no cap}${DISK_BPS:+ MiB/s}, ${DISK_IOPS:-no cap}${DISK_IOPS:+ IOPS}"
	for ((i = 1; i <= N; i++)); do
		if alive "$STATE/srv$i.pid"; then
			state="alive (tgtd $(recorded_pid "$STATE/srv$i.pid"))"
		else
			state=DEAD
		fi
		rate=$(cat "$STATE/srv$i.rate" 2>/dev/null)
		[ "$rate" = 0 ] && rate="no cap" || rate="$rate MiB/s"
		[ -e "$STATE/srv$i.cut" ] && state="$state, network CUT"
		echo "srv$i $(addr "$i") $state; net $rate each way; $disk"
		[ -e "$STATE/srv$i.cgroup" ] &&
			echo "    disk I/O (blkio): $(awk '$2 == "Read" || $2 == "Write" { printf "%s %s ", $2, $3 }' \
				"$(cgroup "$i")/blkio.throttle.io_serviced" 2>/dev/null)"
		echo "    writes (host->srv): $(qdisc_line tc -s qdisc show dev "$(hveth "$i")")"
		echo "    reads  (srv->host): $(qdisc_line ip netns exec "$(ns "$i")" tc -s qdisc show dev "$(nveth "$i")")"
	done
}

master_status() { # K ADDR
	local f
	f=$(mfile "$1")
	if alive "$f.pid"; then
		echo "master $2 pid $(recorded_pid "$f.pid") alive, extent size $EXTENT${ETCD_ENDPOINTS:+, store $(etcd_store)}"
	else
		echo "master $2 DEAD (log: $f.log)"
	fi
}

etcd_status() {
	local i leader
	etcd_load
	leader=$(etcd_leader 2>/dev/null)
	for ((i = 0; i < ETCD_N; i++)); do
		if [ -n "${ETCD_PIDS[i]}" ]; then
			echo "etcd m$i ${ETCD_URLS[i]} pid ${ETCD_PIDS[i]} alive$([ "$leader" = "$i" ] && echo ", LEADER")"
		else
			echo "etcd m$i ${ETCD_URLS[i]} DEAD (log: $STATE/etcd-$i.log)"
		fi
	done
	[ -n "$leader" ] || echo "etcd: no leader answers (a quorum is lost?)"
}

cmd_urls() {
	local i
	load_env
	for ((i = 1; i <= N; i++)); do url "$i"; done
}

cmd_env() {
	local i
	load_env
	printf 'LAB_N=%q\nLAB_NET=%q\nLAB_NAME=%q\nLAB_MASTER=%q\nLAB_DIR=%q\n' \
		"$N" "$NET" "$NAME" "$MASTER_ADDR" "$DIR"
	[ "$HA" = 1 ] && printf 'LAB_MASTERS=%q\nLAB_ETCD=%q\nLAB_STORE=%q\n' \
		"$MASTER_ADDR,$MASTER2_ADDR" "$ETCD_ENDPOINTS" "$(etcd_store)"
	for ((i = 1; i <= N; i++)); do
		printf 'LAB_SRV%d_ADDR=%q\nLAB_SRV%d_TARGET=%q\nLAB_SRV%d_LUN=%q\n' \
			"$i" "$(addr "$i")" "$i" "$(target "$i")" "$i" "$(lunfile "$i")"
	done
}

case ${1:-} in
up) cmd_up "${2:-}" "${3:-}" ;;
down) cmd_down ;;
kill) cmd_kill "${2:-}" ;;
revive) cmd_revive "${2:-}" ;;
rate) cmd_rate "${2:-}" ;;
slow) cmd_slow "${2:-}" "${3:-}" ;;
cut) cmd_cut "${2:-}" ;;
restore) cmd_restore "${2:-}" ;;
lun) cmd_lun "${2:-}" "${3:-}" ;;
status) cmd_status ;;
urls) cmd_urls ;;
env) cmd_env ;;
master) load_env; echo "$MASTER_ADDR" ;;
host) shift; cmd_host "$@" ;;
-h | --help | help) usage ;;
"") usage >&2; exit 2 ;;
*) echo "lab.sh: unknown command '$1' (lab.sh --help)" >&2; exit 2 ;;
esac

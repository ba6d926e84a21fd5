#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""units-run.py - start a service the way systemd would from its installed
unit file, and check its readiness (tests/integration/units.sh).

    units-run.py UNIT --root DESTDIR --work DIR [--instance NAME]
                 [--listening ADDR] [--probe CMD ARG...]

What is emulated (systemd.service(5), systemd.exec(5)):
  - ExecStart= of a Type=notify service: specifiers %i %I %n %N %p %%, the
    variables of every EnvironmentFile= ("-" = optional) and Environment=,
    $VAR as words, ${VAR} inside a word; the paths of the unit (program,
    EnvironmentFile) are read under DESTDIR, where make install put them;
  - StateDirectory=X and RuntimeDirectory=X: made under WORK, their
    /var/lib/X and /run/X in the command line mapped there, and
    $STATE_DIRECTORY / $RUNTIME_DIRECTORY set;
  - NOTIFY_SOCKET: a datagram socket read with SO_PASSCRED, so that only
    messages from the main process count (NotifyAccess=main);
  - /dev/log: when WORK/syslog.sock is given (--syslog), the command runs in
    a mount namespace whose /dev holds null, zero, full, random, urandom and
    a /dev/log link to it, as the journal would provide.
Hardening options are not emulated (systemd-analyze verify checks them).

Checks, one "PASS:"/"FAIL:" line each:
  ready     READY=1 comes from the main process within TimeoutStartSec
            (at most START_TIMEOUT_MAX_S here), and at that moment
            --listening ADDR (unix:PATH or tcp:HOST:PORT) accepts a
            connection.  "That moment" is exact: the socket's queue is kept
            full of the test's own datagrams, so the service's first
            message blocks in sendmsg; the test sees it there
            (/proc/PID/syscall), freezes it (SIGSTOP), checks ADDR, then
            lets the message through.  A READY=1 sent before the service
            listens fails, however short the gap, as does one never sent
  serves    then --probe CMD succeeds
  stopping  SIGTERM: STOPPING=1 arrives, then the process exits 0 within
            TimeoutStopSec
With --expect-failure, instead:
  fails     the process exits non-zero without READY=1 (a disk that
            cannot open), its last line of output saying why
Exit 0 when all pass, 1 otherwise.
"""
import argparse
import array
import os
import platform
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time

DEFAULT_TIMEOUT_S = 90
# sendto and sendmsg, as /proc/PID/syscall names them, per machine.
SEND_SYSCALLS = {"x86_64": ("44", "46"), "aarch64": ("206", "211")}
POLL_S = 0.005
# A service that starts here (tmpfs, loopback) is ready within this, far
# below the units' own TimeoutStartSec: a missing READY=1 fails sooner.
START_TIMEOUT_MAX_S = 20
SETUP_DEV = r'''
set -e
old=$1 sock=$2
shift 2
mount --make-rprivate /
mkdir -p "$old"
mount --rbind /dev "$old"
mount -t tmpfs -o mode=0755 units-dev /dev
for n in null zero full random urandom; do
	: >"/dev/$n"
	mount --bind "$old/$n" "/dev/$n"
done
ln -s "$sock" /dev/log
exec "$@"
'''


def parse_unit(path):
    """{key: [values]} of the [Service] and [Unit] sections."""
    keys = {}
    section = None
    with open(path) as f:
        lines = f.read().replace("\\\n", " ").splitlines()
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        if section in ("Unit", "Service") and "=" in line:
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip())
    return keys


def specifiers(text, unit_name, instance):
    prefix = unit_name.split("@")[0].rsplit(".", 1)[0]
    full = unit_name.replace("@.", "@%s." % instance) if instance else unit_name
    table = {"i": instance or "", "I": (instance or "").replace("-", "/"),
             "n": full, "N": full.rsplit(".", 1)[0], "p": prefix, "%": "%"}

    def one(m):
        if m.group(1) not in table:
            raise SystemExit("FAIL: specifier %%%s is not emulated" %
                             m.group(1))
        return table[m.group(1)]
    return re.sub(r"%(.)", one, text)


def read_env_file(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            words = shlex.split(v) if v.strip() else [""]
            env[k.strip()] = " ".join(words)
    return env


def expand(words, env):
    """$VAR alone: its value split at blanks; ${VAR}: one word's text."""
    out = []
    for w in words:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", w)
        if m:
            out.extend(env.get(m.group(1), "").split())
            continue
        out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                          lambda m: env.get(m.group(1), ""), w))
    return out


def seconds(value):
    m = re.fullmatch(r"(\d+)\s*(s|min)?", value)
    if not m:
        return DEFAULT_TIMEOUT_S
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


class Notify:
    """The service manager's end of NOTIFY_SOCKET."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(path)
        self.path = path
        self.foreign = []
        self.pending = []  # (sender, text) read by drain()

    def fill(self):
        """The receive queue full of 1-byte datagrams of our own: the next
        sender blocks until we read (net.unix.max_dgram_qlen)."""
        filler = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        filler.setblocking(False)
        try:
            while True:
                filler.sendto(b"-", self.path)
        except BlockingIOError:
            pass
        finally:
            filler.close()

    def drain(self):
        """Read what is queued: fill()'s datagrams dropped, others kept."""
        while True:
            try:
                sender, data = self.receive(socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            if sender != os.getpid():
                self.pending.append((sender, data))

    def receive(self, flags=0):
        data, anc, _, _ = self.sock.recvmsg(
            4096, socket.CMSG_SPACE(struct.calcsize("3i")), flags)
        sender = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                sender = array.array("i", payload[:12])[0]
        return sender, data

    def next(self, pid, deadline, proc):
        """The next message from pid, or None at the deadline or exit."""
        while self.pending:
            sender, data = self.pending.pop(0)
            if sender == pid:
                return data.decode(errors="replace")
            self.foreign.append((sender, data))
        while time.monotonic() < deadline:
            self.sock.settimeout(0.1)
            try:
                sender, data = self.receive()
            except socket.timeout:
                if proc.poll() is not None:
                    return None
                continue
            if sender == os.getpid():
                continue  # fill()'s
            if sender != pid:
                self.foreign.append((sender, data))
                continue
            return data.decode(errors="replace")
        return None


def connects(addr):
    if addr.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = addr[5:]
    else:
        host, port = addr[4:].rsplit(":", 1)
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        target = (host.strip("[]"), int(port))
    s.settimeout(2)
    try:
        s.connect(target)
        return True
    except OSError:
        return False
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("unit")
    ap.add_argument("--root", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--instance")
    ap.add_argument("--syslog")
    ap.add_argument("--listening")
    ap.add_argument("--expect-failure", action="store_true")
    ap.add_argument("--probe", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    name = os.path.basename(a.unit)
    label = name.replace("@.", "@%s." % a.instance) if a.instance else name
    keys = parse_unit(a.unit)
    failed = 0

    def result(ok, case, text):
        nonlocal failed
        print("%s: %s %s: %s" % ("PASS" if ok else "FAIL", label, case, text))
        failed += not ok

    if keys.get("Type", [""])[-1] != "notify":
        print("FAIL: %s: Type=notify expected" % label)
        return 1
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    for k in ("TAPSTRIPE_DISKDIR",):  # the test's registry
        if k in os.environ:
            env[k] = os.environ[k]
    for e in keys.get("Environment", []):
        for w in shlex.split(specifiers(e, name, a.instance)):
            env.update([w.split("=", 1)])
    for ef in keys.get("EnvironmentFile", []):
        optional = ef.startswith("-")
        path = a.root + specifiers(ef.lstrip("-"), name, a.instance)
        if os.path.exists(path):
            env.update(read_env_file(path))
        elif not optional:
            print("FAIL: %s: EnvironmentFile %s is not installed" %
                  (label, path))
            return 1
    mapped = []
    for key, base, var in (("StateDirectory", "/var/lib", "STATE_DIRECTORY"),
                           ("RuntimeDirectory", "/run", "RUNTIME_DIRECTORY")):
        for d in keys.get(key, []):
            real = os.path.join(a.work, key, d)
            os.makedirs(real, exist_ok=True)
            env[var] = real
            mapped.append((os.path.join(base, d), real))
    exec_start = keys.get("ExecStart", [])
    if len(exec_start) != 1:
        print("FAIL: %s: one ExecStart= expected" % label)
        return 1
    words = expand(shlex.split(specifiers(exec_start[0], name, a.instance)),
                   env)
    for i, w in enumerate(words):
        for virtual, real in mapped:
            if w == virtual or w.startswith(virtual + "/"):
                words[i] = real + w[len(virtual):]
    program = a.root + words[0].lstrip("-@+!")
    if not os.access(program, os.X_OK):
        print("FAIL: %s: ExecStart's %s is not installed (no %s)" %
              (label, words[0], program))
        return 1
    argv = [program] + words[1:]
    print("run: %s" % " ".join(shlex.quote(w) for w in argv))
    env["NOTIFY_SOCKET"] = os.path.join(a.work, "notify.sock")
    notify = Notify(env["NOTIFY_SOCKET"])
    if a.syslog:
        argv = ["unshare", "--mount", "sh", "-c", SETUP_DEV, "sh",
                os.path.join(a.work, "olddev"), a.syslog] + argv
    log = open(os.path.join(a.work, label + ".log"), "w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    start_s = min(seconds(keys.get("TimeoutStartSec", ["90"])[-1]),
                  START_TIMEOUT_MAX_S)
    stop_s = seconds(keys.get("TimeoutStopSec", ["90"])[-1])
    try:
        # result() counts the failures; the checks return nothing else.
        if a.expect_failure:
            check_failure(proc, notify, start_s, result,
                          os.path.join(a.work, label + ".log"))
        else:
            run_checks(a, proc, notify, start_s, stop_s, result)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    if failed:  # what the service said, for the test's log
        with open(os.path.join(a.work, label + ".log"), errors="replace") as f:
            for line in f.read().splitlines()[-15:]:
                print("  | " + line)
    if notify.foreign:
        result(False, "notify", "messages from other processes: %r" %
               notify.foreign[:3])
    return 1 if failed else 0


def check_failure(proc, notify, start_s, result, log):
    """A start that must fail: exit non-zero, no READY=1, a reason."""
    deadline = time.monotonic() + start_s
    ready = False
    while True:
        msg = notify.next(proc.pid, deadline, proc)
        if msg is None:
            break
        ready = ready or "READY=1" in msg.splitlines()
    try:
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        rc = None
    with open(log, errors="replace") as f:
        why = (f.read().strip().splitlines() or ["(nothing)"])[-1]
    result(not ready and rc not in (0, None), "fails",
           "%s, exit %s: %s" % ("READY=1 sent" if ready else "no READY=1",
                                rc, why))


def blocked_in_send(pid):
    """Whether pid's main thread waits in sendto/sendmsg; None when this
    machine's numbers are not known."""
    calls = SEND_SYSCALLS.get(platform.machine())
    if not calls:
        return None
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] in calls
    except (OSError, IndexError):
        return False


def catch_message(proc, notify, deadline, check):
    """The service's next message, with check() run while the service is
    frozen inside the send of it: (message or None, check's result,
    whether it was frozen there)."""
    notify.fill()
    caught = None
    while time.monotonic() < deadline and proc.poll() is None:
        blocked = blocked_in_send(proc.pid)
        if blocked is None:
            break  # cannot tell: check after the message instead
        if blocked:
            os.kill(proc.pid, signal.SIGSTOP)
            caught = check()
            break
        time.sleep(POLL_S)
    notify.drain()  # fill()'s datagrams out: the service's can go in
    frozen = caught is not None
    if frozen:
        os.kill(proc.pid, signal.SIGCONT)
    msg = notify.next(proc.pid, deadline, proc)
    if not frozen and msg is not None:
        caught = check()
    return msg, caught, frozen


def run_checks(a, proc, notify, start_s, stop_s, result):
    """ready, serves, stopping (not run when it never got ready)."""
    deadline = time.monotonic() + start_s
    check = (lambda: connects(a.listening)) if a.listening else bool
    while True:
        msg, listening, frozen = catch_message(proc, notify, deadline,
                                               check)
        if msg is None:
            result(False, "ready", "no READY=1 (%s)" %
                   ("exit %s" % proc.returncode if proc.poll() is not None
                    else "timed out after %d s" % start_s))
            return
        fields = dict(l.split("=", 1) for l in msg.splitlines() if "=" in l)
        if fields.get("READY") == "1":
            break
    if a.listening:
        result(listening, "ready", "READY=1 (STATUS=%s) when %s %s (%s)" %
               (fields.get("STATUS", ""), a.listening,
                "accepts connections" if listening
                else "does NOT listen yet",
                "the service frozen in its send" if frozen
                else "checked after it"))
    if a.probe:
        p = subprocess.run(a.probe, capture_output=True, text=True,
                           timeout=30)
        result(p.returncode == 0, "serves", "%s: %s" % (
            " ".join(a.probe), (p.stdout + p.stderr).strip().splitlines()[-1:]
            if p.returncode else "ok"))
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + stop_s
    stopping = False
    while not stopping:
        msg = notify.next(proc.pid, deadline, proc)
        if msg is None:
            break
        stopping = "STOPPING=1" in msg.splitlines()
    try:
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        rc = None
    result(stopping and rc == 0, "stopping",
           "SIGTERM: %s, %s" % ("STOPPING=1" if stopping else
                                "no STOPPING=1",
                                "exit %s" % rc if rc is not None else
                                "still running after %d s" % stop_s))


if __name__ == "__main__":
    sys.exit(main())

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
            (at most START_TIMEOUT_MAX_S here);
            at that moment (the process is stopped with SIGSTOP at once)
            --listening ADDR (unix:PATH or tcp:HOST:PORT; {port} is the
            "port N" of STATUS=) accepts a connection: READY=1 sent before
            the service listens fails here, as does one never sent
  serves    then (SIGCONT) --probe CMD succeeds ({port} as above)
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
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time

DEFAULT_TIMEOUT_S = 90
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

    def next(self, pid, deadline, proc):
        """The next message from pid, or None at the deadline or exit."""
        while time.monotonic() < deadline:
            self.sock.settimeout(0.1)
            try:
                data, anc, _, _ = self.sock.recvmsg(
                    4096, socket.CMSG_SPACE(struct.calcsize("3i")))
            except socket.timeout:
                if proc.poll() is not None:
                    return None
                continue
            sender = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and \
                   kind == socket.SCM_CREDENTIALS:
                    sender = array.array("i", payload[:12])[0]
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


def run_checks(a, proc, notify, start_s, stop_s, result):
    """ready, serves, stopping (not run when it never got ready)."""
    deadline = time.monotonic() + start_s
    status = ""
    while True:
        msg = notify.next(proc.pid, deadline, proc)
        if msg is None:
            result(False, "ready", "no READY=1 (%s)" %
                   ("exit %s" % proc.returncode if proc.poll() is not None
                    else "timed out after %d s" % start_s))
            return
        fields = dict(l.split("=", 1) for l in msg.splitlines() if "=" in l)
        status = fields.get("STATUS", status)
        if fields.get("READY") == "1":
            break
    os.kill(proc.pid, signal.SIGSTOP)  # freeze what READY=1 promised
    port = re.search(r"port (\d+)", status)
    fill = (lambda s: s.replace("{port}", port.group(1) if port else "?"))
    if a.listening:
        ok = connects(fill(a.listening))
        result(ok, "ready", "READY=1 (STATUS=%s) when %s %s" %
               (status, fill(a.listening),
                "accepts connections" if ok else "does NOT listen yet"))
    os.kill(proc.pid, signal.SIGCONT)
    if a.probe:
        cmd = [fill(w) for w in a.probe]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        result(p.returncode == 0, "serves", "%s: %s" % (
            " ".join(cmd), (p.stdout + p.stderr).strip().splitlines()[-1:]
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

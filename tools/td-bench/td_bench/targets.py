# SPDX-License-Identifier: BSD-3-Clause
"""targets.py - what td-bench measures, and one run against it.

  Lab       a private work directory and every process td-bench started,
            stopped by PID (never by name) when the run ends or is
            interrupted
  Backing   the physical target: a file td-bench creates in --dir, or an
            existing file or block device (--backing)
  Tapdisk   tapdisk serving a chain on a shm socket (td-front) and an NBD
            Unix socket (fio's nbd engine) at once
  QemuNbd   qemu-nbd --cache=none --aio=native on the same backing
  dd(), fio(), td_front()  one run, returning a Run (seconds, bytes, ios,
            MiB/s, IOPS, and the backend's counters when tapdisk served it;
            td_front also the CPU seconds tapdisk and td-front spent)
"""
import json
import os
import re
import resource
import signal
import subprocess
import tempfile
import time

from .core import MIB, BenchError, fs_type, short_size

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0


class Run:
    def __init__(self, seconds, nbytes, ios, backend=None, raw=None):
        self.seconds, self.bytes, self.ios = seconds, nbytes, ios
        self.backend = backend or {}
        self.raw = raw
        self.cpu = {}  # td_front: {"tapdisk": s, "td-front": s} over the run

    def cpu_us_per_io(self, who):
        """CPU microseconds process who spent per request, or None."""
        s = self.cpu.get(who)
        return s * 1e6 / self.ios if s is not None and self.ios else None

    @property
    def mib_s(self):
        return self.bytes / MIB / self.seconds if self.seconds > 0 else 0.0

    @property
    def iops(self):
        return self.ios / self.seconds if self.seconds > 0 else 0.0


class Lab:
    def __init__(self, env, work_parent, tapdisk_opts=(), keep=False):
        self.env = env
        self.work = tempfile.mkdtemp(prefix="td-bench.", dir=work_parent)
        self.tapdisk_opts = list(tapdisk_opts)
        self.procs = []
        self.dirs = []  # backing files' directories, removed even with keep
        self.keep = keep

    def path(self, name):
        return os.path.join(self.work, name)

    def spawn(self, argv, log):
        with open(log, "ab") as lf:
            p = subprocess.Popen(argv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def close(self):
        for p in list(self.procs):
            self.stop(p)
        for d in self.dirs:
            subprocess.run(["rm", "-rf", d])
        if not self.keep:
            subprocess.run(["rm", "-rf", self.work])


def wait_socket(proc, path, what, log):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    tail = open(log, errors="replace").read()[-2000:] if os.path.exists(log) else ""
    raise BenchError("%s did not start (exit %s); its log:\n%s" % (what, proc.poll(), tail))


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    f = s[s.rfind(")") + 2:].split()
    return int(f[11]) + int(f[12])


def cpu_seconds(pid):
    """utime + stime of process pid (/proc/PID/stat), in seconds."""
    return cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    """utime + stime of every child waited for so far (ours: td-front)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Backing:
    """The physical target: a file of size bytes (created in dir and filled,
    so that reads read data), or an existing file or block device."""

    def __init__(self, lab, directory=None, size=None, path=None, fill=True):
        self.created = path is None
        self.lab = lab
        if path is None:
            # Registered at once: Lab.close removes it whatever fails later.
            d = tempfile.mkdtemp(prefix="td-bench-disk.", dir=directory)
            lab.dirs.append(d)
            self.path = os.path.join(d, "disk.img")
            self.size = size
            with open(self.path, "wb") as f:
                f.truncate(size)
            if fill:
                run_cmd(["dd", "if=/dev/zero", "of=" + self.path, "bs=1M",
                         "count=%d" % (size // MIB), "oflag=direct", "conv=notrunc"],
                        "filling the backing file")
        else:
            self.path = path
            with open(path, "rb") as f:
                self.size = f.seek(0, os.SEEK_END)
            if size and size > self.size:
                raise BenchError("%s holds %d bytes, less than --size" % (path, self.size))
            self.size = size or self.size
        self.fs = fs_type(self.path)

    def remove(self):
        if self.created:
            d = os.path.dirname(self.path)
            subprocess.run(["rm", "-rf", d])
            if d in self.lab.dirs:
                self.lab.dirs.remove(d)


class Tapdisk:
    """tapdisk -a CHAIN, on a shm socket and an NBD Unix socket."""

    def __init__(self, lab, chain, name="bench", opts=()):
        """opts: this tapdisk's own options, ahead of the lab's (--tapdisk-opt
        comes last, so that it wins)."""
        self.lab, self.chain = lab, chain
        self.shm = lab.path("%s.shm" % name)
        self.nbd = lab.path("%s.nbd" % name)
        self.log = lab.path("%s.tapdisk.log" % name)
        for p in (self.shm, self.nbd):
            if os.path.exists(p):
                os.unlink(p)
        argv = [lab.env.program("tapdisk"), "--foreground", "-a", chain,
                "--shm", self.shm, "--nbd", "unix:" + self.nbd,
                "--run-dir", lab.work, "--log-level", "warn"] + list(opts) + lab.tapdisk_opts
        self.proc = lab.spawn(argv, self.log)
        wait_socket(self.proc, self.shm, "tapdisk -a %s" % chain, self.log)
        wait_socket(self.proc, self.nbd, "tapdisk -a %s" % chain, self.log)
        self.control = os.path.join(lab.work, "tapdisk-%d.sock" % self.proc.pid)
        wait_socket(self.proc, self.control, "tapdisk's control socket", self.log)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def nbd_uri(self):
        return "nbd+unix:///?socket=" + self.nbd

    def stop(self):
        self.lab.stop(self.proc)
        if self.proc.returncode not in (0, -signal.SIGTERM):
            raise BenchError("tapdisk exited %s; its log:\n%s" % (
                self.proc.returncode, open(self.log, errors="replace").read()[-2000:]))


class QemuNbd:
    def __init__(self, lab, path):
        self.lab = lab
        self.sock = lab.path("qemu-nbd.sock")
        self.log = lab.path("qemu-nbd.log")
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.proc = lab.spawn(["qemu-nbd", "--cache=none", "--aio=native", "-f", "raw",
                               "--shared=16", "-t", "-k", self.sock, path], self.log)
        wait_socket(self.proc, self.sock, "qemu-nbd", self.log)
        self.nbd_uri = "nbd+unix:///?socket=" + self.sock
        self.pid = self.proc.pid

    def stop(self):
        self.lab.stop(self.proc)


def run_cmd(argv, what, env=None):
    p = subprocess.run(argv, capture_output=True, text=True,
                       env=dict(env or os.environ, LC_ALL="C"))
    if p.returncode:
        raise BenchError("%s failed (exit %d): %s\n%s" % (
            what, p.returncode, " ".join(argv), (p.stderr or p.stdout)[-2000:]))
    return p


_DD_RE = re.compile(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", re.M)


def dd(path, op, bs, nbytes, direct=True, fdatasync=False):
    """dd's own timing, as the paper took it: write from /dev/zero or read to
    /dev/null, count = nbytes / bs; a buffered write is timed with its
    fdatasync (conv=fdatasync)."""
    count = nbytes // bs
    if op == "write":
        conv = "conv=notrunc" + (",fdatasync" if fdatasync else "")
        argv = ["dd", "if=/dev/zero", "of=" + path, "bs=%d" % bs, "count=%d" % count, conv]
        if direct:
            argv.append("oflag=direct")
    else:
        argv = ["dd", "if=" + path, "of=/dev/null", "bs=%d" % bs, "count=%d" % count]
        if direct:
            argv.append("iflag=direct")
    p = run_cmd(argv, "dd")
    m = _DD_RE.search(p.stderr)
    if not m:
        raise BenchError("cannot read dd's summary: %r" % p.stderr[-300:])
    return Run(float(m.group(2)), int(m.group(1)), count)


FIO_RW = {"seqread": "read", "seqwrite": "write", "randread": "randread",
          "randwrite": "randwrite", "randrw70": "randrw"}


def fio(lab, workload, bs, qd, size, runtime=None, path=None, uri=None, nbytes=None,
        engine="libaio"):
    """fio on a file (libaio O_DIRECT, or engine=psync) or an NBD URI."""
    out = lab.path("fio.json")
    argv = ["fio", "--name=job", "--rw=" + FIO_RW[workload], "--bs=%d" % bs,
            "--iodepth=%d" % qd, "--size=%d" % size, "--randrepeat=0", "--norandommap",
            "--output-format=json", "--output=" + out]
    if workload == "randrw70":
        argv.append("--rwmixread=70")
    if runtime:
        argv += ["--time_based", "--runtime=%dms" % max(1, round(runtime * 1000))]
    elif nbytes:
        argv.append("--io_size=%d" % nbytes)
    if uri:
        argv += ["--ioengine=nbd", "--uri=" + uri]
    else:
        argv += ["--filename=" + path, "--ioengine=" + engine, "--direct=1"]
    run_cmd(argv, "fio")
    with open(out) as f:
        text = f.read()
    try:  # fio may put notes ahead of the JSON
        j = json.loads(text[text.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError):
        raise BenchError("fio wrote no usable JSON: %s\n%s" % (" ".join(argv), text[:1000]))
    ios = j["read"]["total_ios"] + j["write"]["total_ios"]
    nb = j["read"]["io_bytes"] + j["write"]["io_bytes"]
    secs = max(j["read"]["runtime"], j["write"]["runtime"]) / 1000.0 or j["job_runtime"] / 1000.0
    return Run(secs, nb, ios, raw=j)


TDF_RW = {"seqread": ("seq", "read"), "seqwrite": ("seq", "write"),
          "randread": ("rand", "read"), "randwrite": ("rand", "write"),
          "randrw70": ("rand", "mixed")}


def td_front(lab, td, args, seed=1):
    """td-front over tapdisk td's shm ring; args are td-front's workload
    options.  The backend's counters come with the result."""
    argv = [lab.env.program("td-front"), "--shm", td.shm, "--control", td.control,
            "--json", "--quiet", "--no-progress", "--seed", str(seed)] + list(args)
    td0, front0 = cpu_seconds(td.pid), children_cpu_seconds()
    p = run_cmd(argv, "td-front")
    td1, front1 = cpu_seconds(td.pid), children_cpu_seconds()
    j = json.loads(p.stdout)
    if j.get("io_errors"):
        raise BenchError("td-front: %d I/O errors" % j["io_errors"])
    r = Run(j["elapsed_us"] / 1e6, j["read_bytes"] + j["write_bytes"], j["ios"],
            backend=j.get("backend") or {}, raw=j)
    r.cpu = {"tapdisk": td1 - td0, "td-front": front1 - front0}
    return r


def td_front_workload(workload, bs, qd, runtime=None, nbytes=None, frontend=()):
    pattern, rw = TDF_RW[workload]
    args = ["--pattern", pattern, "--rw", rw, "--bs", short_size(bs), "--qd", str(qd)]
    if rw == "mixed":
        args += ["--rwmix", "70"]
    if runtime:
        args += ["--time", "%g" % runtime]
    if nbytes:
        args += ["--bytes", str(nbytes)]
    return args + list(frontend)

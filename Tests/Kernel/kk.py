"""Helpers of the guest-side kernel suite: sysfs, the expected readings, running motion-monitor,
recording results."""
import json
import math
import threading
import os
import signal
import subprocess
import time
import traceback

IIO = "/sys/bus/iio/devices"
STANDARD_GRAVITY = 9.80665
KIND_PREFIX = {"accelerometer": "accel", "gyroscope": "anglvel", "magnetometer": "magn"}


# --- sysfs -----------------------------------------------------------------------------------

def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        if default is not None:
            return default
        raise


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


MOTION_TYPES = ("accel", "anglvel", "magn")


def device_keys(entries):
    """The suite's key of each device of `entries` [(name, channel type or None)]: its name, or
    where several devices share a name (kmx61's accelerometer and magnetometer are both
    `kmx611021`, the name of its i2c_device_id) the name and the type of its first motion channel,
    `kmx611021:accel`. The guest (devices), iio-sim's side (sysfs_tree) and the host's differential
    test (from --list --json and the fixtures) key devices so."""
    counts = {}
    for name, _ in entries:
        counts[name] = counts.get(name, 0) + 1
    return [name if counts[name] == 1 or not kind else f"{name}:{kind}" for name, kind in entries]


def sysfs_name(key):
    """The IIO name of the device with suite key `key` (device_keys)."""
    return key.split(":", 1)[0]


def channel_type(dev):
    """The first motion channel type (accel, anglvel, magn) device `dev` has a raw x file of."""
    return next((t for t in MOTION_TYPES if os.path.exists(f"{IIO}/{dev}/in_{t}_x_raw")), None)


def devices():
    """IIO device key (device_keys: its name, unless shared) -> id (iio:deviceN), for the devices
    present now."""
    ids = [d for d in sorted(os.listdir(IIO)) if d.startswith("iio:device")]
    entries = [(read(f"{IIO}/{d}/name", ""), None) for d in ids]
    shared = {n for n, _ in entries if sum(1 for m, _ in entries if m == n) > 1}
    entries = [(n, channel_type(d) if n in shared else None) for (n, _), d in zip(entries, ids)]
    return dict(zip(device_keys(entries), ids))


def wait_devices(names, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        now = devices()
        if all(n in now for n in names):
            return now
        if time.monotonic() > deadline:
            raise RuntimeError(f"devices missing after {timeout} s: {sorted(set(names) - set(now))}")
        time.sleep(0.1)


def wait_gone(ids, timeout=15):
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"{IIO}/{i}") for i in ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"still present after {timeout} s: {ids}")
        time.sleep(0.05)


def first_existing(dev, names):
    for n in names:
        p = f"{IIO}/{dev}/{n}"
        if os.path.exists(p):
            return n, read(p)
    return None, None


def mount_matrix(dev, prefix):
    """The device's own mount matrix in whichever spelling its driver uses, and the file's name."""
    name, text = first_existing(dev, [f"{prefix}_mount_matrix", "mount_matrix", "in_mount_matrix"])
    if text is None:
        return None, [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]
    rows = [[float(x) for x in r.split(",")] for r in text.split(";")]
    return name, rows


# Drivers whose published scale is not in the ABI's unit, and the factor IIOMotion corrects it by
# (Sources/IIOMotionCore/Device/KernelQuirks.swift, which names the kernel line): device name -> {kind: factor}.
# hmc5843_core.c:86 "Scaling factors: 10000000/Gain" as IIO_VAL_INT_PLUS_NANO is 0.01/Gain, not gauss.
SCALE_QUIRKS = {n: {"magnetometer": 100.0} for n in ("hmc5843", "hmc5883", "hmc5883l", "hmc5983")}
# fxas21002c_core.c:609-614 publishes range/32 (62.5 at ±2000 °/s): millidegrees per second, not rad/s.
SCALE_QUIRKS["fxas21002c"] = {"gyroscope": math.pi / 180000}


def quirk_factor(dev, kind):
    return SCALE_QUIRKS.get(read(f"{IIO}/{dev}/name", ""), {}).get(kind, 1.0)


def expected(dev, kind, si=False, raws=None):
    """What --once must print for this sensor: (raw + offset) × scale from the device's own files,
    rotated by its mount matrix, then Core Motion's units and sign."""
    p = KIND_PREFIX[kind]
    si_v = []
    for i, axis in enumerate("xyz"):
        raw = raws[i] if raws is not None else int(read(f"{IIO}/{dev}/in_{p}_{axis}_raw"))
        _, scale = first_existing(dev, [f"in_{p}_{axis}_scale", f"in_{p}_scale"])
        _, offset = first_existing(dev, [f"in_{p}_{axis}_offset", f"in_{p}_offset"])
        si_v.append((raw + float(offset or 0)) * float(scale if scale is not None else 1) * quirk_factor(dev, kind))
    _, m = mount_matrix(dev, f"in_{p}")
    v = [sum(m[r][c] * si_v[c] for c in range(3)) for r in range(3)]
    if kind == "accelerometer":
        return v if si else [0 - x / STANDARD_GRAVITY for x in v]
    if kind == "magnetometer":
        return [x * 100 for x in v]
    return v


def converter(dev, kind):
    """expected() for given raw values, with the device's scale, offset and matrix read now (so it
    still works once the device is gone)."""
    p = KIND_PREFIX[kind]
    scale = [float(first_existing(dev, [f"in_{p}_{a}_scale", f"in_{p}_scale"])[1] or 1) * quirk_factor(dev, kind)
             for a in "xyz"]
    offset = [float(first_existing(dev, [f"in_{p}_{a}_offset", f"in_{p}_offset"])[1] or 0) for a in "xyz"]
    _, m = mount_matrix(dev, f"in_{p}")

    def f(r):
        v = [(r[i] + offset[i]) * scale[i] for i in range(3)]
        v = [sum(m[i][c] * v[c] for c in range(3)) for i in range(3)]
        if kind == "accelerometer":
            return [0 - x / STANDARD_GRAVITY for x in v]
        return [x * 100 for x in v] if kind == "magnetometer" else v
    return f


def raws(dev, kind):
    p = KIND_PREFIX[kind]
    return [int(read(f"{IIO}/{dev}/in_{p}_{a}_raw")) for a in "xyz"]


def close(a, b, rel=1e-9, abs_=1e-12):
    return all(math.isclose(x, y, rel_tol=rel, abs_tol=abs_) for x, y in zip(a, b)) and len(a) == len(b)


# --- writable attributes (leave-as-found) ------------------------------------------------------

SKIP_DIRS = {"power", "subsystem", "device", "of_node", "firmware_node", "driver"}


def writable_attributes(dev):
    """Every attribute of the device the kernel lets root write, with its contents now."""
    base = f"{IIO}/{dev}"
    out = {}
    for root, dirs, files in os.walk(base):
        rel = os.path.relpath(root, base)
        depth = 0 if rel == "." else rel.count("/") + 1
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and depth < 1 and not os.path.islink(os.path.join(root, d))]
        for f in files:
            path = os.path.join(root, f)
            name = f if rel == "." else f"{rel}/{f}"
            if name in ("uevent",) or name.startswith("events/"):
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not st.st_mode & 0o200:
                continue
            try:
                with open(path) as fh:
                    out[name] = fh.read().strip()
            except OSError as e:
                out[name] = f"<{os.strerror(e.errno)}>"
    return out


def diff_attributes(before, after):
    lines = []
    for k in sorted(set(before) | set(after)):
        if before.get(k) != after.get(k):
            lines.append(f"{k}: {before.get(k)!r} -> {after.get(k)!r}")
    return lines


# --- processes -------------------------------------------------------------------------------

class Run:
    def __init__(self, args, rc, out, err, seconds):
        self.args, self.rc, self.out, self.err, self.seconds = args, rc, out, err, seconds

    @property
    def notes(self):
        return [l for l in self.err.splitlines() if l.startswith("note:")]

    @property
    def json(self):
        rows = []
        for line in self.out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    rows.append({"unparsed": line})
        return rows

    def readings(self, sensor=None):
        return [r for r in self.json if sensor is None or r.get("sensor") == sensor]

    def describe(self):
        err = self.err.strip().splitlines()
        return (f"`{' '.join(self.args)}` exit {self.rc} in {self.seconds:.1f} s; stderr: "
                + (" | ".join(err[-6:]) if err else "(none)"))


def user_prefix(user):
    if user is None:
        return []
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]


class Tools:
    def __init__(self, repo, build):
        self.repo = repo
        self.mm = os.path.join(repo, build, "motion-monitor")
        self.sim = os.path.join(repo, build, "iio-sim")

    def env(self):
        e = dict(os.environ)
        e.pop("NO_COLOR", None)
        e["TERM"] = "dumb"
        return e

    def run(self, args, user=None, timeout=60, exe=None):
        cmd = user_prefix(user) + [exe or self.mm] + list(args)
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env(),
                               stdin=subprocess.DEVNULL, cwd="/tmp")
            return Run(cmd, p.returncode, p.stdout, p.stderr, time.monotonic() - t)
        except subprocess.TimeoutExpired as e:
            return Run(cmd, "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""),
                       (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""),
                       time.monotonic() - t)

    def start(self, args, user=None, exe=None, stdout=subprocess.PIPE):
        cmd = user_prefix(user) + [exe or self.mm] + list(args)
        p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=self.env(),
                             stdin=subprocess.DEVNULL, cwd="/tmp")
        p.kk_cmd, p.kk_t = cmd, time.monotonic()
        return p

    @staticmethod
    def finish(p, timeout=30):
        try:
            out, err = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            rc = "timeout"
        return Run(p.kk_cmd, rc, out or "", err or "", time.monotonic() - p.kk_t)


# --- results ---------------------------------------------------------------------------------

class Results:
    def __init__(self, path):
        self.path = path
        self.f = open(path, "a", buffering=1)
        self.counts = {"pass": 0, "fail": 0, "skip": 0}
        self.lock = threading.Lock()

    def record(self, case, device, status, detail="", seconds=0.0, finding=None):
        rec = {"case": case, "device": device, "status": status, "detail": detail, "seconds": round(seconds, 2)}
        if finding:
            rec["finding"] = finding
        with self.lock:
            self.f.write(json.dumps(rec) + "\n")
            self.counts[status] += 1
            print(f"{status.upper():4}  {case:<16} {device:<14} {seconds:5.1f}s  {detail[:300]}", flush=True)


class Check(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Check(msg)


def test(results, case, device, pending=None):
    """Decorator-like runner: results.record after calling fn(); Check -> fail; other errors too.
    With `pending` (a list) the test is queued there instead, to run later (in parallel)."""
    def deco(fn):
        if pending is not None:
            pending.append((device, lambda: run_test(results, case, device, fn)))
            return fn
        run_test(results, case, device, fn)
        return fn
    return deco


def run_test(results, case, device, fn):
    if True:
        t = time.monotonic()
        try:
            out = fn()
            detail, status = (out, "pass") if not isinstance(out, tuple) else (out[1], out[0])
            results.record(case, device, status, detail or "", time.monotonic() - t)
        except Check as e:
            results.record(case, device, "fail", str(e), time.monotonic() - t)
        except Exception as e:          # a broken test is a failing test
            results.record(case, device, "fail", f"{type(e).__name__}: {e} :: "
                           + traceback.format_exc().strip().splitlines()[-3].strip(), time.monotonic() - t)


def send_signal_later(p, sig, after):
    time.sleep(after)
    try:
        p.send_signal(sig)
    except ProcessLookupError:
        pass

#!/usr/bin/env python3
"""The kernel suite's differential test, host side: the same motion-monitor commands on iio-sim with
the fixtures the guest recorded (RESULTS/fixtures/*.json, `iio-sim record` of every device) as on the
kernel (what the guest saved in RESULTS/kernel/diff/), and the results compared device by device:

  --list --json               every field of the device's entry (sensors, buffered, trigger,
                              sampling frequencies, mount matrices, label, location)
  --once --json               the same sensors, exactly the same values, the same notes
  --json -v --duration 2.5    the same mode per sensor (buffered or polled), the same note, the same
                              values (the recorded raw values are constant, and so are the guest's:
                              the HID hub holds its sample)
  the device's files          names, modes and contents, /dev/iio:deviceN, the buffer driven by
                              hand (Tests/Kernel/sysfs_tree.py: enable's errno, raw reads and
                              length writes while it runs), what each sampling_frequency file
                              answers to a list of values, and a triggered buffer's first scan
                              (bytes)

Device ids (iio:deviceN) differ between the two (the guest numbers devices as they probe) and are
compared as the device's name; timestamps are not compared. It runs on the host, as a user's recording
would be replayed on ours: the fixture travels as a file, and iio-sim (user namespaces and FUSE) runs
at native speed instead of under TCG.

Each device's result is one JSON line in RESULTS/host-results.jsonl (case "differential"), which
report.py prints with the guest's.

  differential.py RESULTS [--build .build/debug] [--jobs N]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kk  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SENSORS = {"accelerometer", "gyroscope", "magnetometer"}
ID = re.compile(r"iio:device\d+")


class Differences(Exception):
    pass


def run(cmd, timeout=90):
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           cwd="/tmp", env={k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TERM": "dumb"})
        return {"rc": p.returncode, "out": p.stdout, "err": p.stderr, "seconds": time.monotonic() - t}
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return {"rc": "timeout", "out": text(e.stdout), "err": text(e.stderr), "seconds": time.monotonic() - t}


def json_lines(text):
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def notes(err):
    return [l for l in err.splitlines() if l.startswith("note:")]


def named(text, ids):
    """`text` with each device id replaced by the device's name (ids: id -> name)."""
    return ID.sub(lambda m: f"<{ids.get(m.group(0), m.group(0))}>", text)


def stream_modes(err):
    modes = {}
    for l in err.splitlines():
        m = re.match(r"^(accelerometer|gyroscope|magnetometer): .*?\b(buffered|polled)\b", l)
        if m:
            modes[m.group(1)] = m.group(2)
    return modes


def readings(out, ids):
    """(sensor, device name, x, y, z) of each sensor reading, without timestamps."""
    return [(r["sensor"], ids.get(r.get("device"), r.get("device")), r["x"], r["y"], r["z"])
            for r in json_lines(out) if r.get("sensor") in SENSORS]


def fixture_keys(devices):
    """The suite's keys (kk.device_keys) of a fixture's devices: their names, unless shared."""
    def kind(d):
        ids = [c["id"] for c in d.get("channels", [])]
        return next((t for t in kk.MOTION_TYPES if f"{t}_x" in ids), None)
    return kk.device_keys([(d["name"], kind(d)) for d in devices])


def list_by_key(entries):
    """--list --json's entries by the suite's key (kk.device_keys) of their device."""
    prefix = {"accelerometer": "accel", "gyroscope": "anglvel", "magnetometer": "magn"}
    keys = kk.device_keys([(e["name"], prefix.get((e.get("sensors") or [None])[0])) for e in entries])
    return dict(zip(keys, entries))


class Differential:
    def __init__(self, results, build):
        self.results = results
        self.mm = os.path.join(REPO, build, "motion-monitor")
        self.sim = os.path.join(REPO, build, "iio-sim")
        self.diff = os.path.join(results, "kernel", "diff")
        self.fixtures = {}
        fdir = os.path.join(results, "fixtures")
        for f in sorted(os.listdir(fdir)) if os.path.isdir(fdir) else []:
            if f.endswith(".json"):
                path = os.path.join(fdir, f)
                with open(path) as fh:
                    self.fixtures[path] = fixture_keys(json.load(fh)["devices"])
        klist = self.load("list.json")
        self.kernel_ids = {v: k for k, v in (klist or {}).get("ids", {}).items()}  # id -> name
        self.kernel_list = list_by_key(json.loads(klist["out"])) if klist and klist["rc"] == 0 else {}
        self.kernel_stream = self.load("default-stream.json") or {}

    def load(self, name):
        p = os.path.join(self.diff, name)
        if not os.path.exists(p):
            return None
        with open(p) as f:
            return json.load(f)

    def sim_run(self, fixtures, args, timeout=90):
        cmd = [self.sim] + sum((["--fixture", f] for f in fixtures), []) + ["--", self.mm] + args
        r = run(cmd, timeout)
        r["cmd"] = " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in cmd)
        return r

    @staticmethod
    def describe(r):
        err = r["err"].strip().splitlines()
        return f"`{r['cmd']}` exit {r['rc']}; stderr: " + (" | ".join(err[-4:]) if err else "(none)")

    def sim_list(self):
        """--list --json on iio-sim with every recorded fixture at once: name -> entry, and id -> name."""
        r = self.sim_run(list(self.fixtures), ["--list", "--json"])
        if r["rc"] != 0:
            return None, r
        return list_by_key(json.loads(r["out"])), r

    def compare(self, path, names, name, sim_list):
        diffs = []
        index = names.index(name)
        sim_id = f"iio:device{index}"
        sim_ids = {f"iio:device{i}": n for i, n in enumerate(names)}
        did = []

        # --list --json
        k, s = self.kernel_list.get(name), (sim_list or {}).get(name)
        if k is None:
            diffs.append("the kernel's --list --json has no entry")
        elif s is None:
            diffs.append("iio-sim's --list --json has no entry")
        else:
            for key in sorted(set(k) | set(s)):
                if key == "id":
                    continue
                if k.get(key) != s.get(key):
                    diffs.append(f"list {key}: kernel {json.dumps(k.get(key))}, iio-sim {json.dumps(s.get(key))}")
            did.append("list")

        # --once --json
        ko = self.load(f"once-{name}.json")
        if ko is None:
            diffs.append("no --once of the kernel saved")
        else:
            so = self.sim_run([path], ["--once", "--json", "--device", sim_id])
            if so["rc"] != ko["rc"]:
                diffs.append(f"once: exit {ko['rc']} on the kernel, {so['rc']} on iio-sim: {self.describe(so)}")
            kr, sr = readings(ko["out"], self.kernel_ids), readings(so["out"], sim_ids)
            if kr != sr:
                diffs.append(f"once readings: kernel {kr}, iio-sim {sr}")
            kn = [named(n, self.kernel_ids) for n in notes(ko["err"])]
            sn = [named(n, sim_ids) for n in notes(so["err"])]
            if kn != sn:
                diffs.append(f"once notes: kernel {kn}, iio-sim {sn}")
            did.append(f"once ({len(kr)} readings)")

        # The default continuous run: mode, note, values.
        ks = self.kernel_stream.get(name)
        if ks is not None:
            ss = self.sim_run([path], ["--json", "-v", "--duration", "2.5", "--device", sim_id])
            if ss["rc"] != ks["rc"]:
                diffs.append(f"stream: exit {ks['rc']} on the kernel, {ss['rc']} on iio-sim: {self.describe(ss)}")
            smodes = stream_modes(ss["err"])
            if ks["modes"] != smodes:
                diffs.append(f"stream modes: kernel {ks['modes']}, iio-sim {smodes}")
            kn = [named(n, self.kernel_ids) for n in ks["notes"]]
            sn = [named(n, sim_ids) for n in notes(ss["err"])]
            if kn != sn:
                diffs.append(f"stream notes: kernel {kn}, iio-sim {sn}")
            kv, sv = sorted(set(readings(ks["out"], self.kernel_ids))), sorted(set(readings(ss["out"], sim_ids)))
            if kv != sv:
                diffs.append(f"stream values: kernel {kv[:4]}{'…' if len(kv) > 4 else ''}, "
                             f"iio-sim {sv[:4]}{'…' if len(sv) > 4 else ''}")
            if not sv:
                diffs.append("stream: no readings on iio-sim")
            did.append(f"stream ({'/'.join(f'{a[:5]} {b}' for a, b in sorted(smodes.items()))})")
        # The device's files and how its buffer answers (Tests/Kernel/sysfs_tree.py).
        kt = self.load(f"tree-{name}.json")
        if kt is not None:
            st = self.sim_trees.get(path, {}).get(name)
            if st is None:
                diffs.append(f"no tree of iio-sim: {self.tree_errors.get(path, '')}")
            else:
                for key in sorted(set(kt["tree"]) | set(st["tree"])):
                    a, b = kt["tree"].get(key, "absent"), st["tree"].get(key, "absent")
                    if a != b:
                        diffs.append(f"{key}: kernel {json.dumps(a)}, iio-sim {json.dumps(b)}")
                if kt["probe"] != st["probe"]:
                    ka, sa = kt["probe"] or {}, st["probe"] or {}
                    diffs.append("buffer probe: " + ", ".join(
                        f"{k}: kernel {ka.get(k, 'absent')!r}, iio-sim {sa.get(k, 'absent')!r}"
                        for k in sorted(set(ka) | set(sa)) if ka.get(k) != sa.get(k)) if ka and sa else
                        f"buffer probe: kernel {kt['probe']}, iio-sim {st['probe']}")
                kf, sf = kt.get("frequencies"), st.get("frequencies")
                if kf is not None and kf != sf:
                    for file in sorted(set(kf) | set(sf or {})):
                        a, b = kf.get(file, {}), (sf or {}).get(file, {})
                        bad = [f"{v!r}: kernel {a.get(v, 'absent')!r}, iio-sim {b.get(v, 'absent')!r}"
                               for v in list(a) + [v for v in b if v not in a] if a.get(v) != b.get(v)]
                        if bad:
                            diffs.append(f"{file} writes: " + ", ".join(bad))
                if kt.get("scan") is not None and kt.get("scan") != st.get("scan"):
                    diffs.append(f"first scan: kernel {kt['scan']}, iio-sim {st.get('scan')}")
                did.append(f"{len(kt['tree'])} files" + (", buffer probe" if kt["probe"] else "")
                           + (f", scan {kt['scan'].get('first scan')}" if kt.get("scan") else "")
                           + (f", {sum(len(v) for v in kf.values())} frequency writes" if kf else ""))
        if diffs:
            raise Differences("; ".join(diffs))
        return f"same on iio-sim with {os.path.basename(path)}: " + ", ".join(did)

    def main(self, jobs):
        out = open(os.path.join(self.results, "host-results.jsonl"), "a", buffering=1)

        def record(device, status, detail, seconds):
            out.write(json.dumps({"case": "differential", "device": device, "status": status,
                                  "detail": detail, "seconds": round(seconds, 2)}) + "\n")

        if not self.fixtures:
            record("all", "fail", "no fixture was recorded in the guest (RESULTS/fixtures/ is empty)", 0)
            return 1
        t = time.monotonic()
        sim_list, r = self.sim_list()
        if sim_list is None:
            reason = self.describe(r)
            # iio-sim needs user namespaces and FUSE; elsewhere it says so (exit 71).
            status = "skip" if r["rc"] == 71 and os.environ.get("CI") != "true" else "fail"
            record("all", status, f"iio-sim cannot run here: {reason}", time.monotonic() - t)
            return 1 if status == "fail" else 0

        # Each fixture's device files, read inside iio-sim by the script the guest used.
        self.sim_trees, self.tree_errors = {}, {}
        for path, names in self.fixtures.items():
            cmd = [self.sim, "--fixture", path, "--", sys.executable, os.path.join(HERE, "sysfs_tree.py")] + names
            tr = run(cmd)
            if tr["rc"] == 0:
                self.sim_trees[path] = json.loads(tr["out"])
            else:
                self.tree_errors[path] = f"exit {tr['rc']}: {tr['err'][-300:]}"

        def one(item):
            path, names, name = item
            t0 = time.monotonic()
            try:
                record(name, "pass", self.compare(path, names, name, sim_list), time.monotonic() - t0)
            except Differences as e:
                record(name, "fail", str(e), time.monotonic() - t0)
            except Exception as e:  # a broken comparison is a failing one
                record(name, "fail", f"{type(e).__name__}: {e}", time.monotonic() - t0)

        items = [(p, names, n) for p, names in self.fixtures.items() for n in names]
        with ThreadPoolExecutor(jobs) as ex:
            list(ex.map(one, items))
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--build", default=".build/debug")
    ap.add_argument("--jobs", type=int, default=3)
    a = ap.parse_args()
    sys.exit(Differential(a.results, a.build).main(a.jobs))


if __name__ == "__main__":
    main()

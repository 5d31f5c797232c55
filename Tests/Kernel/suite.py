#!/usr/bin/env python3
"""The kernel suite, guest side: run inside the QEMU guest that scripts/kernel/suite boots.

Binds real drivers to i2c-stub (devices.py) and an emulated HID sensor hub to /dev/uhid
(uhid_hub.py), then runs motion-monitor against Linux's own IIO core and checks what it prints
against the devices' own sysfs files and against the hub's log of every report it sent.

Each result is one JSON line in RESULTS/results.jsonl: {"case", "device", "status", "detail",
"seconds"}; the host prints them and fails when any failed. RESULTS/kernel/ gets what the
differential test on the host compares with iio-sim; RESULTS/fixtures/ the recorded fixtures.

  suite.py --results DIR [--build .build/debug] [--only CASE,CASE] [--phase 1|2]
  (--only batch: the batches' cases only, devices.BATCHES)

Phase 1 (the default) binds devices.CHIPS and the HID hub; phase 2, in a boot of its own (i2c-stub
serves at most 10 addresses), devices.PHASE2_CHIPS, with the same cases.
"""
import argparse
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import devices as D  # noqa: E402
import kk  # noqa: E402
import sysfs_tree  # noqa: E402
from kk import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
USER = "kkuser"
HID_NAMES = ["accel_3d", "gyro_3d", "magn_3d"]
# Cases whose per-device tests run concurrently (each touches its own chip only). every-sample
# stays sequential: with other captures loading the TCG guest, a reader's stall overflows the
# 4-sample kernel buffer motion-monitor asks for and reports are lost (seen: 3 of 40) - see the report;
# and polled st_sensors streams side by side starve (seen under a load of 20: one reading in 2 s).
PARALLEL = {"record", "once", "default-stream", "busy", "left-as-found", "non-root"}
# The fixtures `record` writes (RESULTS/fixtures/FILE.json, committed as fixtures/kernel-6.1/):
# one per i2c client (the devices its driver made) and one for the HID hub's three sensors.
FIXTURES = {c.key: list(c.sensors) for c in D.CHIPS}
FIXTURES["hid-sensor-hub"] = HID_NAMES
HUB_SENSOR = {"accel_3d": "accel", "gyro_3d": "gyro", "magn_3d": "magn"}
# Cases phase 2 leaves to phase 1, to keep the kernel step within its time: what they check is the
# library's handling of permissions (non-root, udev: the rule and the group), and of another program
# holding /dev/iio:deviceN (busy), which takes the same path for every device that has a buffer and no
# trigger or no buffer at all - every phase-2 device, and bmi160, kxcjk1013, mxc4005 in phase 1. Their
# device-specific checks (the HID hub's buffered capture, bmc150_accel's EBUSY) stay in phase 1.
# udev-hwdb's entries match bma255 and mxc4005, and calibbias writes mpu6050's: phase-1 devices.
PHASE2_SKIPS = {"udev", "busy", "non-root", "udev-hwdb", "calibbias"}
# Cases phase 2 runs on one device per library path (Guest.by_path: a buffer or not, a trigger or
# not, a node or not), not on each: what they check is what IIOMotion does with such a device (its
# polled stream at --interval 0, the attributes it leaves as found after four endings), and phase 2's
# devices all take one of two paths (a buffer that cannot stream without a trigger, no buffer).
REPRESENTED = {"every-sample", "left-as-found"}
# What runs on the chips of a batch (devices.BATCHES), bound in the same guest once the phase's own
# cases are done: what the driver publishes and motion-monitor reads of it (its presets, --list,
# --once, a change followed, the default stream, and the recording with the differential test). The
# other cases check the library's handling of a device type (polled without a trigger, with the
# same library path as the phase-2 devices), of permissions and of endings, already covered per
# family there; with them the kernel step would pass its 10 minutes.
BATCH_CASES = ["presets", "record", "list", "once", "once-follows", "default-stream"]
CSV_ROW = re.compile(r"^\d+\.\d{9},(accelerometer|gyroscope|magnetometer),iio:device\d+,[^,]+,[^,]+,[^,]+$")


def log(msg):
    print(f"[{time.monotonic():8.2f}] {msg}", flush=True)


class Guest:
    def __init__(self, args):
        self.args = args
        self.results = kk.Results(os.path.join(args.results, "results.jsonl"))
        self.tools = kk.Tools(REPO, args.build)
        self.out = args.results
        os.makedirs(os.path.join(self.out, "kernel", "diff"), exist_ok=True)
        self.hub = None
        self.ctl = None
        self.hub_log = os.path.join(self.out, "hub.log")
        self.hub_ctl = "/run/kk-hub.ctl"
        self.hub_ready = "/run/kk-hub.ready"
        self.only = set(args.only.split(",")) if args.only else None
        self.pending = None
        self.once_data = {}
        self.stream_data = {}
        self.timing = {}

    # --- setup -------------------------------------------------------------------------------

    def modprobe(self):
        t = time.monotonic()
        addrs = ",".join(f"0x{c.addr:02x}" for c in D.CHIPS)
        subprocess.run(["modprobe", "i2c-stub", f"chip_addr={addrs}"], check=True)
        subprocess.run(["modprobe", "-a"] + D.MODULES, check=True)
        self.timing["modprobe"] = time.monotonic() - t

    def bind_chips(self):
        t = time.monotonic()
        self.busno = D.stub_bus()
        self.bus = D.SMBus(self.busno)
        for c in D.CHIPS:
            D.preset(self.bus, c)
            D.bind(self.busno, c)
        self.timing["bind"] = time.monotonic() - t

    def start_hub(self):
        if not os.path.exists(self.hub_ctl):
            os.mkfifo(self.hub_ctl)
        self.hub = subprocess.Popen([sys.executable, os.path.join(HERE, "uhid_hub.py"), "--log", self.hub_log,
                                     "--control", self.hub_ctl, "--ready", self.hub_ready, "--interval", "20"],
                                    stdout=open(os.path.join(self.out, "hub.out"), "w"), stderr=subprocess.STDOUT)
        self.ctl = os.open(self.hub_ctl, os.O_WRONLY)

    def hub_cmd(self, cmd):
        if self.ctl is not None:                 # phase 2 has no hub
            os.write(self.ctl, (cmd + "\n").encode())

    def hub_events(self, since_ns=0, sensor=None, ev="input"):
        out = []
        with open(self.hub_log) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("mono_ns", 0) >= since_ns and (ev is None or e.get("ev") == ev) and \
                        (sensor is None or e.get("sensor") == sensor):
                    out.append(e)
        return out

    def refresh(self):
        self.dev = kk.devices()
        return self.dev

    def setup(self):
        t0 = time.monotonic()
        self.modprobe()
        if D.PHASE == 1:
            self.start_hub()
        self.bind_chips()
        want = list(D.EXPECTED_SENSORS)
        self.refresh()
        self.dev = kk.wait_devices(want, timeout=60)
        self.apply_attrs()
        self.timing["setup"] = time.monotonic() - t0
        log(f"devices: {self.dev}; setup {self.timing}")
        subprocess.run(["useradd", "-M", "-d", "/tmp", "-s", "/bin/sh", USER], check=False)
        self.initial = {n: kk.writable_attributes(i) for n, i in self.dev.items()}
        with open(os.path.join(self.out, "kernel", "initial-attributes.json"), "w") as f:
            json.dump(self.initial, f, indent=1, sort_keys=True)

    def apply_attrs(self):
        """The attributes devices.py configures per chip (phase 2's st_sensors sampling rates)."""
        for c in D.CHIPS:
            for name in c.sensors:
                for attr, value in c.attrs.items():
                    kk.write(f"{kk.IIO}/{self.dev[name]}/{attr}", value)

    def wanted(self, case):
        return self.only is None or case in self.only

    def batch_wanted(self, case):
        """A case on a batch's chips: as `wanted`, and all of BATCH_CASES with --only batch."""
        return self.wanted(case) or "batch" in self.only

    def test(self, case, device):
        return kk.test(self.results, case, device, self.pending)

    def parallel(self, body, workers=4):
        """Runs the tests `body` declares on several devices at once: most of a test is waiting
        (a stream's duration, a TCG guest's slow process start), and the devices are independent."""
        from concurrent.futures import ThreadPoolExecutor
        self.pending = []
        try:
            body()
        finally:
            jobs, self.pending = self.pending, None
        # One chip's tests in turn (two captures of one device would disturb each other, and the IIO
        # devices of one i2c client share its registers: kmx61_set_odr writes the output-data-rate
        # register with the written device's bits alone, so setting the magnetometer's rate sets the
        # accelerometer's to 12.5 Hz, and the accelerometer's frequency test read 12.5 Hz when the
        # magnetometer's ran beside it); a test of "all" devices alone, after the others.
        chip_of = {name: c.key for c in D.CHIPS for name in c.sensors}
        groups = {}
        for device, job in jobs:
            groups.setdefault(chip_of.get(device, device), []).append(job)
        alone = groups.pop("all", [])
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(lambda js: [j() for j in js], groups.values()))
        for j in alone:
            j()

    # --- what a sensor must read -------------------------------------------------------------

    def check_reading(self, name, r, si=False):
        """A reading (JSON object) of device `name` equals the device's own sysfs values now."""
        dev = self.dev[name]
        kind = r["sensor"]
        exp = kk.expected(dev, kind, si=si)
        got = [r["x"], r["y"], r["z"]]
        check(kk.close(got, exp), f"{kind} of {name}: printed {got}, sysfs gives {exp} "
                                  f"(raw {kk.raws(dev, kind)})")

    # --- the cases ---------------------------------------------------------------------------

    def t_presets(self):
        for c in D.CHIPS:
            for name, types in c.sensors.items():
                @self.test("presets", name)
                def _(c=c, name=name, types=types):
                    dev = self.dev[name]
                    seen = []
                    for t, xyz in types.items():
                        kind = {"accel": "accelerometer", "anglvel": "gyroscope", "magn": "magnetometer"}[t]
                        got = self.chip_raws(c, dev, kind)
                        want = self.want_raws(c, xyz)
                        check(want is None or got == want, f"{t} raw {got}, preset {list(xyz)}"
                              + (f" (the driver's raw for it: {want})" if want != list(xyz) else ""))
                        seen += got
                    check(len(set(seen)) == len(seen) and 0 not in seen, f"raw values not distinct/non-zero: {seen}")
                    return f"raw {seen}"

    def t_list(self):
        @self.test("list", "all")
        def _():
            r = self.tools.run(["--list"])
            check(r.rc == 0, r.describe())
            for name, ident in self.dev.items():
                line = [l for l in r.out.splitlines() if l.split()[:1] == [ident]]
                check(line, f"--list has no line for {ident} ({name}):\n{r.out}")
                for s in D.EXPECTED_SENSORS[name]:
                    check(s in line[0], f"--list line of {name} lacks {s}: {line[0]}")
            with open(os.path.join(self.out, "kernel", "list.txt"), "w") as f:
                f.write(r.out)
            return f"{len(self.dev)} devices"

        @self.test("list-json", "all")
        def _():
            r = self.tools.run(["--list", "--json"])
            check(r.rc == 0, r.describe())
            arr = json.loads(r.out)
            by_id = {d["id"]: d for d in arr}
            for name, ident in self.dev.items():
                check(ident in by_id, f"--list --json lacks {ident} ({name})")
                d = by_id[ident]
                check(d["name"] == kk.sysfs_name(name), f"{ident}: name {d['name']!r}, sysfs {kk.sysfs_name(name)!r}")
                check(sorted(d["sensors"]) == sorted(D.EXPECTED_SENSORS[name]),
                      f"{name}: sensors {d['sensors']}, expected {D.EXPECTED_SENSORS[name]}")
                for kind, m in (d.get("mount_matrix") or {}).items():
                    _, own = kk.mount_matrix(ident, f"in_{kk.KIND_PREFIX[kind]}")
                    check(kk.close(sum(m, []), sum(own, [])), f"{name} {kind} mount matrix {m}, sysfs {own}")
            with open(os.path.join(self.out, "kernel", "list.json"), "w") as f:
                f.write(r.out)
            return f"{len(arr)} devices: " + ", ".join(f"{d['name']}={'+'.join(d['sensors'])}"
                                                        f"{'(buffered)' if d.get('buffered') else ''}" for d in arr)

    def t_record(self):
        """`iio-sim record` of every device, into RESULTS/fixtures/; beside each recording, what
        motion-monitor prints on the kernel (--list --json, --once --json) for the differential test
        (Tests/Kernel/differential.py) to compare with iio-sim on the recorded fixture."""
        self.hub_cmd("hold")
        fdir = os.path.join(self.out, "fixtures")
        ddir = os.path.join(self.out, "kernel", "diff")
        os.makedirs(fdir, exist_ok=True)
        os.makedirs(ddir, exist_ok=True)
        recorded = {}
        for fname, names in FIXTURES.items():
            what = ("a HID sensor hub (UHID, Tests/Kernel/uhid_hub.py): accelerometer, gyrometer and compass 3D"
                    if fname == "hid-sensor-hub" else
                    f"{D.DRIVER_OF[names[0]]} ({fname}) on i2c-stub without an interrupt line, as on most "
                    "single-board computers")
            desc = (f"Linux {os.uname().release}: {what}; recorded with iio-sim record by the kernel suite "
                    f"(devices {', '.join(names)})")
            r = self.tools.run(["record", "--description", desc] + [f"{kk.IIO}/{self.dev[n]}" for n in names],
                               exe=self.tools.sim)
            recorded[fname] = r
            if r.rc == 0:
                with open(os.path.join(fdir, fname + ".json"), "w") as f:
                    f.write(r.out)
        lst = self.tools.run(["--list", "--json"])
        with open(os.path.join(ddir, "list.json"), "w") as f:
            json.dump({"rc": lst.rc, "out": lst.out, "err": lst.err, "ids": self.dev}, f, indent=1)
        for fname, names in FIXTURES.items():
            for name in names:
                @self.test("record", name)
                def _(fname=fname, name=name, names=names):
                    r = recorded[fname]
                    check(r.rc == 0, r.describe())
                    fx = json.loads(r.out)
                    got = [d["name"] for d in fx["devices"]]
                    check(got == [kk.sysfs_name(n) for n in names], f"{fname}.json holds {got}, not {names}")
                    d = fx["devices"][names.index(name)]
                    dev = self.dev[name]
                    for kind in D.EXPECTED_SENSORS[name] if not D.unusable(name) else []:
                        p = kk.KIND_PREFIX[kind]
                        rec = [next((c.get("value") for c in d["channels"] if c["id"] == f"{p}_{a}"), None) for a in "xyz"]
                        check(rec == kk.raws(dev, kind), f"{kind}: recorded raw {rec}, sysfs {kk.raws(dev, kind)}")
                    o = self.tools.run(["--once", "--json", "--device", dev])
                    check(o.rc == 0 or D.unusable(name), o.describe())
                    with open(os.path.join(ddir, f"once-{name}.json"), "w") as f:
                        json.dump({"rc": o.rc, "out": o.out, "err": o.err, "id": dev}, f, indent=1)
                    with open(os.path.join(ddir, f"tree-{name}.json"), "w") as f:
                        json.dump({"tree": sysfs_tree.tree(dev), "probe": sysfs_tree.probe(dev),
                                   "frequencies": sysfs_tree.frequencies(dev), "scan": sysfs_tree.scan(dev)}, f, indent=1)
                    buf = d.get("buffer")
                    return (f"fixtures/{fname}.json: {len(d['attributes'])} attributes, {len(d['channels'])} channels, "
                            f"buffer {json.dumps(buf) if buf else 'none'}, trigger {d.get('current_trigger')!r}, "
                            f"{len(fx['triggers'])} trigger(s)")

    def t_once(self):
        self.hub_cmd("hold")
        once = self.once_data
        for name in [n for n in D.EXPECTED_SENSORS if not D.unusable(n)]:
            @self.test("once", name)
            def _(name=name):
                r = self.tools.run(["--once", "--json", "--device", self.dev[name]])
                check(r.rc == 0, r.describe())
                got = {x["sensor"]: x for x in r.readings()}
                check(sorted(got) == sorted(D.EXPECTED_SENSORS[name]), f"sensors printed {sorted(got)}: {r.out}")
                for x in got.values():
                    check(x["device"] == self.dev[name], f"device {x['device']}")
                    self.check_reading(name, x)
                rs = self.tools.run(["--once", "--json", "--si", "--device", self.dev[name]])
                check(rs.rc == 0, rs.describe())
                for x in rs.readings():
                    self.check_reading(name, x, si=True)
                once[name] = {"out": r.out, "raw": {k: kk.raws(self.dev[name], k) for k in got},
                              "notes": r.notes}
                mfile, _ = kk.mount_matrix(self.dev[name], "in_" + kk.KIND_PREFIX[next(iter(got))])
                return f"exact (matrix from {mfile or 'none: identity'}); notes {len(r.notes)}"

    @staticmethod
    def want_raws(chip, values):
        """What the chip's in_*_raw files must read for register values `values` (None: a value the
        driver computes from many registers, checked to follow them instead)."""
        return chip.expected_raw(values) if isinstance(chip, D.BatchChip) else list(values)

    @staticmethod
    def chip_raws(chip, dev, kind):
        if getattr(chip, "axes", 3) == 3:
            return kk.raws(dev, kind)
        return [int(kk.read(f"{kk.IIO}/{dev}/in_{kk.KIND_PREFIX[kind]}_{a}_raw")) for a in "xyz"[:chip.axes]]

    def t_follow(self):
        for c in D.CHIPS:
            for name in c.sensors:
                if D.unusable(name):
                    continue

                @self.test("once-follows", name)
                def _(c=c, name=name):
                    before = {k: kk.raws(self.dev[name], k) for k in D.EXPECTED_SENSORS[name]}
                    D.write_regs(self.bus, c, c.data_writes(c.changed))
                    try:
                        r = self.tools.run(["--once", "--json", "--device", self.dev[name]])
                        check(r.rc == 0, r.describe())
                        for x in r.readings():
                            want = self.want_raws(c, c.changed[name][kk.KIND_PREFIX[x["sensor"]]])
                            raws = kk.raws(self.dev[name], x["sensor"])
                            if want is None:
                                old = before[x["sensor"]]
                                check(all(a != b for a, b in zip(raws, old)), f"raw did not follow the registers: {old} -> {raws}")
                            else:
                                check(raws == want, f"raw did not change to {want}: {raws}")
                            self.check_reading(name, x)
                    finally:
                        D.write_regs(self.bus, c, c.data_writes())
                    return "new register values read"

    def stream_mode(self, r):
        """sensor -> 'buffered'|'polled' from motion-monitor -v."""
        modes = {}
        for l in r.err.splitlines():
            m = re.match(r"^(accelerometer|gyroscope|magnetometer): .*?\b(buffered|polled)\b", l)
            if m:
                modes[m.group(1)] = m.group(2)
        return modes

    def t_default_stream(self):
        self.hub_cmd("hold")
        for name in [n for n in D.EXPECTED_SENSORS if not D.unusable(n)]:
            @self.test("default-stream", name)
            def _(name=name):
                r = self.tools.run(["--json", "-v", "--duration", "2.5", "--device", self.dev[name]], timeout=40)
                check(r.rc == 0, r.describe())
                for s in D.EXPECTED_SENSORS[name]:
                    rows = r.readings(s)
                    # st_lsm6dsx sleeps 3-4 sample periods per raw read (80 ms at 12.5 Hz): ~1 reading/s
                    check(len(rows) >= 2, f"{len(rows)} {s} readings in 2.5 s: {r.describe()}")
                    for x in rows:
                        self.check_reading(name, x)
                modes = self.stream_mode(r)
                self.stream_data[name] = {"rc": r.rc, "modes": modes, "notes": r.notes, "out": r.out,
                                          "id": self.dev[name]}
                check(len(r.notes) <= 1, f"{len(r.notes)} notes: {r.notes}")
                return f"{modes}; notes: {r.notes}"

        @self.test("default-stream", "all")
        def _():
            r = self.tools.run(["--json", "-v", "--duration", "2.5"], timeout=40)
            check(r.rc == 0, r.describe())
            got = sorted({x["sensor"] for x in r.readings()})
            return f"sensors {got}; {self.stream_mode(r)}; notes {r.notes}"

    def match_hub(self, name, rows, t_start_ns, duration, kernel_ts=True, value_fn=None):
        """Rows (sensor readings) against the hub's reports: a contiguous run of them, from the
        first report after the capture started, each exact, with the kernel's timestamp."""
        dev = self.dev[name]
        kind = D.EXPECTED_SENSORS[name][0]
        sent = self.hub_events(t_start_ns, HUB_SENSOR[name])
        check(sent, "the hub sent no report")
        check(rows, "no rows")

        conv = value_fn or kk.converter(dev, kind)

        def value(e):
            return conv(e["raw"])

        k = next((i for i, e in enumerate(sent) if kk.close(value(e), rows[0][:3])), None)
        check(k is not None, f"first row {rows[0]} matches no report sent since the start")
        skipped = [e for e in sent[:k] if e["how"] == "push"]
        for i, row in enumerate(rows):
            check(k + i < len(sent), f"row {i} {row} after the last report sent")
            e = sent[k + i]
            check(kk.close(value(e), row[:3]),
                  f"row {i}: {row[:3]} but report {k + i} ({e['how']} seq {e['seq']}) was {value(e)} "
                  f"(lost or repeated reports)")
            if kernel_ts and len(row) > 3 and e["how"] == "push":
                t0, t1 = e["t0_ns"] / 1e9, e["t1_ns"] / 1e9
                check(t0 - 0.002 <= row[3] <= t1 + 0.002,
                      f"row {i} timestamp {row[3]:.9f} not within the report's write [{t0:.9f}, {t1:.9f}]")
        last = sent[k + len(rows) - 1]
        return k, skipped, last, sent

    def hub_rows_json(self, r, kind):
        return [[x["x"], x["y"], x["z"], x["timestamp"]] for x in r.readings(kind)]

    def wait_suspended(self, name, timeout=8):
        """Waits until the HID sensor's platform device is runtime-suspended (no reports flow), so
        that the next capture's first report is the first one after it started."""
        p = os.path.realpath(f"{kk.IIO}/{self.dev[name]}/..") + "/power/runtime_status"
        deadline = time.monotonic() + timeout
        while kk.read(p, "") not in ("suspended", "unsupported", "") and time.monotonic() < deadline:
            time.sleep(0.1)
        return kk.read(p, "?")

    def by_path(self, case):
        """The devices `case` runs on: every one in phase 1; in phase 2 one per library path (what
        IIOMotion does with the device: a buffer, a trigger, a node), the others recorded as skipped
        with the device that covers them. REPRESENTED lists the cases."""
        names = [n for n in D.EXPECTED_SENSORS if n not in HID_NAMES and not D.unusable(n)]
        if D.PHASE == 1 or case not in REPRESENTED:
            return names
        seen, out = {}, []
        for name in names:
            dev = f"{kk.IIO}/{self.dev[name]}"
            key = (os.path.isdir(dev + "/buffer"), os.path.exists(dev + "/trigger/current_trigger"),
                   os.path.exists(f"/dev/{self.dev[name]}"))
            if key in seen:
                self.results.record(case, name, "skip", f"the library path of {seen[key]} (buffer {key[0]}, "
                                    f"trigger {key[1]}, node {key[2]}), which this case ran on")
            else:
                seen[key] = name
                out.append(name)
        return out

    def t_every_sample(self):
        for name in self.by_path("every-sample"):
            @self.test("every-sample", name)
            def _(name=name, kind=locals().get('kind')):
                # st_lsm6dsx: ~0.8 s per polled reading at 12.5 Hz (3-4 sample periods per raw read)
                dur = "3.5" if name.startswith("lsm6dso") else "2"
                r = self.tools.run(["--json", "-v", "--interval", "0", "--duration", dur, "--device",
                                    self.dev[name]], timeout=40)
                check(r.rc == 0, r.describe())
                for s in D.EXPECTED_SENSORS[name]:
                    rows = r.readings(s)
                    check(len(rows) >= 2, f"{len(rows)} {s} readings")
                    ts = [x["timestamp"] for x in rows]
                    check(all(b > a for a, b in zip(ts, ts[1:])), f"{s} timestamps not increasing")
                    for x in rows:
                        self.check_reading(name, x)
                return f"{self.stream_mode(r)}, {len(r.readings())} readings, notes {r.notes}"

        self.hub_cmd("vary")
        for name in [n for n in HID_NAMES if n in D.EXPECTED_SENSORS]:
            kind = D.EXPECTED_SENSORS[name][0]

            @self.test("every-sample", name)
            def _(name=name, kind=locals().get('kind')):
                st = self.wait_suspended(name)
                t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                r = self.tools.run(["--json", "-v", "--interval", "0", "--duration", "3", "--device",
                                    self.dev[name]], timeout=40)
                check(r.rc == 0, r.describe())
                rows = self.hub_rows_json(r, kind)
                k, skipped, last, sent = self.match_hub(name, rows, t, 3, kernel_ts=(name != "magn_3d"))
                check(not skipped, f"{len(skipped)} reports pushed after the start (device {st}) never arrived: "
                                   f"seq {[e['seq'] for e in skipped][:10]}")
                return f"{len(rows)} rows = reports {k}..{k + len(rows) - 1} of {len(sent)} sent, in order, exact; " \
                       f"{self.stream_mode(r)}"

            @self.test("every-sample-csv", name)
            def _(name=name, kind=locals().get('kind')):
                self.wait_suspended(name)
                path = f"/tmp/kk-{name}.csv"
                if os.path.exists(path):
                    os.unlink(path)
                t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                r = self.tools.run(["--csv", path, "--quiet", "--duration", "3", "--device", self.dev[name]],
                                   timeout=40)
                check(r.rc == 0, r.describe())
                text = open(path).read()
                lines = text.splitlines()
                check(lines and lines[0] == "timestamp,sensor,device,x,y,z", f"header {lines[:1]}")
                check(text.endswith("\n"), "last row not whole")
                bad = [l for l in lines[1:] if not CSV_ROW.match(l)]
                check(not bad, f"rows not whole: {bad[:3]}")
                rows = [[float(v) for v in l.split(",")[3:6]] + [float(l.split(",")[0])] for l in lines[1:]]
                k, skipped, last, sent = self.match_hub(name, rows, t, 3, kernel_ts=(name != "magn_3d"))
                check(not skipped, f"{len(skipped)} reports pushed after the start never arrived")
                return f"{len(rows)} rows = reports {k}..{k + len(rows) - 1}, in order, exact, kernel timestamps"

    # --- unplug -------------------------------------------------------------------------------

    def check_csv(self, path):
        text = open(path).read() if os.path.exists(path) else ""
        lines = text.splitlines()
        check(lines and lines[0] == "timestamp,sensor,device,x,y,z", f"header {lines[:1]}")
        check(text.endswith("\n"), f"last row not whole: {lines[-1]!r}")
        bad = [l for l in lines[1:] if not CSV_ROW.match(l)]
        check(not bad, f"rows not whole: {bad[:3]}")
        return [l.split(",") for l in lines[1:]]

    def t_unplug(self):
        # Every device at once: motion-monitor logging each, then the devices go away mid-log.
        self.hub_cmd("vary")
        procs = {}
        expect = {}
        t_start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for name in D.EXPECTED_SENSORS:
            path = f"/tmp/kk-unplug-{name}.csv"
            if os.path.exists(path):
                os.unlink(path)
            if name not in HID_NAMES:
                expect[name] = {k: kk.expected(self.dev[name], k) for k in D.EXPECTED_SENSORS[name]}
            else:
                expect[name] = kk.converter(self.dev[name], D.EXPECTED_SENSORS[name][0])
            procs[name] = (self.tools.start(["--csv", path, "--quiet", "--interval", "0", "--device",
                                             self.dev[name]]), path)
        # Unplug once every log that can has rows, at most 45 s: eleven debug builds starting at once
        # in a TCG guest can take over 25 s on a loaded host; on a quiet one they have rows in seconds.
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            waiting = [n for n, (p, path) in procs.items() if p.poll() is None and
                       (not os.path.exists(path) or open(path).read().count("\n") < 3)]
            if not waiting:
                break
            time.sleep(0.2)
        time.sleep(1)
        t_unplug = time.monotonic()
        self.hub_cmd("unplug")
        for c in D.CHIPS:
            D.unbind(self.busno, c)
        runs = {n: kk.Tools.finish(p, timeout=20) for n, (p, _) in procs.items()}
        for name, (p, path) in procs.items():
            @self.test("unplug", name)
            def _():
                r = runs[name]
                check(r.rc == 74, f"exit {r.rc}, not 74: {r.describe()}")
                rows = self.check_csv(path)
                check(rows, f"no rows before the unplug: {r.describe()}")
                if name in HID_NAMES:
                    vals = [[float(v) for v in row[3:6]] + [float(row[0])] for row in rows]
                    k, skipped, last, sent = self.match_hub(name, vals, t_start, 4, kernel_ts=(name != "magn_3d"),
                                                           value_fn=expect[name])
                    return f"exit 74 {p.kk_t + r.seconds - t_unplug:.1f} s after the unplug; {len(rows)} whole rows = reports {k}..{k + len(rows) - 1}"
                for row in rows:
                    want = expect[name][row[1]]
                    check(kk.close([float(v) for v in row[3:6]], want), f"row {row} != {want}")
                return f"exit 74; {len(rows)} whole rows, exact"
        # Back again (new device numbers).
        for c in D.CHIPS:
            D.bind(self.busno, c)
        self.hub_cmd("plug")
        self.dev = kk.wait_devices(list(D.EXPECTED_SENSORS), timeout=60)
        self.apply_attrs()
        log(f"re-plugged: {self.dev}")

    # --- leave the device as found -------------------------------------------------------------

    def t_left_as_found(self):
        self.hub_cmd("hold")
        for name in self.by_path("left-as-found") + [n for n in HID_NAMES if n in D.EXPECTED_SENSORS]:
            @self.test("left-as-found", name)
            def _(name=name):
                dev = self.dev[name]
                changed = []
                endings = []
                for ending in ("normal", "error", "SIGINT", "SIGTERM"):
                    before = kk.writable_attributes(dev)
                    if ending == "normal":
                        r = self.tools.run(["--interval", "0", "--quiet", "--csv", "/tmp/kk-laf.csv", "--force",
                                            "--duration", "1.5", "--device", dev], timeout=40)
                        ok = r.rc == 0
                    elif ending == "error":
                        r = self.tools.run(["--interval", "0", "--quiet", "--csv", "/dev/full", "--force",
                                            "--duration", "5", "--device", dev], timeout=40)
                        ok = r.rc == 74
                    else:
                        p = self.tools.start(["--interval", "0", "--json", "--device", dev])
                        # Signal once it streams (its first reading), not while it starts up.
                        import select
                        ready, _, _ = select.select([p.stdout], [], [], 30)
                        first = p.stdout.readline() if ready else ""
                        time.sleep(0.5)
                        p.send_signal(signal.SIGINT if ending == "SIGINT" else signal.SIGTERM)
                        r = kk.Tools.finish(p, timeout=20)
                        ok = r.rc == 0
                    after = kk.writable_attributes(dev)
                    d = kk.diff_attributes(before, after)
                    endings.append(f"{ending}: exit {r.rc}")
                    if d:
                        changed.append(f"after {ending} end (exit {r.rc}): " + "; ".join(d))
                    if not ok:
                        changed.append(f"{ending} end: unexpected exit {r.rc}: {r.describe()}")
                check(not changed, " || ".join(changed))
                return ", ".join(endings) + f"; {len(before)} writable attributes unchanged"

    # --- as a normal user ----------------------------------------------------------------------

    def has_buffer(self, name):
        return os.path.isdir(f"{kk.IIO}/{self.dev[name]}/buffer") and os.path.exists(f"/dev/{self.dev[name]}")

    def t_non_root(self, udev=False):
        self.hub_cmd("hold")
        case = "non-root-udev" if udev else "non-root"
        for name in D.EXPECTED_SENSORS:
            @self.test(case, name)
            def _(name=name):
                dev = self.dev[name]
                node = f"/dev/{dev}"
                perm = (oct(os.stat(node).st_mode & 0o777), os.stat(node).st_gid) if os.path.exists(node) else None
                o = self.tools.run(["--once", "--json", "--device", dev], user=USER)
                check(o.rc == 0, f"--once as {USER}: {o.describe()}")
                for x in o.readings():
                    self.check_reading(name, x)
                check(len(o.notes) <= 1, f"--once: {len(o.notes)} notes {o.notes}")
                s = self.tools.run(["--json", "-v", "--duration", "2.5", "--device", dev], user=USER, timeout=40)
                check(s.rc == 0, f"stream as {USER}: {s.describe()}")
                for k in D.EXPECTED_SENSORS[name]:
                    check(s.readings(k), f"no {k} readings as {USER}: {s.describe()}")
                    for x in s.readings(k):
                        self.check_reading(name, x)
                modes = self.stream_mode(s)
                if udev and name in HID_NAMES:
                    check(set(modes.values()) == {"buffered"}, f"not buffered with the udev rule: {modes}; {s.notes}")
                    check(not s.notes, f"notes while buffered: {s.notes}")
                elif not udev and self.has_buffer(name):
                    check(len(s.notes) == 1, f"{len(s.notes)} notes (want one): {s.notes}")
                else:
                    check(len(s.notes) <= 1, f"{len(s.notes)} notes: {s.notes}")
                return f"node {perm}; once notes {o.notes}; stream {modes}, notes {s.notes}"

    def start_udev(self):
        t = time.monotonic()
        subprocess.run(["/lib/systemd/systemd-udevd", "--daemon"], check=True)
        r = subprocess.run([os.path.join(REPO, "scripts", "install-udev"), "--user", USER],
                           capture_output=True, text=True, timeout=120)
        log(f"install-udev: exit {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
        # Under load (a TCG guest beside another) re-triggering every device takes more than 10 s.
        subprocess.run(["udevadm", "settle", "--timeout=60"], check=False)
        self.timing["udev"] = round(time.monotonic() - t, 1)
        return r

    def t_udev(self):
        @self.test("udev-rule", "all")
        def _():
            r = self.start_udev()
            check(r.returncode == 0, f"install-udev exit {r.returncode}: {r.stderr}")
            bad = []
            for name, dev in self.dev.items():
                node = f"/dev/{dev}"
                if os.path.exists(node):
                    st = os.stat(node)
                    import grp
                    g = grp.getgrgid(st.st_gid).gr_name
                    if g != "iio" or st.st_mode & 0o777 != 0o660:
                        bad.append(f"{node} {g} {oct(st.st_mode & 0o777)}")
            check(not bad, f"nodes not root:iio 0660 after the rule: {bad}")
            return "systemd-udevd applied udev/99-iio-motion.rules: nodes root:iio 0660"
        self.t_non_root(udev=True)

    # --- another reader --------------------------------------------------------------------------

    def t_busy(self):
        self.hub_cmd("hold")
        for name in D.EXPECTED_SENSORS:
            if not os.path.exists(f"/dev/{self.dev[name]}"):
                continue

            @self.test("busy", name)
            def _(name=name):
                dev = self.dev[name]
                streams = name in HID_NAMES
                holder = None
                if streams or name == "bma255":
                    out = f"/tmp/kk-readdev-{name}.bin"
                    holder = subprocess.Popen(["stdbuf", "-o0", "iio_readdev", "-b", "4", "-T", "0", name],
                                              stdout=open(out, "wb"), stderr=open(out + ".err", "w+b"))
                    time.sleep(2.0)
                    if holder.poll() is not None:
                        check(False, f"iio_readdev ended: {open(out + '.err', errors='replace').read()[-300:]}")
                    size0 = os.path.getsize(out)
                else:
                    holder = subprocess.Popen([sys.executable, "-c",
                                               f"import os,time; fd=os.open('/dev/{dev}', os.O_RDONLY); time.sleep(120)"])
                    time.sleep(0.5)
                try:
                    if name == "bma255":
                        # bmc150_accel answers raw reads with EBUSY while another program has its
                        # buffer enabled: nothing can read the sensor then, so the run must fail
                        # clearly (exit 74, naming the device, the file and the errno), and leave
                        # the other program be.
                        o = self.tools.run(["--once", "--json", "--device", dev])
                        check(o.rc == 74 and dev in o.err and "_raw" in o.err and "busy" in o.err,
                              f"--once while busy: {o.describe()}")
                        check(holder.poll() is None, "iio_readdev ended while motion-monitor ran")
                        return f"raw reads refused while iio_readdev holds the buffer: exit 74 ({o.err.strip()[:160]})"
                    o = self.tools.run(["--once", "--json", "--device", dev])
                    check(o.rc == 0, f"--once while busy: {o.describe()}")
                    for x in o.readings():
                        self.check_reading(name, x)
                    s = self.tools.run(["--json", "-v", "--duration", "2.5", "--device", dev], timeout=40)
                    check(s.rc == 0, f"stream while busy: {s.describe()}")
                    for k in D.EXPECTED_SENSORS[name]:
                        check(s.readings(k), f"no {k} readings while busy: {s.describe()}")
                        for x in s.readings(k):
                            self.check_reading(name, x)
                    modes = self.stream_mode(s)
                    check(set(modes.values()) <= {"polled"}, f"modes while another program holds it: {modes}")
                    check(len(s.notes) == 1, f"{len(s.notes)} notes (want one): {s.notes}")
                    if streams:
                        time.sleep(0.5)
                        size1 = os.path.getsize(out)
                        check(holder.poll() is None, "iio_readdev ended while motion-monitor ran")
                        check(size1 > size0, f"iio_readdev received nothing while motion-monitor ran ({size0} -> {size1} bytes)")
                        return f"polled with one note ({s.notes[0][:120]}); iio_readdev went on ({size0} -> {size1} bytes)"
                    return f"polled with one note ({s.notes[0][:120]})"
                finally:
                    holder.terminate()
                    try:
                        holder.wait(5)
                    except subprocess.TimeoutExpired:
                        holder.kill()

    # --- udev's sensor database (issue 33) -----------------------------------------------------

    HWDB_FILE = "/etc/udev/hwdb.d/61-iio-motion-test.hwdb"
    # A rotation that swaps x and y and turns one sign, so a transposed or unsigned use shows.
    HWDB_MATRIX = [[0, 1, 0], [-1, 0, 0], [0, 0, 1]]
    HWDB_MATRIX_TEXT = "0, 1, 0; -1, 0, 0; 0, 0, 1"
    HWDB_GOOD, HWDB_BAD = "bma255", "mxc4005"

    def ensure_udevd(self):
        if subprocess.run(["udevadm", "control", "--ping"], capture_output=True).returncode != 0:
            subprocess.run(["/lib/systemd/systemd-udevd", "--daemon"], check=True)

    def hwdb_key(self, dev):
        """A hwdb match for the key 60-sensor.rules looks an IIO device up by: sensor:[LABEL:]modalias:
        <the parent's modalias>:<the machine's DMI modalias>. udev puts `_` in the key for characters
        of an attribute it does not pass (QEMU's product name "Standard PC (Q35 + ICH9, 2009)" gives
        `StandardPC_Q35+ICH9,2009_`); the match has `?` there (hwdb matches with fnmatch)."""
        parent = kk.read(f"{kk.IIO}/{dev}/../modalias")
        dmi = kk.read("/sys/class/dmi/id/modalias")
        check(parent and dmi, f"{dev}: parent modalias {parent!r}, DMI modalias {dmi!r}")
        label = kk.read(f"{kk.IIO}/{dev}/label", "")
        dmi = re.sub(r"[^A-Za-z0-9#+\-.:=@_,]", "?", dmi)
        return f"sensor:{label + ':' if label else ''}modalias:{parent}:{dmi}"

    def hwdb_apply(self, text):
        """Writes (or, with None, removes) the test's hwdb file, compiles the database with
        systemd-hwdb update, and has the running systemd-udevd apply it to the IIO devices."""
        t = time.monotonic()
        if text is None:
            if os.path.exists(self.HWDB_FILE):
                os.remove(self.HWDB_FILE)
        else:
            os.makedirs(os.path.dirname(self.HWDB_FILE), exist_ok=True)
            with open(self.HWDB_FILE, "w") as f:
                f.write(text)
        subprocess.run(["systemd-hwdb", "update"], check=True, timeout=120)
        subprocess.run(["udevadm", "control", "--reload"], check=True, timeout=30)
        subprocess.run(["udevadm", "trigger", "--action=change", "--subsystem-match=iio"], check=True, timeout=30)
        subprocess.run(["udevadm", "settle", "--timeout=30"], check=False, timeout=40)
        return time.monotonic() - t

    @staticmethod
    def udev_property(dev, name):
        r = subprocess.run(["udevadm", "info", "--query=property", f"--path=/sys/bus/iio/devices/{dev}"],
                           capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            if line.startswith(name + "="):
                return line[len(name) + 1:]
        return None

    def t_hwdb(self):
        """A hwdb entry of the test's own, matching this QEMU machine's DMI data, compiled by
        systemd-hwdb update and applied by the real systemd-udevd: motion-monitor's axes change
        exactly as its ACCEL_MOUNT_MATRIX says, --list and -v say the matrix is udev's, its
        ACCEL_LOCATION=display wins the automatic choice among the accelerometers, a malformed
        matrix on another device is named in a note while that device keeps the kernel's, and --list
        shows both devices' ACCEL_LOCATION (display, base)."""
        self.hub_cmd("hold")

        @self.test("udev-hwdb", self.HWDB_GOOD)
        def _():
            self.ensure_udevd()
            self.refresh()
            good, bad = self.dev[self.HWDB_GOOD], self.dev[self.HWDB_BAD]
            base = {}
            for name, dev in ((self.HWDB_GOOD, good), (self.HWDB_BAD, bad)):
                o = self.tools.run(["--once", "--json", "--sensor", "accelerometer", "--device", dev])
                check(o.rc == 0 and len(o.readings("accelerometer")) == 1, f"--once before the hwdb entry: {o.describe()}")
                r = o.readings("accelerometer")[0]
                self.check_reading(name, r)
                base[name] = [r["x"], r["y"], r["z"]]
            auto = self.tools.run(["--once", "--json", "--sensor", "accelerometer"])
            check(auto.rc == 0, auto.describe())
            auto_before = auto.readings("accelerometer")[0]["device"]
            entry = (f"{self.hwdb_key(good)}\n ACCEL_MOUNT_MATRIX={self.HWDB_MATRIX_TEXT}\n ACCEL_LOCATION=display\n\n"
                     f"{self.hwdb_key(bad)}\n ACCEL_MOUNT_MATRIX=1, 0, 0; 0, 1\n ACCEL_LOCATION=base\n")
            took = self.hwdb_apply(entry)
            try:
                prop = self.udev_property(good, "ACCEL_MOUNT_MATRIX")
                if prop != self.HWDB_MATRIX_TEXT:
                    t = subprocess.run(["udevadm", "test", "--action=change", f"/sys/bus/iio/devices/{good}"],
                                       capture_output=True, text=True, timeout=60)
                    lines = [x for x in (t.stdout + t.stderr).splitlines() if "hwdb" in x or "sensor" in x or "ACCEL" in x]
                    check(False, f"udev gives {good} ACCEL_MOUNT_MATRIX={prop!r} (key {self.hwdb_key(good)!r}); "
                          f"udevadm test: {lines[-12:]}")
                # The axes, exactly as the matrix says: M times the reading with the kernel's matrix.
                o = self.tools.run(["--once", "--json", "--sensor", "accelerometer", "--device", good])
                check(o.rc == 0 and len(o.readings("accelerometer")) == 1, o.describe())
                r = o.readings("accelerometer")[0]
                got = [r["x"], r["y"], r["z"]]
                want = [sum(m * v for m, v in zip(row, base[self.HWDB_GOOD])) for row in self.HWDB_MATRIX]
                check(kk.close(got, want), f"{good} with the hwdb matrix: {got}, want {want} (before: {base[self.HWDB_GOOD]})")
                check(got != base[self.HWDB_GOOD], f"the axes did not change: {got}")
                lst = self.tools.run(["--list", "--json"])
                check(lst.rc == 0, lst.describe())
                d = {x["id"]: x for x in json.loads(lst.out)}
                check(d[good]["mount_matrix_source"] == {"accelerometer": "udev:ACCEL_MOUNT_MATRIX"},
                      f"--list --json: {good} mount_matrix_source {d[good].get('mount_matrix_source')}")
                check(d[good]["mount_matrix"]["accelerometer"] == self.HWDB_MATRIX,
                      f"--list --json: {good} mount_matrix {d[good]['mount_matrix']}")
                table = self.tools.run(["--list"])
                row = [line for line in table.out.splitlines() if line.split()[:1] == [good]]
                check(row and row[0].rstrip().endswith("udev hwdb"), f"--list row of {good}: {row}")
                # ACCEL_LOCATION in --list (a line under the table) and --list --json (udev_location).
                places = {good: "display", bad: "base"}
                for dev, place in places.items():
                    line = f"location of {dev} ({kk.read(f'{kk.IIO}/{dev}/name')}): {place} (udev hwdb ACCEL_LOCATION)"
                    check(line in table.out.splitlines(), f"--list does not say {line!r}:\n{table.out}")
                    check(d[dev].get("udev_location") == place, f"--list --json: {dev} udev_location {d[dev].get('udev_location')!r}")
                others = [x["id"] for x in d.values() if "udev_location" in x and x["id"] not in places]
                check(not others, f"--list --json: udev_location on devices without an entry: {others}")
                # ACCEL_LOCATION=display: the automatic choice among the accelerometers.
                auto = self.tools.run(["--once", "--json", "--sensor", "accelerometer"])
                check(auto.rc == 0 and auto.readings("accelerometer"), auto.describe())
                chosen = auto.readings("accelerometer")[0]["device"]
                check(chosen == good, f"automatic choice {chosen}, not {good} (ACCEL_LOCATION=display); before: {auto_before}")
                # -v: where the matrix in force comes from, in a stream.
                v = self.tools.run(["--json", "-v", "--count", "2", "--sensor", "accelerometer", "--device", good], timeout=40)
                check(v.rc == 0, v.describe())
                line = f"accelerometer: mount matrix {self.HWDB_MATRIX_TEXT} from udev hwdb (ACCEL_MOUNT_MATRIX)"
                check(line in v.err, f"-v does not say {line!r}: {v.err.strip()[-400:]}")
                for x in v.readings("accelerometer"):
                    check(kk.close([x["x"], x["y"], x["z"]], want), f"streamed {x}, want {want}")
                # The malformed matrix: a note naming the device and the property; the kernel's matrix.
                b = self.tools.run(["--once", "--json", "--sensor", "accelerometer", "--device", bad])
                check(b.rc == 0 and len(b.readings("accelerometer")) == 1, b.describe())
                rb = b.readings("accelerometer")[0]
                check(kk.close([rb["x"], rb["y"], rb["z"]], base[self.HWDB_BAD]), f"{bad} with a malformed matrix: {rb}, before {base[self.HWDB_BAD]}")
                notes = [n for n in b.notes if "ACCEL_MOUNT_MATRIX" in n and bad in n]
                check(len(notes) == 1, f"{bad}: want one note naming ACCEL_MOUNT_MATRIX and {bad}: {b.err.strip()}")
            finally:
                undo = self.hwdb_apply(None)
            # Without the entry: the kernel's matrix again.
            o = self.tools.run(["--once", "--json", "--sensor", "accelerometer", "--device", good])
            check(o.rc == 0, o.describe())
            r = o.readings("accelerometer")[0]
            check(kk.close([r["x"], r["y"], r["z"]], base[self.HWDB_GOOD]), f"after the entry was removed: {r}")
            return (f"hwdb ({took:.1f} s to compile and apply, {undo:.1f} s to undo): {good} {base[self.HWDB_GOOD]} -> {got} "
                    f"by {self.HWDB_MATRIX_TEXT}; automatic choice {auto_before} -> {chosen}; {bad}: {notes[0][:160]}")

    # --- main --------------------------------------------------------------------------------

    def note_unreadable_scales(self):
        """Notes the bound devices whose listed scale file fails to read (D.UNREADABLE_SCALE)."""
        D.UNREADABLE_SCALE.clear()
        for name, dev in self.dev.items():
            for kind in D.EXPECTED_SENSORS.get(name, []):
                path = f"{kk.IIO}/{dev}/in_{kk.KIND_PREFIX[kind]}_scale"
                if os.path.exists(path):
                    try:
                        kk.read(path)
                    except OSError as e:
                        D.UNREADABLE_SCALE[name] = os.path.basename(path)
                        log(f"{name}: {os.path.basename(path)} is listed but reading it fails ({e}); "
                            "--once must fail naming it")

    def t_unreadable_scale(self):
        """A device whose listed scale cannot be read (dmard09 before 6.1.190): --once fails with
        exit 74, naming the device and the file, and prints no reading (never a silent raw count)."""
        for name, file in D.UNREADABLE_SCALE.items():
            @self.test("once", name)
            def _(name=name, file=file):
                dev = self.dev[name]
                r = self.tools.run(["--once", "--json", "--device", dev])
                check(r.rc == 74 and f"{file} of {dev} ({name})" in r.err and not r.readings(),
                      f"want exit 74 naming {file}, no reading: {r.describe()}")
                return f"exit 74: {r.err.strip().splitlines()[-1][:160]}"

    def t_two_axes(self):
        """A device with fewer than three axes (mxc6255: X and Y): --once fails with exit 69,
        naming the device and the missing channel, and prints no reading."""
        for c in D.CHIPS:
            for name in c.sensors:
                if getattr(c, "axes", 3) == 3:
                    continue

                @self.test("once", name)
                def _(name=name, c=c):
                    dev = self.dev[name]
                    r = self.tools.run(["--once", "--json", "--device", dev])
                    missing = f"in_accel_{'xyz'[c.axes]}"
                    check(r.rc == 69 and f"{dev} ({name}) has no {missing} channel" in r.err and not r.readings(),
                          f"want exit 69 naming {missing}, no reading: {r.describe()}")
                    return f"exit 69: {r.err.strip().splitlines()[-1][:160]}"

    def reload_stub(self, chips):
        """Unbinds the chips bound now, reloads i2c-stub with the addresses of `chips` (a register
        file of zeros) and loads their modules."""
        t = time.monotonic()
        # A batch's devices as the kernel makes them: phase 1's udev case left systemd-udevd running
        # with the project's rule (root:iio, group-writable), which the recordings must not hold.
        if subprocess.run(["udevadm", "control", "--ping"], capture_output=True).returncode == 0:
            subprocess.run(["udevadm", "control", "--exit"], capture_output=True, timeout=30)
        for c in D.CHIPS:
            try:
                D.unbind(self.busno, c)
            except OSError:
                pass
        self.bus.close()
        kk.wait_gone([d for n, d in self.dev.items() if any(n in c.sensors for c in D.CHIPS)])
        for attempt in range(50):
            r = subprocess.run(["rmmod", "i2c-stub"], capture_output=True, text=True)
            if r.returncode == 0:
                break
            time.sleep(0.2)
        check(r.returncode == 0, f"rmmod i2c-stub: {r.stderr.strip()}")
        addrs = ",".join(f"0x{c.addr:02x}" for c in chips)
        subprocess.run(["modprobe", "i2c-stub", f"chip_addr={addrs}"], check=True)
        subprocess.run(["modprobe", "-a"] + [c.module for c in chips], check=True)
        self.timing.setdefault("reload", []).append(round(time.monotonic() - t, 1))

    def run_batch(self, index, chips):
        """A batch of chips (devices.BATCHES) in this guest, after the phase's own cases: bound at the
        addresses of a reloaded i2c-stub, BATCH_CASES run on them, results in RESULTS/batch-N/ (the
        differential test's input, as for the phase's own devices)."""
        global FIXTURES
        t0 = time.monotonic()
        self.reload_stub(chips)
        D.use_batch(chips)
        FIXTURES = {c.key: list(c.sensors) for c in chips}
        self.out = os.path.join(self.args.results, f"batch-{D.PHASE}{'abcdefgh'[index]}")
        os.makedirs(os.path.join(self.out, "kernel", "diff"), exist_ok=True)
        self.once_data, self.stream_data = {}, {}
        self.bind_chips()
        names = [n for c in chips for n in c.sensors]
        self.dev = {n: i for n, i in kk.wait_devices(names, timeout=60).items() if n in names}
        self.apply_attrs()
        self.note_unreadable_scales()
        log(f"batch {os.path.basename(self.out)}: {self.dev}")
        cases = {"presets": self.t_presets, "record": self.t_record, "list": self.t_list,
                 "once": lambda: (self.t_once(), self.t_two_axes(), self.t_unreadable_scale()), "once-follows": self.t_follow,
                 "default-stream": self.t_default_stream}
        for case in BATCH_CASES:
            if self.batch_wanted(case):
                t = time.monotonic()
                if case in PARALLEL:
                    self.parallel(cases[case])
                else:
                    cases[case]()
                self.timing[f"{os.path.basename(self.out)} {case}"] = round(time.monotonic() - t, 1)
        self.save_run_data()
        self.timing[os.path.basename(self.out)] = round(time.monotonic() - t0, 1)
        log(f"{os.path.basename(self.out)} done in {self.timing[os.path.basename(self.out)]} s")

    def save_run_data(self):
        with open(os.path.join(self.out, "kernel", "once.json"), "w") as f:
            json.dump(self.once_data, f, indent=1)
        if self.stream_data:
            with open(os.path.join(self.out, "kernel", "diff", "default-stream.json"), "w") as f:
                json.dump(self.stream_data, f, indent=1)

    def run(self):
        self.setup()
        for case, fn in [("presets", self.t_presets), ("record", self.t_record), ("list", self.t_list),
                         ("once", self.t_once),
                         ("once-follows", self.t_follow), ("default-stream", self.t_default_stream),
                         ("every-sample", self.t_every_sample), ("busy", self.t_busy),
                         ("left-as-found", self.t_left_as_found), ("non-root", self.t_non_root),
                         ("unplug", self.t_unplug), ("udev", self.t_udev), ("udev-hwdb", self.t_hwdb),
                         ("calibbias", self.t_calibbias)]:
            if self.wanted(case) and not (D.PHASE == 2 and case in PHASE2_SKIPS):
                t = time.monotonic()
                if case in PARALLEL:
                    self.parallel(fn)
                else:
                    fn()
                self.timing[case] = round(time.monotonic() - t, 1)
                log(f"{case} done in {self.timing[case]} s")
        self.save_run_data()
        for i, chips in enumerate(D.BATCHES.get(D.PHASE, [])):
            if any(self.batch_wanted(c) for c in BATCH_CASES):
                t = time.monotonic()
                try:
                    self.run_batch(i, chips)
                except Exception as e:      # a batch that cannot run is a failure the report shows
                    self.results.record("batch", f"batch-{D.PHASE}{'abcdefgh'[i]}", "fail",
                                        f"{type(e).__name__}: {e}", time.monotonic() - t)
        self.out = self.args.results
        with open(os.path.join(self.out, "timing.json"), "w") as f:
            json.dump(self.timing, f, indent=1)
        if self.hub:
            self.hub_cmd("quit")
            try:
                self.hub.wait(5)
            except subprocess.TimeoutExpired:
                self.hub.kill()
        c = self.results.counts
        print(f"guest: {c['pass']} passed, {c['fail']} failed, {c['skip']} skipped", flush=True)
        return 1 if c["fail"] else 0


def _calibbias_case(g):
    """`motion-monitor calibrate --write-kernel` on inv_mpu6050's calibbias: the offsets of a stored
    calibration go into the chip's offset registers (XA_OFFS 0x06.., XG_OFFS_USR 0x13.., big-endian,
    checked in i2c-stub's register file), refused without root naming the file, then
    --restore-kernel, --write-kernel --stored and --forget put the registers back as found."""
    name = "mpu6050"
    chip = next(c for c in D.CHIPS if c.key == name)
    dev = g.dev[name]
    path = f"{kk.IIO}/{dev}"
    files = [f"in_{t}_{a}_calibbias" for t in ("accel", "anglvel") for a in "xyz"]
    regs = [0x06, 0x08, 0x0A, 0x13, 0x15, 0x17]
    # Factory-like trims, set through the driver as the chip would have them at power-up.
    factory = [-2838, 1702, 1366, 25, -14, 60]
    state = "/tmp/kk-calibbias"

    def attrs():
        return [int(open(f"{path}/{f}").read()) for f in files]

    def registers():
        out = []
        for r in regs:
            v = (g.bus.read_byte(chip.addr, r) << 8) | g.bus.read_byte(chip.addr, r + 1)
            out.append(v - 0x10000 if v >= 0x8000 else v)
        return out

    def mm(args, user=None):
        return g.tools.run(["XDG_STATE_HOME=" + state, g.tools.mm, "calibrate", "--device", dev] + args,
                           user=user, timeout=60, exe="/usr/bin/env")

    @g.test("calibbias", name)
    def _():
        for f, v in zip(files, factory):
            with open(f"{path}/{f}", "w") as fh:
                fh.write(str(v))
        check(attrs() == factory and registers() == factory,
              f"the driver's calibbias and the registers after writing {factory}: {attrs()} / {registers()}")
        before = kk.writable_attributes(dev)
        shutil.rmtree(state, ignore_errors=True)
        os.makedirs(state + "/iiomotion")
        os.chmod(state, 0o777)
        os.chmod(state + "/iiomotion", 0o777)
        # The offsets the stub's data registers hold (accelerometer ±2 g: 16384 counts/g, lying
        # flat; gyroscope ±2000 °/s: 16.4 counts per °/s), in SI, as a calibration would find them.
        (ax, ay, az), (gx, gy, gz) = chip.sensors[name]["accel"], chip.sensors[name]["anglvel"]
        g0 = 9.80665
        abias = [ax / 16384 * g0, ay / 16384 * g0, (az - 16384) / 16384 * g0]
        gbias = [v / 16.4 * math.pi / 180 for v in (gx, gy, gz)]
        # Where calibrate keeps them (named after the device's identity): --show says.
        r = mm(["--show"])
        where = dict(re.findall(r"^(accelerometer|gyroscope) of .*: not calibrated \(no (\S+)\)$", r.out, re.M))
        check(r.rc == 0 and len(where) == 2, f"--show names both files: {r.describe()}")
        for kind, b in (("accelerometer", abias), ("gyroscope", gbias)):
            with open(where[kind], "w") as fh:
                fh.write(f"version 1\nkind {kind}\nbias {b[0]!r} {b[1]!r} {b[2]!r}\nmatrix 1 0 0 0 1 0 0 0 1\n")
            os.chmod(where[kind], 0o666)
        # The registers' units (1/2048 g per count, bit 0 kept; 1/32.8 °/s per count), to the nearest
        # count, halves away from zero (y is one: 2600/16384 g is 162.5 steps of two counts).
        def nearest(x):
            return int(math.copysign(math.floor(abs(x) + 0.5), x))
        want = [factory[i] - 2 * nearest(abias[i] / (g0 / 2048) / 2) for i in range(3)] + \
               [factory[3 + i] - nearest(gbias[i] / (math.pi / 180 / 32.8)) for i in range(3)]
        # As the normal user, from a copy in the guest's /tmp: what is checked is the refusal to
        # write the driver's files, not whether that user may reach the project's build folder.
        copy = state + "/motion-monitor"
        shutil.copy2(g.tools.mm, copy)
        os.chmod(copy, 0o755)
        r = g.tools.run(["XDG_STATE_HOME=" + state, copy, "calibrate", "--device", dev, "--write-kernel", "--stored"],
                        user=USER, timeout=60, exe="/usr/bin/env")
        check(r.rc == 77 and "in_accel_x_calibbias" in r.err and "root" in r.err,
              f"as {USER}: exit 77 naming the file and root: {r.describe()}")
        check(attrs() == factory, f"nothing written as {USER}: {attrs()}")
        r = mm(["--write-kernel", "--stored"])
        check(r.rc == 0, f"--write-kernel --stored: {r.describe()}")
        check(attrs() == want, f"calibbias after --write-kernel: {attrs()}, want {want}")
        check(registers() == want, f"offset registers in i2c-stub after --write-kernel: {registers()}, want {want}")
        text = open(where["accelerometer"]).read()
        check("kernel-original -2838 1702 1366\n" in text, f"the values found recorded: {text}")
        left = [float(x) for x in text.split("\nbias ")[1].split("\n")[0].split()]
        check(all(abs(v) < g0 / 2048 * 1.01 for v in left), f"the software offset keeps only the rounding: {left}")
        r = mm(["--show"])
        check(r.rc == 0 and "they hold it" in r.out, f"--show: {r.describe()}")
        r = mm(["--restore-kernel"])
        check(r.rc == 0 and attrs() == factory and registers() == factory,
              f"--restore-kernel: {attrs()} / registers {registers()}: {r.describe()}")
        text = open(where["accelerometer"]).read()
        back = [float(x) for x in text.split("\nbias ")[1].split("\n")[0].split()]
        check("kernel-" not in text and all(abs(a - b) < 1e-9 for a, b in zip(back, abias)),
              f"the offsets back in software: {back}, stored {abias}")
        r = mm(["--write-kernel", "--stored"])
        check(r.rc == 0 and attrs() == want, f"--write-kernel --stored again: {attrs()}: {r.describe()}")
        r = mm(["--forget"])
        check(r.rc == 0 and attrs() == factory and registers() == factory,
              f"--forget: {attrs()} / registers {registers()}: {r.describe()}")
        check(not os.path.exists(where["accelerometer"]) and not os.path.exists(where["gyroscope"]),
              "--forget removed the calibrations")
        d = kk.diff_attributes(before, kk.writable_attributes(dev))
        check(not d, "left as found: " + "; ".join(d))
        return f"found {factory}, wrote {want} (registers agree), restored by --restore-kernel and --forget; refused as {USER}"


Guest.t_calibbias = lambda self: _calibbias_case(self)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--build", default=".build/debug")
    ap.add_argument("--only")
    ap.add_argument("--phase", type=int, default=1, choices=(1, 2))
    args = ap.parse_args()
    D.use_phase(args.phase)
    global FIXTURES
    FIXTURES = {c.key: list(c.sensors) for c in D.CHIPS}
    if args.phase == 1:
        FIXTURES["hid-sensor-hub"] = HID_NAMES
    sys.exit(Guest(args).run())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An emulated HID sensor hub on /dev/uhid, for the kernel suite (Tests/Kernel).

It creates one HID device whose report descriptor, on the Sensors usage page (0x20), holds three
sensors as Physical collections (hid-sensor-hub matches a field to its sensor through the field's
physical collection):

    report 1  Accelerometer 3D (0x73)   x, y, z: 16-bit, unit exponent -3 (1 LSB = 0.001 g)
    report 2  Gyrometer 3D (0x76)       x, y, z: 16-bit, unit exponent -2 (1 LSB = 0.01 deg/s)
    report 3  Compass 3D (0x83)         x, y, z: 16-bit, unit exponent  0 (1 LSB = 1 mGauss)

Each sensor has a feature report (reporting state, power state, report interval in ms, change
sensitivity) and an input report (x, y, z) under the same report id. The kernel's hid-sensor-accel-3d,
hid-sensor-gyro-3d and hid-sensor-magn-3d make IIO devices of them, with a buffer and a trigger of
their own.

What the hub does, as a real one would:
  - SET_REPORT (feature): stores the bytes; GET_REPORT (feature): answers the stored bytes;
    GET_REPORT (input): answers the sensor's current sample.
  - While the device is open (UHID_OPEN .. UHID_CLOSE) and a sensor's reporting state is not
    "no events" and its power state is not D4, it pushes that sensor's input report every report
    interval (as stored by the kernel), on a fixed schedule (no drift).
  - Each pushed report is a new sample (sequence number n per sensor): distinct per axis and per
    report, so that a reader can tell reports apart, order them and spot a duplicate:
        accelerometer  x = 100 + n % 2000,  y = -(300 + n % 2000),  z = -1000 + n % 7
        gyrometer      x = 50 + n % 3000,   y = -(70 + n % 3000),   z = 11 + n % 13
        compass        x = 200 + n % 1000,  y = -(150 + n % 1000),  z = 400 + n % 11
    With `hold` the values stay at those of the last sample (reports go on, identical).

Every event is logged, one JSON object per line, to --log (flushed at once):
    {"ev":"input","sensor":"accel","how":"push"|"get","seq":n,"raw":[x,y,z],"mono_ns":..,"real_ns":..}
    {"ev":"set_feature"|"get_feature","sensor":..,"state":{..}}  {"ev":"open"} {"ev":"close"}
    {"ev":"start"} {"ev":"stop"} {"ev":"created"} {"ev":"destroyed"}
"get" inputs are the answers to the kernel's GET_REPORT (a `raw` read); the kernel hands those to the
driver as well, so they may appear in a buffer that is running.

Control: commands, one per line, written to the FIFO --control:
    hold | vary | unplug | plug | quit
`unplug` destroys the HID device (UHID_DESTROY: the kernel removes its IIO devices); `plug` creates
it again. --ready FILE is written once the device exists (and again after each plug).
"""
import argparse
import json
import os
import select
import struct
import sys
import time

UHID_DESTROY = 1
UHID_START = 2
UHID_STOP = 3
UHID_OPEN = 4
UHID_CLOSE = 5
UHID_OUTPUT = 6
UHID_GET_REPORT = 9
UHID_GET_REPORT_REPLY = 10
UHID_CREATE2 = 11
UHID_INPUT2 = 12
UHID_SET_REPORT = 13
UHID_SET_REPORT_REPLY = 14
UHID_FEATURE_REPORT, UHID_OUTPUT_REPORT, UHID_INPUT_REPORT = 0, 1, 2
BUS_USB = 0x03

# Selector usages of the two enumerated properties, in the order they are listed in the descriptor.
REPORTING_STATES = ["no_events", "all_events", "threshold_events", "no_events_wake",
                    "all_events_wake", "threshold_events_wake"]          # 0x840..0x845
POWER_STATES = ["undefined", "D0_full_power", "D1_low_power", "D2_standby", "D3_sleep",
                "D4_off"]                                                 # 0x850..0x855


# --- report descriptor -----------------------------------------------------------------------

def item(kind, tag, value=None, size=None):
    """One short HID item: kind 0 main, 1 global, 2 local."""
    if value is None:
        return bytes([(tag << 4) | (kind << 2)])
    if size is None:
        if -128 <= value <= 127 and kind != 0:
            size = 1
        elif -32768 <= value <= 32767:
            size = 2
        else:
            size = 4
        if value >= 0 and kind != 1:       # usages are unsigned
            size = 1 if value < 0x100 else 2 if value < 0x10000 else 4
    code = {0: 0, 1: 1, 2: 2, 4: 3}[size]
    return bytes([(tag << 4) | (kind << 2) | code]) + (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def usage_page(p): return item(1, 0x0, p, 1)
def usage(u): return item(2, 0x0, u, 1 if u < 0x100 else 2)
def logical_min(v): return item(1, 0x1, v)
def logical_max(v): return item(1, 0x2, v)
def unit_exponent(e): return item(1, 0x5, e & 0x0F, 1)
def report_size(n): return item(1, 0x7, n, 1)
def report_id(n): return item(1, 0x8, n, 1)
def report_count(n): return item(1, 0x9, n, 1)
def collection(kind): return item(0, 0xA, kind, 1)    # 0 physical, 1 application, 2 logical
def end_collection(): return item(0, 0xC)
def input_var(): return item(0, 0x8, 0x02, 1)          # Data, Variable, Absolute
def feature_var(): return item(0, 0xB, 0x02, 1)
def feature_arr(): return item(0, 0xB, 0x00, 1)        # Data, Array, Absolute


SENSORS = [
    # name, report id, sensor usage, x/y/z usages, unit exponent, IIO name
    ("accel", 1, 0x73, (0x453, 0x454, 0x455), -3, "accel_3d"),
    ("gyro", 2, 0x76, (0x457, 0x458, 0x459), -2, "gyro_3d"),
    ("magn", 3, 0x83, (0x485, 0x486, 0x487), 0, "magn_3d"),
]


def sensor_block(rid, sensor_usage, axes, exponent):
    d = report_id(rid) + usage(sensor_usage) + collection(0)
    # Feature report: reporting state (array of 6 selectors), power state (6), report interval, sensitivity.
    d += usage(0x316) + logical_min(1) + logical_max(6) + report_size(8) + report_count(1)
    d += collection(2) + b"".join(usage(0x840 + i) for i in range(6)) + feature_arr() + end_collection()
    d += usage(0x319) + logical_min(1) + logical_max(6) + report_size(8) + report_count(1)
    d += collection(2) + b"".join(usage(0x850 + i) for i in range(6)) + feature_arr() + end_collection()
    d += usage(0x30E) + logical_min(0) + item(1, 0x2, 0x7FFFFFFF, 4) + report_size(32) + report_count(1)
    d += unit_exponent(0) + feature_var()
    d += usage(0x30F) + logical_min(0) + item(1, 0x2, 0xFFFF, 4) + report_size(16) + report_count(1)
    d += unit_exponent(-2) + feature_var()
    # Input report: x, y, z, each its own field (the kernel finds each axis by its field's first usage).
    d += logical_min(-32767) + logical_max(32767) + report_size(16) + report_count(1) + unit_exponent(exponent)
    for a in axes:
        d += usage(a) + input_var()
    d += end_collection()
    return d


def report_descriptor():
    d = usage_page(0x20) + usage(0x01) + collection(1)
    for _, rid, su, axes, exp, _ in SENSORS:
        d += sensor_block(rid, su, axes, exp)
    d += end_collection()
    return d


# --- the hub ---------------------------------------------------------------------------------

class Sensor:
    def __init__(self, name, rid, initial_interval_ms):
        self.name, self.rid = name, rid
        self.reporting = 0            # index into REPORTING_STATES (kernel writes index + 1)
        self.power = 5                # D4 off
        self.interval_ms = initial_interval_ms
        self.sensitivity = 0
        self.seq = 0                  # samples pushed
        self.hold = False
        self.current = self.sample(0)
        self.next_due = None

    def sample(self, n):
        if self.name == "accel":
            return (100 + n % 2000, -(300 + n % 2000), -1000 + n % 7)
        if self.name == "gyro":
            return (50 + n % 3000, -(70 + n % 3000), 11 + n % 13)
        return (200 + n % 1000, -(150 + n % 1000), 400 + n % 11)

    def feature_bytes(self):
        return struct.pack("<BBBIH", self.rid, self.reporting + 1, self.power + 1,
                           self.interval_ms & 0xFFFFFFFF, self.sensitivity & 0xFFFF)

    def store_feature(self, data):
        data = bytes(data) + bytes(max(0, 9 - len(data)))
        _, rs, ps, interval, sens = struct.unpack("<BBBIH", data[:9])
        self.reporting = max(0, min(5, rs - 1)) if rs else 0
        self.power = max(0, min(5, ps - 1)) if ps else 0
        self.interval_ms = interval
        self.sensitivity = sens

    def input_bytes(self):
        return struct.pack("<Bhhh", self.rid, *self.current)

    def state(self):
        return {"reporting": REPORTING_STATES[self.reporting], "power": POWER_STATES[self.power],
                "interval_ms": self.interval_ms, "sensitivity": self.sensitivity}

    def active(self):
        return REPORTING_STATES[self.reporting] != "no_events" and POWER_STATES[self.power] != "D4_off"

    def period(self):
        return (self.interval_ms if self.interval_ms > 0 else 100) / 1000.0


class Hub:
    def __init__(self, args):
        self.args = args
        self.fd = os.open("/dev/uhid", os.O_RDWR | os.O_CLOEXEC)
        self.log = open(args.log, "a", buffering=1)
        self.sensors = {s[1]: Sensor(s[0], s[1], args.interval) for s in SENSORS}
        self.created = False
        self.opened = False
        self.hold = False

    def emit(self, **kv):
        kv.setdefault("mono_ns", time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        kv.setdefault("real_ns", time.clock_gettime_ns(time.CLOCK_REALTIME))
        self.log.write(json.dumps(kv) + "\n")

    def write(self, data):
        os.write(self.fd, data)

    def create(self):
        rd = report_descriptor()
        name = b"IIOMotion test sensor hub"
        ev = struct.pack("<I128s64s64sHHIIII", UHID_CREATE2, name, b"iiomotion/uhid0", b"kk-hub-1",
                         len(rd), BUS_USB, 0x1209, 0x5A4D, 0x0100, 0) + rd.ljust(4096, b"\0")
        self.write(ev)
        self.created = True
        for s in self.sensors.values():
            s.reporting, s.power, s.next_due = 0, 5, None
        self.emit(ev="created", descriptor_bytes=len(rd))
        if self.args.ready:
            with open(self.args.ready, "w") as f:
                f.write("created\n")

    def destroy(self):
        if self.created:
            self.write(struct.pack("<I", UHID_DESTROY))
            self.created = False
            self.opened = False
            self.emit(ev="destroyed")
            if self.args.ready:
                try:
                    os.unlink(self.args.ready)
                except FileNotFoundError:
                    pass

    def push(self, s, how, req_id=None):
        """Sends the sensor's input report: pushed (a new sample) or as the answer to GET_REPORT.
        The log's t0_ns/t1_ns bracket the write: the kernel timestamps the sample inside it."""
        if how == "push":
            if not self.hold:
                s.current = s.sample(s.seq)
            s.seq += 1
        data = s.input_bytes()
        if how == "push":
            ev = struct.pack("<IH", UHID_INPUT2, len(data)) + data.ljust(4096, b"\0")
        else:
            ev = struct.pack("<IIHH", UHID_GET_REPORT_REPLY, req_id, 0, len(data)) + data.ljust(4096, b"\0")
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self.write(ev)
        t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self.emit(ev="input", sensor=s.name, how=how, seq=s.seq - 1 if how == "push" else None,
                  raw=list(s.current), t0_ns=t0, t1_ns=t1, mono_ns=t0)

    def handle(self, buf):
        (etype,) = struct.unpack_from("<I", buf, 0)
        if etype == UHID_START:
            self.emit(ev="start")
        elif etype == UHID_STOP:
            self.emit(ev="stop")
        elif etype == UHID_OPEN:
            self.opened = True
            self.emit(ev="open")
        elif etype == UHID_CLOSE:
            self.opened = False
            self.emit(ev="close")
        elif etype == UHID_OUTPUT:
            self.emit(ev="output")
        elif etype == UHID_GET_REPORT:
            rid_req, rnum, rtype = struct.unpack_from("<IBB", buf, 4)
            s = self.sensors.get(rnum)
            if s is None:
                self.write(struct.pack("<IIHH", UHID_GET_REPORT_REPLY, rid_req, 5, 0) + bytes(4096))
                self.emit(ev="get_unknown", rnum=rnum, rtype=rtype)
                return
            if rtype == UHID_FEATURE_REPORT:
                data = s.feature_bytes()
                self.emit(ev="get_feature", sensor=s.name, state=s.state())
                self.write(struct.pack("<IIHH", UHID_GET_REPORT_REPLY, rid_req, 0, len(data)) + data.ljust(4096, b"\0"))
            else:
                self.push(s, "get", rid_req)
        elif etype == UHID_SET_REPORT:
            rid_req, rnum, rtype, size = struct.unpack_from("<IBBH", buf, 4)
            data = buf[12:12 + size]
            s = self.sensors.get(rnum)
            err = 0
            if s is not None and rtype == UHID_FEATURE_REPORT:
                was_active = s.active()
                s.store_feature(data)
                self.emit(ev="set_feature", sensor=s.name, state=s.state(), bytes=data.hex())
                if s.active() and not was_active:
                    s.next_due = time.monotonic() + s.period()
            else:
                err = 5
                self.emit(ev="set_unknown", rnum=rnum, rtype=rtype)
            self.write(struct.pack("<IIH", UHID_SET_REPORT_REPLY, rid_req, err) + bytes(2))
        else:
            self.emit(ev="event", type=etype)

    def control(self, line):
        cmd = line.strip()
        if not cmd:
            return True
        self.emit(ev="control", cmd=cmd)
        if cmd == "hold":
            self.hold = True
        elif cmd == "vary":
            self.hold = False
        elif cmd == "unplug":
            self.destroy()
        elif cmd == "plug":
            if not self.created:
                self.create()
        elif cmd == "quit":
            return False
        return True

    def run(self):
        ctl = os.open(self.args.control, os.O_RDWR | os.O_NONBLOCK) if self.args.control else None
        self.create()
        pending = b""
        running = True
        while running:
            now = time.monotonic()
            timeout = 1.0
            for s in self.sensors.values():
                if self.created and self.opened and s.active():
                    if s.next_due is None:
                        s.next_due = now + s.period()
                    timeout = min(timeout, max(0.0, s.next_due - now))
                else:
                    s.next_due = None
            fds = [self.fd] + ([ctl] if ctl is not None else [])
            r, _, _ = select.select(fds, [], [], timeout)
            if self.fd in r:
                try:
                    buf = os.read(self.fd, 8192)
                except OSError as e:
                    self.emit(ev="read_error", error=str(e))
                    buf = b""
                if len(buf) >= 4:
                    self.handle(buf)
            if ctl is not None and ctl in r:
                pending += os.read(ctl, 4096)
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    running = self.control(line.decode()) and running
            now = time.monotonic()
            for s in self.sensors.values():
                if s.next_due is not None and now >= s.next_due and self.created and self.opened and s.active():
                    self.push(s, "push")
                    s.next_due += s.period()
                    if s.next_due < now - 1.0:      # far behind (a stalled machine): resume from now
                        s.next_due = now + s.period()
        self.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--control")
    ap.add_argument("--ready")
    ap.add_argument("--interval", type=int, default=20, help="initial report interval, ms")
    ap.add_argument("--print-descriptor", action="store_true")
    args = ap.parse_args()
    if args.print_descriptor:
        print(report_descriptor().hex())
        return
    Hub(args).run()


if __name__ == "__main__":
    main()

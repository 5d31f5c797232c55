#!/usr/bin/env python3
"""Host side of the kernel suite: reads RESULTS/results.jsonl (written by the guest), prints every
test's result, the driver x case matrix and the summary line, and exits 1 when a test failed, none
ran, or the guest did not finish.

  report.py RESULTS [--guest-rc N] [--seconds S]
"""
import argparse
import json
import os
import re
import sys

ORDER = ["presets", "list", "list-json", "once", "once-follows", "default-stream", "every-sample",
         "every-sample-csv", "unplug", "left-as-found", "non-root", "non-root-udev", "busy",
         "record", "differential", "udev-hwdb", "calibbias"]
MATRIX = [("list", ["list", "list-json"]), ("once", ["once", "once-follows"]),
          ("default stream", ["default-stream"]), ("every sample", ["every-sample", "every-sample-csv"]),
          ("unplug", ["unplug"]), ("non-root", ["non-root", "non-root-udev"]), ("busy", ["busy"]),
          ("left as found", ["left-as-found"]), ("recorded/diff", ["record", "differential"]),
          ("udev hwdb", ["udev-hwdb"]), ("calibbias", ["calibbias"])]


def load(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--guest-rc", type=int, default=0)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    recs = load(os.path.join(a.results, "results.jsonl")) + load(os.path.join(a.results, "host-results.jsonl"))
    for r in recs:
        print(f"kernel: {r['status'].upper():4} {r['case']}/{r['device']} ({r['seconds']} s) {r['detail'][:400]}")

    devices = []
    for r in recs:
        if r["device"] not in devices and r["device"] != "all":
            devices.append(r["device"])
    cell = {}
    for r in recs:
        for col, cases in MATRIX:
            if r["case"] in cases:
                for d in ([r["device"]] if r["device"] != "all" else devices):
                    prev = cell.get((d, col))
                    if r["device"] == "all" and prev is not None:
                        continue
                    s = r["status"]
                    cell[(d, col)] = "FAIL" if "fail" in (s, (prev or "").lower()) else \
                        ("pass" if s == "pass" or prev == "pass" else s)
    if recs:
        w = max(len(d) for d in devices) if devices else 6
        print("\nkernel: driver x case")
        print("  " + "device".ljust(w) + "  " + "  ".join(c for c, _ in MATRIX))
        for d in devices:
            print("  " + d.ljust(w) + "  " + "  ".join(cell.get((d, c), "-").ljust(len(c)) for c, _ in MATRIX))
    timing = os.path.join(a.results, "timing.json")
    if os.path.exists(timing):
        print("kernel: guest timing (s): " + json.dumps(json.load(open(timing))))
    boot = os.path.join(a.results, "console.log")
    if os.path.exists(boot):
        m = re.findall(r"guest: up ([0-9.]+) s after boot", open(boot, errors="replace").read())
        if m:
            print(f"kernel: guest up {m[0]} s after the kernel started")
    passed = sum(r["status"] == "pass" for r in recs)
    failed = sum(r["status"] == "fail" for r in recs)
    skipped = sum(r["status"] == "skip" for r in recs)
    problems = []
    if a.guest_rc not in (0, 1):
        problems.append(f"the guest did not finish (exit {a.guest_rc}); see {a.results}/console.log and cmd.out")
        failed += 1
    elif not os.path.exists(timing):
        # The suite writes timing.json after its last case; exit 1 without it is an uncaught
        # exception (Python's exit status for one), not a run whose failures are recorded above.
        problems.append(f"the guest suite stopped before its end (exit {a.guest_rc}, no timing.json); "
                        f"see {a.results}/cmd.out")
        failed += 1
    if not recs:
        problems.append("no test ran")
        failed += 1
    for p in problems:
        print("kernel: " + p)
    if a.seconds is not None:
        print(f"kernel: suite took {a.seconds:.0f} s (boot, tests, power-off); results in {a.results}")
    print(f"kernel: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

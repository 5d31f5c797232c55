#!/usr/bin/env python3
"""What an IIO device looks like and how its buffer answers, in a form the differential test compares
between the kernel (in the guest) and iio-sim (on the host, inside `iio-sim --fixture F -- ...`).

  tree(id)   every file of the device folder an IIO reader uses (the folder itself, buffer/,
             buffer0/, scan_elements/, trigger/, events/): its mode and contents (or the errno a read
             gets), and /dev/iio:deviceN (present or not, its mode)
  probe(id)  the buffer driven by hand, as libiio does it: the first scan element enabled,
             buffer/enable 1 (its errno), each raw file read and buffer/length written while it
             runs (their errnos), then everything put back; nothing without a buffer

  sysfs_tree.py NAME...   prints {"NAME": {"tree": ..., "probe": ...}} for the devices so named
"""
import errno
import json
import os
import stat
import sys

IIO = "/sys/bus/iio/devices"
FOLDERS = ["", "buffer", "buffer0", "scan_elements", "trigger", "events"]
# Not IIO attributes, or ones whose contents depend on the machine (dev: the major and minor numbers).
SKIP = {"uevent", "dev", "power", "subsystem", "of_node", "driver", "firmware_node", "device",
        "waiting_for_supplier", "supplier", "consumer"}


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return f"<{errno.errorcode.get(e.errno, e.errno)}>"


def write(path, value):
    """The errno name a write gets ('' when it succeeds)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    try:
        os.write(fd, value.encode())
        return ""
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        os.close(fd)


def tree(dev):
    base = f"{IIO}/{dev}"
    out = {}
    for sub in FOLDERS:
        d = os.path.join(base, sub) if sub else base
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            if f in SKIP or os.path.islink(p) or os.path.isdir(p):
                continue
            st = os.stat(p)
            out[f"{sub}/{f}" if sub else f] = {"mode": oct(st.st_mode & 0o777), "text": read(p)}
    node = f"/dev/{dev}"
    out["/dev/iio:deviceN"] = {"mode": oct(os.stat(node).st_mode & 0o777)} if os.path.exists(node) else None
    return out


def probe(dev):
    base = f"{IIO}/{dev}"
    if not os.path.isdir(f"{base}/buffer"):
        return None
    scan = f"{base}/scan_elements"
    elements = sorted((int(read(f"{scan}/{f}")), f[:-6]) for f in os.listdir(scan) if f.endswith("_index"))
    raws = sorted(f for f in os.listdir(base) if f.startswith("in_") and f.endswith("_raw"))
    out = {}
    first = next((e for _, e in elements if not e.endswith("timestamp")), None)
    if first is None:
        return {"elements": "none"}
    length = read(f"{base}/buffer/length")
    out["enable element"] = write(f"{scan}/{first}_en", "1")
    out["enable buffer"] = write(f"{base}/buffer/enable", "1")
    out["enabled"] = read(f"{base}/buffer/enable")
    for r in raws:
        v = read(f"{base}/{r}")
        out[f"read {r} while enabled"] = v if v.startswith("<") else "value"
    out["write buffer/length while enabled"] = write(f"{base}/buffer/length", length)
    out["write an element while enabled"] = write(f"{scan}/{first}_en", "0")
    out["disable buffer"] = write(f"{base}/buffer/enable", "0")
    out["disable element"] = write(f"{scan}/{first}_en", "0")
    return out


def by_name():
    out = {}
    for d in sorted(os.listdir(IIO)):
        if d.startswith("iio:device"):
            out.setdefault(read(f"{IIO}/{d}/name"), d)
    return out


def main():
    ids = by_name()
    res = {}
    for name in sys.argv[1:]:
        dev = ids.get(name)
        res[name] = {"tree": tree(dev), "probe": probe(dev)} if dev else None
    print(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

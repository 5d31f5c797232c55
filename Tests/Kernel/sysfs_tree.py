#!/usr/bin/env python3
"""What an IIO device looks like and how its buffer answers, in a form the differential test compares
between the kernel (in the guest) and iio-sim (on the host, inside `iio-sim --fixture F -- ...`).

  tree(id)   every file of the device folder an IIO reader uses (the folder itself, buffer/,
             buffer0/, scan_elements/, trigger/, events/): its mode and contents (or the errno a read
             gets), and /dev/iio:deviceN (present or not, its mode)
  probe(id)  the buffer driven by hand, as libiio does it: the first scan element enabled,
             buffer/enable 1 (its errno), each raw file read and buffer/length written while it
             runs (their errnos), then everything put back; nothing without a buffer

  frequencies(id)  what each writable *sampling_frequency answers to a list of values (its errno and
             what it reads then), and to its original value written back

  scan(id)   a device whose buffer has its trigger set: the first scan read with every axis
             enabled, in hex

  sysfs_tree.py NAME...   prints {"NAME": {"tree": ..., "probe": ..., "frequencies": ..., "scan": ...}}
                          for the devices so named
"""
import errno
import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kk  # noqa: E402

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


def node_probe(node):
    """A node without a buffer: a second open while one is open, then a read (their errnos)."""
    out = {}
    try:
        fd = os.open(node, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return {"open": errno.errorcode.get(e.errno, str(e.errno))}
    try:
        try:
            os.close(os.open(node, os.O_RDONLY | os.O_NONBLOCK))
            out["second open"] = ""
        except OSError as e:
            out["second open"] = errno.errorcode.get(e.errno, str(e.errno))
        try:
            os.read(fd, 64)
            out["read"] = ""
        except OSError as e:
            out["read"] = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        os.close(fd)
    return out


def probe(dev):
    base = f"{IIO}/{dev}"
    if not os.path.isdir(f"{base}/buffer"):
        return {"node": node_probe(f"/dev/{dev}")} if os.path.exists(f"/dev/{dev}") else None
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


def scan(dev, timeout=5.0):
    """A device whose buffer has its trigger set: every axis enabled (no timestamp), the first scan
    read from the node, in hex; everything put back. None for other devices."""
    import select
    base = f"{IIO}/{dev}"
    if not os.path.isdir(f"{base}/buffer") or read(f"{base}/trigger/current_trigger") in ("", "<ENOENT>"):
        return None
    sdir = f"{base}/scan_elements"
    axes = sorted((int(read(f"{sdir}/{f}")), f[:-6]) for f in os.listdir(sdir)
                  if f.endswith("_index") and not f.startswith("in_timestamp"))
    size = 0
    for _, e in axes:
        t = read(f"{sdir}/{e}_type")
        n = int(t.split("/")[1].split(">>")[0].split("X")[0]) // 8
        size = (size + n - 1) // n * n + n
    out = {}
    try:
        for _, e in axes:
            write(f"{sdir}/{e}_en", "1")
        out["enable"] = write(f"{base}/buffer/enable", "1") or "ok"
        fd = os.open(f"/dev/{dev}", os.O_RDONLY | os.O_NONBLOCK)
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
            data = os.read(fd, 4096) if ready else b""
        finally:
            os.close(fd)
        out["first scan"] = data[:size].hex() if data else "none"
    except OSError as e:
        out["error"] = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        write(f"{base}/buffer/enable", "0")
        for _, e in axes:
            write(f"{sdir}/{e}_en", "0")
    return out


# What is written to each sampling_frequency file (then the original value is written back).
FREQUENCIES = ["0", "1", "12.5", "25", "50", "100", "101", "0.78", "400", "1000", "-5", "abc", " 50"]


def frequencies(dev):
    """Each writable *sampling_frequency file: per value written, its errno and what it reads then."""
    base = f"{IIO}/{dev}"
    out = {}
    for f in sorted(os.listdir(base)):
        p = f"{base}/{f}"
        if not f.endswith("sampling_frequency") or not os.stat(p).st_mode & 0o200:
            continue
        original = read(p)
        avail = read(f"{p}_available")
        values = FREQUENCIES + ([] if avail.startswith("<") else avail.split()[:1] + avail.split()[-1:])
        res = {}
        for v in values:
            e = write(p, v)
            res[v] = f"{e or 'ok'} {read(p)}"
        res["restore"] = f"{write(p, original) or 'ok'} {read(p)}"
        out[f] = res
    return out


def by_name():
    """Device key (kk.devices: the name, unless several devices share it) -> id."""
    return kk.devices()


def main():
    ids = by_name()
    res = {}
    for name in sys.argv[1:]:
        dev = ids.get(name)
        res[name] = {"tree": tree(dev), "probe": probe(dev), "frequencies": frequencies(dev), "scan": scan(dev)} if dev else None
    print(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

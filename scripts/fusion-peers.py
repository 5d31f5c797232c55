#!/usr/bin/env python3
"""Open attitude filters on the samples IIOMotion's device motion fused (scripts/fusion-accuracy --peers).

    fusion-peers.py [--ours-only] RECORD.csv [RECORD.csv ...]   (run in the peers' virtual environment)

Each RECORD is what `motion-truth --record` writes: every accelerometer, gyroscope and magnetometer
sample the manager delivered (Core Motion's units: g with Core Motion's sign, rad/s, µT), the true
attitude at each gyroscope sample (`attitude,truth`, device to east-north-up) and IIOMotion's
estimate (`attitude,IIOMotion`, device to its reference frame), as rotation vectors. Runs VQF
(`vqf` 2.1, causal `VQF.updateBatch`), x-io Fusion (`imufusion` 1.3: `Ahrs` with `Bias`, the
library's gyroscope offset from stillness), Madgwick and Mahony (`ahrs` 0.4) on exactly those
samples, each with its documented defaults (only the sample rate and, for Fusion, the BMI160's
±2000 °/s gyroscope range given), with the magnetometer when the record has one. Prints one JSON
object per record and filter: tilt RMS (after 2 s), heading drift (°/min, least-squares slope of
the relative heading error from 10 s on) and, with a magnetometer, heading RMS from north (after
2 s). Heading is that of the device's x and y axes, weighted by how horizontal each is (`metrics`). Peers are benchmark tools only.

Conventions differ (VQF east-north-up, Fusion north-west-up, ahrs north-east-down, and which way
their quaternions map): each filter's are measured once on synthetic samples (a device lying with
+x up; turning about +z; lying face up with the field along +y) rather than assumed.
"""
import json
import math
import sys

import numpy as np

G = 9.80665


def rotation(v):
    """Rotation matrix of a rotation vector."""
    a = np.linalg.norm(v)
    if a < 1e-15:
        return np.eye(3)
    k = v / a
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(a) * K + (1 - math.cos(a)) * K @ K


def quat_matrix(q):
    """Rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def load(path):
    raw = {"accelerometer": [], "gyroscope": [], "magnetometer": []}
    truth, ours = [], []
    with open(path) as f:
        next(f)
        for line in f:
            t, sensor, device, x, y, z = line.rstrip("\n").split(",")
            row = (float(t), float(x), float(y), float(z))
            if device == "truth":
                truth.append(row)
            elif device == "IIOMotion":
                ours.append(row)
            elif sensor in raw:
                raw[sensor].append(row)
    return {k: np.array(v) for k, v in raw.items()}, np.array(truth), np.array(ours)


def samples(raw):
    """Per gyroscope sample: t, gyro (rad/s), acc (m/s², kernel sign), mag (µT, latest) or None."""
    gyr = raw["gyroscope"]
    acc = raw["accelerometer"]
    t = gyr[:, 0]
    # The acceleration at each gyroscope time, interpolated as IIOMotion's aligner does (the same
    # samples when both share a device, as on a BMI160).
    a = np.stack([np.interp(t, acc[:, 0], acc[:, i]) for i in (1, 2, 3)], axis=1) * -G
    mag = None
    if len(raw["magnetometer"]):
        m = raw["magnetometer"]
        idx = np.clip(np.searchsorted(m[:, 0], t, side="right") - 1, 0, len(m) - 1)
        mag = m[idx, 1:4]
    return t, gyr[:, 1:4], a, mag


# --- the peers -------------------------------------------------------------------------------

def run_vqf(dt, gyr, acc, mag):
    from vqf import VQF
    v = VQF(dt)
    if mag is None:
        out = v.updateBatch(np.ascontiguousarray(gyr), np.ascontiguousarray(acc))
        return out["quat6D"]
    out = v.updateBatch(np.ascontiguousarray(gyr), np.ascontiguousarray(acc), np.ascontiguousarray(mag))
    return out["quat9D"]


def run_fusion(dt, gyr, acc, mag):
    import imufusion
    rate = 1 / dt
    ahrs = imufusion.Ahrs()
    ahrs.set_settings(imufusion.AhrsSettings(sample_rate=rate, gyroscope_range=2000))
    bias = imufusion.Bias()
    bias.set_settings(imufusion.BiasSettings(sample_rate=rate))
    out = np.empty((len(gyr), 4))
    gd = np.degrees(gyr)
    ag = acc / G
    for i in range(len(gyr)):
        g = bias.update(np.ascontiguousarray(gd[i]))
        if mag is None:
            ahrs.update_no_magnetometer(g, np.ascontiguousarray(ag[i]))
        else:
            ahrs.update(g, np.ascontiguousarray(ag[i]), np.ascontiguousarray(mag[i]))
        out[i] = ahrs.get_quaternion()
    return out


def run_madgwick(dt, gyr, acc, mag):
    from ahrs.filters import Madgwick
    f = Madgwick(gyr=gyr, acc=acc, mag=mag, frequency=1 / dt) if mag is not None else Madgwick(gyr=gyr, acc=acc, frequency=1 / dt)
    return f.Q


def run_mahony(dt, gyr, acc, mag):
    from ahrs.filters import Mahony
    f = Mahony(gyr=gyr, acc=acc, mag=mag, frequency=1 / dt) if mag is not None else Mahony(gyr=gyr, acc=acc, frequency=1 / dt)
    return f.Q


PEERS = [("VQF", run_vqf), ("Fusion", run_fusion), ("Madgwick", run_madgwick), ("Mahony", run_mahony)]


# --- conventions, measured ------------------------------------------------------------------

def convention(run, dt, with_mag):
    """(transpose?, up sign, heading sign, north angle) for a filter's output quaternions, found by
    feeding it synthetic samples. Returns a function quaternion -> (device-to-earth matrix, up axis
    sign) and the heading map."""
    n = int(3 / dt)
    field = np.array([0.0, 20.0, -45.0])  # face up, top edge north (µT)
    # 1. Lying with +x up: which interpretation puts +x up?
    acc = np.tile([G, 0, 0], (n, 1))
    gyr = np.zeros((n, 3))
    magx = np.tile([-45.0, 20.0, 0.0], (n, 1)) if with_mag else None  # +x up, top edge north
    q = run(dt, gyr, acc, magx)[-1]
    best = None
    for transpose in (False, True):
        R = quat_matrix(q)
        R = R.T if transpose else R
        for up in (1, -1):
            score = (R.T @ np.array([0, 0, up]))[0]  # +x's share of "up" in device coordinates
            if best is None or score > best[0]:
                best = (score, transpose, up)
    _, transpose, up = best

    def matrix(qq):
        R = quat_matrix(qq)
        return R.T if transpose else R

    # 2. Turning about device +z (face up) at 0.5 rad/s for 1 s: a right-hand turn seen from above
    #    is a counter-clockwise turn, so the compass heading of the top edge falls.
    m1 = int(1 / dt)
    acc = np.tile([0, 0, G], (n + m1, 1))
    gyr = np.zeros((n + m1, 3))
    gyr[n:, 2] = 0.5
    mags = None
    if with_mag:
        mags = np.tile(field, (n + m1, 1))
        for i in range(n, n + m1):  # the field turns the other way in device coordinates
            a = -0.5 * (i - n + 1) * dt
            c, s = math.cos(a), math.sin(a)
            mags[i] = [c * field[0] - s * field[1], s * field[0] + c * field[1], field[2]]
    Q = run(dt, gyr, acc, mags)

    def angle(qq):
        h = matrix(qq) @ np.array([0.0, 1.0, 0.0])
        return math.atan2(h[1], h[0])
    turned = wrap(angle(Q[-1]) - angle(Q[n - 1]))
    # heading = sign·angle + north: the heading must fall (by 28.6°) whichever way the filter's
    # horizontal axes turn.
    sign = -1.0 if turned > 0 else 1.0
    north = 0.0
    if with_mag:
        # 3. Face up, top edge north: heading 0.
        acc = np.tile([0, 0, G], (n, 1))
        Qn = run(dt, np.zeros((n, 3)), acc, np.tile(field, (n, 1)))
        north = -sign * angle(Qn[-1])
    return matrix, up, sign, north


def wrap(a):
    return (a + math.pi) % (2 * math.pi) - math.pi


def metrics(t, Rs, up, sign, north, truth_R, mag):
    """Tilt RMS after 2 s, heading drift (°/min) from 10 s on, heading RMS (north) after 2 s.

    Heading is that of the device's x and y axes, each weighted by the square of its horizontal
    part in the truth: the heading of an axis near the vertical is undefined (a small tilt error
    swings it far), and a device in a car's holder or carried upright has its top edge 70° up."""
    t = t - t[0]
    axes = (np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
    tilt, rel, absolute = [], [], []
    h0 = None
    for i, R in enumerate(Rs):
        est_up = R.T @ np.array([0, 0, up])
        true_up = truth_R[i].T @ np.array([0, 0, 1.0])
        tilt.append(math.degrees(math.acos(max(-1, min(1, est_up @ true_up / np.linalg.norm(est_up))))))
        est, tru, w = [], [], []
        for a in axes:
            h = R @ a
            est.append(sign * math.atan2(h[1], h[0]) + north)
            ht = truth_R[i] @ a
            tru.append(math.pi / 2 - math.atan2(ht[1], ht[0]))  # compass heading of the axis (ENU)
            w.append(ht[0] ** 2 + ht[1] ** 2)
        if h0 is None:
            h0 = (est, tru)

        def mean(errors):  # the weighted circular mean of the two axes' errors
            return math.atan2(sum(wi * math.sin(e) for wi, e in zip(w, errors)),
                              sum(wi * math.cos(e) for wi, e in zip(w, errors)))
        absolute.append(mean([wrap(e - r) for e, r in zip(est, tru)]))
        rel.append(mean([wrap((e - e0) - (r - r0)) for e, r, e0, r0 in zip(est, tru, h0[0], h0[1])]))
    tilt = np.array(tilt)
    herr = np.degrees(np.unwrap(np.array(rel)))
    after2 = t >= 2
    tail = t >= min(10, t[-1] / 2)
    slope = np.polyfit(t[tail], herr[tail], 1)[0] * 60 if tail.sum() > 10 else float("nan")
    out = {"tiltRMS": float(np.sqrt(np.mean(tilt[after2] ** 2))), "headingDrift": abs(float(slope))}
    if mag is not None:
        hd = np.degrees(np.array(absolute))[after2]
        out["headingRMS"] = float(np.sqrt(np.mean(hd ** 2)))
    return out


def main(paths):
    ours_only = "--ours-only" in paths
    paths = [p for p in paths if p != "--ours-only"]
    for path in paths:
        raw, truth, ours = load(path)
        t, gyr, acc, mag = samples(raw)
        dt = float(np.median(np.diff(t)))
        # Every filter runs on every sample; the metrics use the gyroscope samples that have both a
        # truth row and an estimate of ours (matched by timestamp).
        key = lambda x: int(round(x * 1e9))
        truth_at = {key(r[0]): rotation(r[1:4]) for r in truth}
        ours_at = {key(r[0]): rotation(r[1:4]) for r in ours}
        use = np.array([key(x) in truth_at and key(x) in ours_at for x in t])
        truth_R = [truth_at[key(x)] for x in t[use]]
        ours_R = [ours_at[key(x)] for x in t[use]]
        # Ours: device to a z-up frame whose x is north (north frame) or arbitrary; heading clockwise.
        res = {"record": path, "samples": len(t), "rate": 1 / dt}
        res["IIOMotion"] = metrics(t[use], ours_R, 1, -1.0, 0.0, truth_R, mag)
        for name, run in ([] if ours_only else PEERS):
            matrix, up, sign, north = convention(run, dt, mag is not None)
            Q = run(dt, gyr, acc, mag)
            res[name] = metrics(t[use], [matrix(q) for q in np.asarray(Q)[use]], up, sign, north, truth_R, mag)
        print(json.dumps(res))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])

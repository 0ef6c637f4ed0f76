#!/usr/bin/env python3
"""Fits a hardware file's "measured_kernels" to scripts/measure-kernels.py output.

  python3 scripts/fit-kernels.py data/measurements/h200-qwen3-235b-a22b-decode.json \
      --hbm 4.8e12 --peak 989.4e12

The model (engine/costmodel/catalog.h, KernelProfile), per kernel group and
layer, against the datasheet HBM bandwidth and bf16 peak:
  attention, router:  floor + max(flops / (peak c), bytes / (hbm h))
  expert_ffn:         floor + experts x per_expert + flops / (peak c w/(w + half))
                      + bytes / (hbm h)     (w: the device's intermediate width)
Each is fitted by grid search, least squares of the relative error over all
measured points; prints the residual of every point and the JSON to paste.
Plain Python (no numpy), so it runs anywhere; about a minute.
"""

import argparse
import json

HIDDEN, INTER, DEVICES = 4096, 1536, 8


def frange(lo, hi, step):
    n = int(round((hi - lo) / step))
    return [lo + i * step for i in range(n + 1)]


def fit_max(points, hbm, peak):
    """floor + max(f / (peak c), b / (hbm h)): (rms, floor, h, c)."""
    best = None
    for floor in frange(0, 100, 1):
        for h in frange(0.30, 1.0, 0.02):
            for c in frange(0.02, 1.0, 0.02):
                err = 0.0
                for b, f, us in points:
                    pred = floor + max(f / (peak * c), b / (hbm * h)) * 1e6
                    err += ((pred - us) / us) ** 2
                if best is None or err < best[0]:
                    best = (err, floor, h, c)
    err, floor, h, c = best
    return (err / len(points)) ** 0.5, floor, h, c


def expert_pred(p, b, f, us, width, groups, hbm, peak):
    floor, per, h, c, half = p
    return floor + groups * per + (f / (peak * c * width / (width + half)) + b / (hbm * h)) * 1e6


def fit_expert(points, hbm, peak):
    best = None
    for floor in frange(30, 90, 5):
        for per in frange(0, 3, 0.2):
            for h in frange(0.40, 1.0, 0.05):
                for c in frange(0.1, 1.0, 0.1):
                    for half in frange(0, 3000, 200):
                        p = (floor, per, h, c, half)
                        err = sum(((expert_pred(p, *q, hbm, peak) - q[2]) / q[2]) ** 2
                                  for q in points)
                        if best is None or err < best[0]:
                            best = (err, p)
    err, p = best
    return (err / len(points)) ** 0.5, p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measurements")
    ap.add_argument("--hbm", type=float, required=True, help="datasheet HBM bytes/s")
    ap.add_argument("--peak", type=float, required=True, help="datasheet bf16 FLOP/s")
    args = ap.parse_args()
    rows = json.load(open(args.measurements))["layers"]
    out = {}
    for g in ("attention", "router"):
        pts = [(r[g]["bytes"], r[g]["flops"], r[g]["us"]) for r in rows]
        rms, floor, h, c = fit_max(pts, args.hbm, args.peak)
        out[g] = {"floor_us": floor, "hbm": round(h, 2), "compute": round(c, 2)}
        print(f"{g}: {out[g]}  rms {rms:.1%}")
        for r, (b, f, us) in zip(rows, pts):
            pred = floor + max(f / (args.peak * c), b / (args.hbm * h)) * 1e6
            print(f"  {r['layout']} B={r['batch']:5} C={r['context']:5} {us:8.1f} us, "
                  f"fit {pred:8.1f} ({(pred - us) / us:+.0%})")
    pts = []
    for r in rows:
        g = r["expert_ffn"]
        width = INTER // DEVICES if r["layout"] == "tp" else INTER
        per_expert = 3 * HIDDEN * width * 2
        act = r["rows_per_device"] * HIDDEN * 2 * 3
        groups = round((g["bytes"] - act) / per_expert)
        pts.append((g["bytes"], g["flops"], g["us"], width, groups))
    rms, p = fit_expert(pts, args.hbm, args.peak)
    floor, per, h, c, half = p
    out["expert_ffn"] = {"floor_us": floor, "hbm": round(h, 2), "compute": round(c, 2),
                         "per_expert_us": round(per, 2), "half_width": half,
                         "overlap": "serial"}
    print(f"expert_ffn: {out['expert_ffn']}  rms {rms:.1%}")
    for r, q in zip(rows, pts):
        pred = expert_pred(p, *q, args.hbm, args.peak)
        print(f"  {r['layout']} B={r['batch']:5} C={r['context']:5} experts {q[4]:3} "
              f"{q[2]:8.1f} us, fit {pred:8.1f} ({(pred - q[2]) / q[2]:+.0%})")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

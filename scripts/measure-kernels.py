#!/usr/bin/env python3
"""Times one device's share of a Qwen3-235B-A22B decode layer on a real GPU.

Runs only where a CUDA GPU and PyTorch are (not part of scripts/test: CI has
no GPU). It measures what the simulated cluster's cost model (engine/sim/,
docs/SIMULATION.md) prices from datasheet peaks and efficiency factors:

  * the ceilings: a streaming read's HBM bandwidth and a large bf16 GEMM's
    FLOP/s;
  * the floor: a graph-replayed kernel that does almost nothing;
  * per device, per layer, at batches of B running requests of context C:
    the attention block (RMSNorm, QKV projection, q/k norm, RoPE, KV write,
    decode attention, O projection), the router (GEMM, softmax, top-k) and
    the routed experts (sort rows by expert, gate/up grouped GEMM, SiLU,
    down grouped GEMM, weighted sum), for the two layouts Moebius switches
    between on 8 devices:
      tp: 8 of 64 query heads and 1 of 4 KV heads for all B requests; every
          expert's 1536-wide intermediate dim split 8 ways (192 columns);
          the B x 8 routed rows all run on every device.
      ep: all heads for B/8 requests (data-parallel attention); 16 whole
          experts; B x 8 / 8 = B routed rows arrive by all-to-all.
    Collectives are not run (one GPU): the cost model prices them apart.

Each group runs over 8 layers' distinct weights (more than the L2 holds) in
a CUDA graph, replayed after warm-up; the figure is the median replay / 8.
Alongside each time it prints the ideal time at the measured ceilings (max of
FLOPs / GEMM rate and bytes / HBM rate), so `ratio` is the kernel group's
shortfall from the roofline that the cost model's factors stand for.

  python3 scripts/measure-kernels.py [--out FILE.json] [--batches 1,16,...]
"""

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

H, NH, NKV, HD, E, TOPK, INTER, P = 4096, 64, 4, 128, 128, 8, 1536, 8
LAYERS = 8  # distinct weight sets per graph: 8 x ~0.6 GB per layout
BF16 = torch.bfloat16


def timed_graph(fn, replays=20):
    """Median ms of one replay of a graph capturing fn()."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def ceilings():
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")  # 2 GB
    xv = x.view(torch.float32)

    def read():
        return xv.sum()

    ms = timed_graph(read)
    hbm = x.numel() / (ms / 1e3)
    a = torch.randn(8192, 8192, dtype=BF16, device="cuda")
    b = torch.randn(8192, 8192, dtype=BF16, device="cuda")
    c = torch.empty(8192, 8192, dtype=BF16, device="cuda")
    ms = timed_graph(lambda: torch.matmul(a, b, out=c), replays=10)
    flops = 2 * 8192**3 / (ms / 1e3)
    y = torch.zeros(256, device="cuda")

    def tiny():
        for _ in range(200):
            y.add_(1.0)

    floor_us = timed_graph(tiny) * 1e3 / 200
    del x, a, b, c
    return {"hbm_read_bytes_per_s": hbm, "bf16_gemm_flops_per_s": flops,
            "tiny_kernel_us_in_graph": floor_us}


GROUPED_MM = {"kernel": "torch._grouped_mm"}


def grouped_mm(x, w, offs):
    return torch._grouped_mm(x, w, offs=offs)


class Layer:
    """One device's weights and buffers for one layer of `layout`."""

    def __init__(self, layout, batch, context):
        self.layout = layout
        tp = layout == "tp"
        self.nh = NH // P if tp else NH
        self.nkv = 1 if tp else NKV
        self.reqs = batch if tp else max(1, batch // P)
        self.experts = E if tp else E // P
        self.inter = INTER // P if tp else INTER
        self.rows = batch * TOPK if tp else max(1, batch * TOPK // P)
        r = lambda *s: torch.randn(*s, dtype=BF16, device="cuda") * 0.02
        self.wqkv = r(H, (self.nh + 2 * self.nkv) * HD)
        self.wo = r(self.nh * HD, H)
        self.wrouter = r(H, E)
        self.w13 = r(self.experts, H, 2 * self.inter)
        self.w2 = r(self.experts, self.inter, H)
        self.kc = r(self.reqs, self.nkv, context + 1, HD)
        self.vc = r(self.reqs, self.nkv, context + 1, HD)
        self.x = r(self.reqs, H)
        self.cos = torch.ones(self.reqs, HD, dtype=BF16, device="cuda")
        self.sin = torch.zeros(self.reqs, HD, dtype=BF16, device="cuda")
        self.pos = context
        # Routed rows this device computes: tp every row of every request;
        # ep the rows that reach its 16 experts (uniform routing).
        ids = torch.randint(0, self.experts, (self.rows,), device="cuda")
        self.ids = ids
        self.xrows = r(self.rows, H)
        self.gate = torch.rand(self.rows, 1, dtype=BF16, device="cuda")
        self.dst = torch.randint(0, self.reqs, (self.rows,), device="cuda")

    def bytes_flops(self):
        """(attention, router, experts) as (bytes, flops) at the roofline."""
        kv = 2 * self.reqs * self.nkv * (self.pos + 1) * HD * 2
        att_w = (self.wqkv.numel() + self.wo.numel()) * 2
        att_f = 2 * self.reqs * (self.wqkv.numel() + self.wo.numel()) + \
            4 * self.reqs * self.nh * (self.pos + 1) * HD
        router = (self.wrouter.numel() * 2, 2 * self.reqs * self.wrouter.numel())
        touched = torch.unique(self.ids).numel()
        ew = touched * (H * 2 * self.inter + self.inter * H) * 2
        ef = 2 * self.rows * (H * 2 * self.inter + self.inter * H)
        act = self.rows * H * 2 * 3
        return (kv + att_w + self.reqs * H * 4, att_f), router, (ew + act, ef)

    def attention(self):
        h = F.rms_norm(self.x, (H,))
        qkv = h @ self.wqkv
        q, k, v = qkv.split([self.nh * HD, self.nkv * HD, self.nkv * HD], dim=1)
        q = F.rms_norm(q.view(self.reqs, self.nh, HD), (HD,))
        k = F.rms_norm(k.view(self.reqs, self.nkv, HD), (HD,))
        q = q * self.cos[:, None] + q.roll(HD // 2, -1) * self.sin[:, None]
        k = k * self.cos[:, None] + k.roll(HD // 2, -1) * self.sin[:, None]
        self.kc[:, :, self.pos] = k
        self.vc[:, :, self.pos] = v.view(self.reqs, self.nkv, HD)
        # GQA decode as the kernels run it: a KV head's query heads are its
        # query rows.
        qg = q.view(self.reqs, self.nkv, self.nh // self.nkv, HD)
        o = F.scaled_dot_product_attention(qg, self.kc, self.vc)
        return o.reshape(self.reqs, self.nh * HD) @ self.wo

    def router(self):
        h = F.rms_norm(self.x, (H,))
        logits = (h @ self.wrouter).float()
        return torch.topk(torch.softmax(logits, -1), TOPK, dim=-1)

    def experts_fn(self):
        if GROUPED_MM["kernel"] != "torch._grouped_mm":
            return self.experts_bmm()
        order = torch.argsort(self.ids)
        counts = torch.zeros(self.experts, dtype=torch.int32, device="cuda")
        counts.scatter_add_(0, self.ids, torch.ones_like(self.ids, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        xs = self.xrows[order]
        y = grouped_mm(xs, self.w13, offs)
        a = F.silu(y[:, :self.inter]) * y[:, self.inter:]
        z = grouped_mm(a, self.w2, offs) * self.gate[order]
        out = torch.zeros(self.reqs, H, dtype=BF16, device="cuda")
        return out.index_add_(0, self.dst[order], z)

    def experts_bmm(self):
        """Fallback where _grouped_mm is missing: rows padded per expert."""
        if not hasattr(self, "slot"):
            ids = self.ids.cpu()
            cap = int(torch.bincount(ids, minlength=self.experts).max())
            slot = torch.full((self.experts, cap), self.rows, dtype=torch.long)
            fill = [0] * self.experts
            for r, e in enumerate(ids.tolist()):
                slot[e, fill[e]] = r
                fill[e] += 1
            self.slot = slot.cuda()
            self.xpad = torch.cat([self.xrows, torch.zeros(1, H, dtype=BF16, device="cuda")])
        xs = self.xpad[self.slot]
        y = torch.bmm(xs, self.w13)
        a = F.silu(y[..., :self.inter]) * y[..., self.inter:]
        z = torch.bmm(a, self.w2).reshape(-1, H)
        out = torch.zeros(self.reqs + 1, H, dtype=BF16, device="cuda")
        dst = torch.cat([self.dst, torch.tensor([self.reqs], device="cuda")])[self.slot.reshape(-1)]
        return out.index_add_(0, dst, z)


def measure(layout, batch, context, ceil):
    layers = [Layer(layout, batch, context) for _ in range(LAYERS)]
    res = {"layout": layout, "batch": batch, "context": context,
           "reqs_per_device": layers[0].reqs, "rows_per_device": layers[0].rows}
    groups = {"attention": lambda L: L.attention(), "router": lambda L: L.router(),
              "expert_ffn": lambda L: L.experts_fn()}
    ideal = dict(zip(groups, layers[0].bytes_flops()))
    total = 0.0
    for name, fn in groups.items():
        ms = timed_graph(lambda: [fn(L) for L in layers]) / LAYERS
        b, f = ideal[name]
        roof = max(b / ceil["hbm_read_bytes_per_s"], f / ceil["bf16_gemm_flops_per_s"]) * 1e6
        res[name] = {"us": ms * 1e3, "roofline_us": roof, "bytes": b, "flops": f}
        total += ms * 1e3

    def whole():
        for L in layers:
            L.attention()
            L.router()
            L.experts_fn()

    res["layer_us"] = timed_graph(whole) * 1e3 / LAYERS
    res["sum_of_groups_us"] = total
    del layers
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--batches", default="1,8,32,64,128,256,512,1024,2048")
    ap.add_argument("--context", type=int, default=512)
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.cuda.get_device_properties(0)
    ceil = ceilings()
    try:
        probe = Layer("ep", 8, 16)
        probe.experts_fn()
        torch.cuda.synchronize()
    except (RuntimeError, AttributeError) as e:
        GROUPED_MM["kernel"] = "torch.bmm over padded rows (" + str(e).split("\n")[0] + ")"
    print(f"expert GEMMs: {GROUPED_MM['kernel']}")
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs")
    print(f"ceilings: HBM read {ceil['hbm_read_bytes_per_s'] / 1e12:.2f} TB/s, "
          f"bf16 GEMM {ceil['bf16_gemm_flops_per_s'] / 1e12:.0f} TFLOP/s, "
          f"tiny kernel in a graph {ceil['tiny_kernel_us_in_graph']:.2f} us")
    rows = []
    print(f"{'layout':6} {'B':>5} {'group':10} {'us':>8} {'roof us':>8} {'ratio':>6}")
    for b in [int(s) for s in args.batches.split(",")]:
        for layout in ("tp", "ep"):
            try:
                r = measure(layout, b, args.context, ceil)
            except RuntimeError as e:
                print(f"{layout:6} {b:5} failed: {str(e).splitlines()[0]}", flush=True)
                torch.cuda.empty_cache()
                continue
            rows.append(r)
            for g in ("attention", "router", "expert_ffn"):
                m = r[g]
                print(f"{layout:6} {b:5} {g:10} {m['us']:8.1f} {m['roofline_us']:8.1f} "
                      f"{m['us'] / max(m['roofline_us'], 1e-9):6.2f}")
            print(f"{layout:6} {b:5} {'layer':10} {r['layer_us']:8.1f} "
                  f"(groups {r['sum_of_groups_us']:.1f})", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": dev.name, "torch": torch.__version__, "ceilings": ceil,
                       "expert_gemm": GROUPED_MM["kernel"],
                       "context": args.context, "layers": rows}, f, indent=1)


if __name__ == "__main__":
    main()

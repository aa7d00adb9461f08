#!/usr/bin/env python3
# tools/bench_peer.py — the peer figures torc-bench --peer compares against: PyTorch (and numpy's
# OpenBLAS for f32 matmul) timed the way torc-bench times torc, printed as one flat JSON object.
"""Times PyTorch the way torc-bench times torc and prints one JSON object.

Each figure is the median of timed runs after warm-up, as the course's time_matmul:
  matmul_f32_<n>_gflops          torch.mm on n x n f32 for each n of --sizes;
                                 numpy_matmul_f32_<n>_gflops the same through numpy's BLAS
                                 (when numpy is installed)
  matmul_bf16_<n>_gflops         torch.mm on n x n bf16, n the largest of --sizes
  add_4x4_us                     x + y on 4x4 f32 tensors, per call
  tiny_fwd_bwd_us                relu(x @ w).sum().backward() on 4x4, per iteration
  cruncher_<D>_<L>_<B>_<opt>_<dtype>_ms
                                 one training step of the course's Cruncher (L Linear(D, D)
                                 without bias, then Linear(D, 1), squeeze; MSE loss): zero_grad,
                                 forward, backward, step; dtype f32, or bf16 under
                                 torch.autocast (bf16 matmuls, f32 master weights)
Usage: bench_peer.py [--quick] [--sizes N,N,...] [--threads N] [--cpu-time]
--cpu-time times by the process's CPU time over --threads instead of wall time (torc-bench
--cpu-time: for a machine shared with other work).

With --gpt L,NH,C,V,T,B (torc-bench --gpt) it times only the GPT training step of core/gpt.c's
eager twin instead (nanoGPT's model: F.scaled_dot_product_attention with is_causal, tanh GELU,
the LM head tied to wte, the vocabulary padded to a multiple of 128 and the logits cut to V;
AdamW lr 1e-3, betas (0.9, 0.95), weight decay 0.1 on the 2-D parameters, fused=False and
foreach left to PyTorch; clip_grad_norm_(1.0); zero_grad(set_to_none=True)), in f32 and / or
under bf16 autocast (--gpt-dtypes; one model each, their timed steps taking turns), and prints
  gpt_<dtype>_step_ms            median of --gpt-steps timed steps after --gpt-warmup (each:
  gpt_<dtype>_step_min_ms        forward, loss.item(), backward, clip, step, zero_grad); fastest
  rss_base_kb                    resident memory after importing torch and setting threads
  rss_peak_<dtype>_kb            the process's peak (ru_maxrss) after the first dtype's warm-up,
                                 before the second model exists
--gpt-profile also prints torch.profiler's table of one step of the first dtype to stderr.
"""
import argparse
import json
import os
import statistics
import sys
import time


clock = time.perf_counter


def median_time(fn, warmup, reps, min_total=0.0):
    for _ in range(warmup):
        fn()
    times = []
    total = 0.0
    while len(times) < reps or (total < min_total and len(times) < 10 * reps):
        t0 = clock()
        fn()
        dt = clock() - t0
        times.append(dt)
        total += dt
    return statistics.median(times)


def per_call(fn, calls, batches):
    """Median over batches of the time of one call (for microsecond-scale work)."""
    def batch():
        for _ in range(calls):
            fn()
    return median_time(batch, 1, batches) / calls


def rss_kb():
    """Resident memory now, in KiB (Linux's /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def gpt_bench(torch, args):
    """The GPT training step of core/gpt.c's twin; see the module's docstring."""
    import resource
    import torch.nn as nn
    import torch.nn.functional as F
    L, NH, C, V, T, B = (int(v) for v in args.gpt.split(","))
    Vp = (V + 127) // 128 * 128
    base = rss_kb()

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.c_attn = nn.Linear(C, 3 * C)
            self.attn_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            Bx, Tx, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(Bx, Tx, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(Bx, Tx, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(Vp, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, Vp, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            for m in self.modules():  # GPT-2's init, as torc_gpt_new draws it
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)
            for b in self.h:
                for p in (b.attn_proj.weight, b.mlp_proj.weight):
                    nn.init.normal_(p, 0.0, 0.02 / (2 * L) ** 0.5)
            with torch.no_grad():
                self.wte.weight[V:] = 0

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.h:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))[..., :V]
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    def make(dname):
        torch.manual_seed(0)
        model = GPT()
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), fused=False)

        def step():
            if dname == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(idx, tgt)
            else:
                loss = model(idx, tgt)
            loss.item()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))
    dnames = args.gpt_dtypes.split(",")
    steps, res = [], {"rss_base_kb": base}
    for i, dname in enumerate(dnames):
        steps.append(make(dname))
        for _ in range(args.gpt_warmup):
            steps[-1]()
        if i == 0:  # the first model's peak, before a second one exists
            res[f"rss_peak_{dname}_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = [[] for _ in dnames]
    for _ in range(args.gpt_steps):  # the dtypes' steps taking turns
        for i, step in enumerate(steps):
            t0 = clock()
            step()
            times[i].append(clock() - t0)
    for dname, t in zip(dnames, times):
        res[f"gpt_{dname}_step_ms"] = statistics.median(t) * 1e3
        res[f"gpt_{dname}_step_min_ms"] = min(t) * 1e3
    step = steps[0]
    if args.gpt_profile:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            step()
        sys.stderr.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40) + "\n")
        sys.stderr.write(prof.key_averages(group_by_input_shape=True).table(
            sort_by="self_cpu_time_total", row_limit=30) + "\n")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--full", action="store_true", help="the default repetitions")
    ap.add_argument("--sizes", default="2048", help="f32 matmul sizes (default 2048)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own)")
    ap.add_argument("--cpu-time", action="store_true", help="time by CPU time over --threads")
    ap.add_argument("--gpt", default="", help="L,NH,C,V,T,B: time only the GPT training step")
    ap.add_argument("--gpt-dtypes", default="f32,bf16", help="f32 and / or bf16 (autocast), comma-separated")
    ap.add_argument("--gpt-steps", type=int, default=5, help="timed GPT steps")
    ap.add_argument("--gpt-warmup", type=int, default=2, help="GPT warm-up steps")
    ap.add_argument("--gpt-profile", action="store_true", help="torch.profiler's table of one step (stderr)")
    args = ap.parse_args()
    if args.threads > 0:
        # numpy's BLAS on the same threads as torch and torc (torch imports numpy, so before it): with
        # its default (every CPU) and --cpu-time, the other threads' CPU time is only brought up to
        # date at scheduler ticks, and a 2 ms 512^3 product read 150-175 GFLOP/s on one Zen 4 core
        # whose FMA loop peaks at 117.
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    import torch

    global clock
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.cpu_time:
        nthreads = args.threads if args.threads > 0 else torch.get_num_threads()
        clock = lambda: time.process_time() / nthreads
    out = {"torch_version": torch.__version__, "torch_threads": torch.get_num_threads()}
    if args.gpt:
        out.update(gpt_bench(torch, args))
        json.dump(out, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    reps = 3 if args.quick else 7
    sizes = [int(v) for v in args.sizes.split(",") if v]

    # ---- matmul ----
    def mm_gflops(n, dt):
        a = torch.randn(n, n, dtype=dt)
        b = torch.randn(n, n, dtype=dt)
        return 2.0 * n ** 3 / median_time(lambda: torch.mm(a, b), 2, reps) / 1e9
    for n in sizes:
        out[f"matmul_f32_{n}_gflops"] = mm_gflops(n, torch.float32)
    out[f"matmul_bf16_{max(sizes)}_gflops"] = mm_gflops(max(sizes), torch.bfloat16)
    try:
        import numpy as np
        for n in sizes:
            a = np.random.standard_normal((n, n)).astype(np.float32)
            b = np.random.standard_normal((n, n)).astype(np.float32)
            t = median_time(lambda: a @ b, 2, reps)
            out[f"numpy_matmul_f32_{n}_gflops"] = 2.0 * n ** 3 / t / 1e9
        out["numpy_version"] = np.__version__
    except ImportError:
        pass

    # ---- dispatch overhead ----
    x = torch.randn(4, 4)
    y = torch.randn(4, 4)
    out["add_4x4_us"] = per_call(lambda: x + y, 2000 if args.quick else 10000, 5) * 1e6
    w = torch.randn(4, 4, requires_grad=True)

    def tiny():
        loss = torch.relu(x @ w).sum()
        loss.backward()
        w.grad = None
    out["tiny_fwd_bwd_us"] = per_call(tiny, 200 if args.quick else 1000, 5) * 1e6

    # ---- Cruncher training steps ----
    configs = [(1024, 4, 512), (256, 2, 64)]
    for (D, L, B) in configs:
        for opt_name in ("sgd", "adam"):
            for dname in ("f32", "bf16"):
                torch.manual_seed(0)
                layers = [torch.nn.Linear(D, D, bias=False) for _ in range(L)]
                model = torch.nn.Sequential(*layers, torch.nn.Linear(D, 1, bias=False))
                xb = torch.randn(B, D)
                tb = torch.randn(B)
                opt = (torch.optim.SGD(model.parameters(), lr=1e-3) if opt_name == "sgd"
                       else torch.optim.Adam(model.parameters(), lr=1e-3))

                def step():
                    opt.zero_grad(set_to_none=True)
                    if dname == "bf16":
                        with torch.autocast("cpu", dtype=torch.bfloat16):
                            pred = model(xb).squeeze(-1)
                        loss = torch.nn.functional.mse_loss(pred.float(), tb)
                    else:
                        loss = torch.nn.functional.mse_loss(model(xb).squeeze(-1), tb)
                    loss.backward()
                    opt.step()
                t = median_time(step, 3, reps if D >= 1024 else 4 * reps)
                out[f"cruncher_{D}_{L}_{B}_{opt_name}_{dname}_ms"] = t * 1e3

    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

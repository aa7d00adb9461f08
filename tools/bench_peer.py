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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--full", action="store_true", help="the default repetitions")
    ap.add_argument("--sizes", default="2048", help="f32 matmul sizes (default 2048)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own)")
    ap.add_argument("--cpu-time", action="store_true", help="time by CPU time over --threads")
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

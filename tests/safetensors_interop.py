#!/usr/bin/env python3
# tests/safetensors_interop.py — torc checkpoints and Python's safetensors package (numpy
# backend) read each other's files. Needs numpy and safetensors (tools/install-deps.sh); a
# missing package is a failure, not a skip.
"""usage: safetensors_interop.py CKPT_INTEROP_BINARY WORKDIR"""
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # CI installs them: a missing package must fail the test
    sys.exit(f"safetensors_interop: {e} (run tools/install-deps.sh)")

tool, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)

# 1. torc writes a checkpoint; safetensors (numpy) reads the weights and the metadata.
path = os.path.join(work, "torc.safetensors")
subprocess.run([tool, "write", path], check=True)
t = load_file(path)
expect = {
    # after one SGD step (lr 0.1, gradient 1): w - 0.1 in float32
    "layers.0.weight": (np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1) - np.float32(0.1),
    "final.weight": np.array([[1.0], [-2.0], [3.5]], dtype=np.float32),
    "counts": np.array([[1, -2], [3, -4]], dtype=np.int64),
    "half": np.array([0.5, -1.5, 65504], dtype=np.float16),
    "mask": np.array([True, False, True, True]),
    "scalar": np.array(3.25, dtype=np.float64),
}
for name, want in expect.items():
    got = t[name]
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got, want), f"{name}: {got} != {want}"
# The optimizer's state rides along: SGD momentum buffer after one step is the gradient (ones).
assert np.array_equal(t["optimizer.state.0.momentum_buffer"], np.ones((3, 4), np.float32))
with safe_open(path, framework="np") as f:
    meta = f.metadata()
assert meta["torc.format"] == "torc-checkpoint/1", meta
assert meta["step"] == "7" and meta["generator.seed"] == "1234", meta
assert meta["optimizer.name"] == "sgd" and meta["optimizer.param_groups.0.momentum"] == "0.90000000000000002", meta
print(f"safetensors {__import__('safetensors').__version__} read torc's checkpoint: {len(t)} tensors, {len(meta)} metadata")

# 2. safetensors writes a file; torc reads it (the C tool checks every value).
path = os.path.join(work, "python.safetensors")
save_file({
    "weight": np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32) * 0.25,
    "ids": np.array([0, -1, 2**40, 7], dtype=np.int64),
    "flags": np.array([True, False, True]),
    "h": np.array([1.5, -2.0], dtype=np.float16),
    "d": np.array(2.5, dtype=np.float64),
    "u": np.array([0, 255], dtype=np.uint8),
    "i32": np.array([[-7, 2**31 - 1]], dtype=np.int32),
    "empty": np.zeros((0, 3), dtype=np.float32),
    # PyTorch 2.3+ writes these; torc loads them as int32 / int64 with the same values
    "u16": np.array([0, 40000, 65535], dtype=np.uint16),
    "u32": np.array([[0, 3000000000, 2**32 - 1]], dtype=np.uint32),
    "u64": np.array([5, 2**63 - 1], dtype=np.uint64),
}, path, metadata={"who": "python", "note": "\u00fcnic\u00f6de \"quoted\" back\\slash"})
subprocess.run([tool, "read", path], check=True)
# A uint64 value past int64's range is refused, naming the tensor.
save_file({"big": np.array([1, 2**63], dtype=np.uint64)}, path)
r = subprocess.run([tool, "read", path], capture_output=True, text=True)
assert r.returncode != 0 and "tensor 'big' holds the uint64 value 9223372036854775808" in r.stderr, r.stderr

# 3. Python loads torc's checkpoint and saves it again unchanged with the same metadata: the
#    header's keys and the data come out in another order, and torc resumes from it.
src = os.path.join(work, "torc.safetensors")
with safe_open(src, framework="np") as f:
    meta = f.metadata()
resaved = os.path.join(work, "resaved.safetensors")
save_file(load_file(src), resaved, metadata=meta)
assert open(resaved, "rb").read() != open(src, "rb").read(), "the re-saved file is byte-identical: nothing tested"
subprocess.run([tool, "resume", resaved], check=True)

# 4. Changed values under the old checksum are refused with a way out; without the checksum
#    entry the edited file loads.
edited = load_file(src)
edited["scalar"] = np.array(4.0, dtype=np.float64)
save_file(edited, resaved, metadata=meta)
r = subprocess.run([tool, "resume", resaved], capture_output=True, text=True)
assert r.returncode != 0, "an edited checkpoint resumed under its old checksum"
assert "remove the 'torc.content_crc32' entry from its metadata" in r.stderr, r.stderr
save_file(edited, resaved, metadata={k: v for k, v in meta.items() if k != "torc.content_crc32"})
subprocess.run([tool, "resume", resaved], check=True)
print("torc resumed from a checkpoint Python re-saved, and refused an edited one with its checksum")

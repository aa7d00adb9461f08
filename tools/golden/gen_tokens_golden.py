#!/usr/bin/env python3
# tools/golden/gen_tokens_golden.py — writes tests/golden/tokens_*: token files made by NumPy, the
# way the ecosystem makes them, which tests/test_tokens.c reads with torc_tokens_open.
"""Token files written by NumPy for tests/test_tokens.c (numpy_files_agree). The suite reads only
the committed files; it never needs numpy.

Rerun (from the repository root; needs numpy):

    python3 tools/golden/gen_tokens_golden.py            # writes tests/golden/tokens_*
    python3 tools/golden/gen_tokens_golden.py --out DIR  # somewhere else (to diff)

Every file holds the tokens t[i] = (i * 7919) % M for i < N, with M = 50257 (GPT-2's vocabulary)
for uint16 files and M = 128256 (llama-3's) for 32- and 64-bit ones, N = 300:

    tokens_llmc.bin        llm.c shard as llm.c's dev/data/data_common.py write_datafile writes it:
                           256 int32 header (20240520, 1, N), then uint16 tokens
    tokens_llama3.bin      the same with llm.c's llama-3 header (20240801, 7, N) and uint32 tokens
    tokens_nanogpt.bin     nanoGPT's prepare.py: np.array(ids, dtype=np.uint16).tofile(...)
    tokens_u2.npy          np.save of uint16 (.npy format 1.0)
    tokens_i4.npy          np.save of int32
    tokens_i8_v2.npy       np.lib.format.write_array of int64 in format 2.0
"""
import argparse
import os

import numpy as np

N = 300


def tokens(m):
    return (np.arange(N, dtype=np.int64) * 7919) % m


def write_datafile(path, toks, magic, version, dtype):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = magic, version, len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype=dtype).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    write_datafile(p("tokens_llmc.bin"), tokens(50257), 20240520, 1, np.uint16)
    write_datafile(p("tokens_llama3.bin"), tokens(128256), 20240801, 7, np.uint32)
    tokens(50257).astype(np.uint16).tofile(p("tokens_nanogpt.bin"))
    np.save(p("tokens_u2.npy"), tokens(50257).astype(np.uint16))
    np.save(p("tokens_i4.npy"), tokens(128256).astype(np.int32))
    with open(p("tokens_i8_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, tokens(128256).astype(np.int64), version=(2, 0))


if __name__ == "__main__":
    main()

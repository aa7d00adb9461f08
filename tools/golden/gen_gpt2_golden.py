#!/usr/bin/env python3
# tools/golden/gen_gpt2_golden.py — writes tests/golden/gpt2_tiny.safetensors (a small random
# Hugging Face GPT2LMHeadModel, saved by save_pretrained) and tests/golden/gpt2_tiny_ref.safetensors
# (what PyTorch computes with it), read by tests/test_gpt.c, which never needs torch.
"""Also gpt2_tiny_llmc.bin: the same weights in llm.c's model file (version 3), written as llm.c's
train_gpt2.py writes it (Linear weights (out, in), wte padded to 128 rows).

Rerun (from the repository root; needs torch and transformers, takes a few seconds):

    python3 tools/golden/gen_gpt2_golden.py               # writes the two files under tests/golden/
    python3 tools/golden/gen_gpt2_golden.py --out DIR     # somewhere else (to diff)

The model: GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4,
activation_function="gelu_new", every dropout 0), eager attention, float32, initialised by
transformers from seed 0; then every bias and LayerNorm parameter is moved off its init (0 / 1) by
N(0, 0.1) noise so that a test notices one that is ignored. torc pads the vocab to 128.

gpt2_tiny_ref.safetensors holds (int tensors as int32):
  x, y              (2, 32) a batch and its targets (y[1, -4:] = -100, ignored)
  logits            (2, 32, 96) the model's logits for x
  loss              () mean cross-entropy of logits against y (ignore_index -100)
  grad.<name>       the gradient of loss for every parameter under its GPT2LMHeadModel name
                    (transformer.wte.weight holds the tied head's share too)
  train_x, train_y  (50, 4, 32) the batches of 50 training steps (in order through a text)
  train_loss        (50,) the loss of each step before its update, float64
  train_norm        (50,) the total gradient norm clip_grad_norm_ returned
  train_lr          (50,) the learning rate of each step
  train_loss_bf16   (50,) the same 50 steps under torch.autocast("cpu", torch.bfloat16)
The training: AdamW(betas=(0.9, 0.95), eps=1e-8, foreach=False), weight decay 0.1 on the
parameters of 2 or more dims only (nanoGPT's groups), lr = nanoGPT's get_lr(step) with max 3e-3,
min 3e-4, 5 warmup steps, decay to step 50, clip_grad_norm_(1.0) before each step, fresh from the
saved weights. The metadata names the torch and transformers versions.
"""
import argparse
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

TEXT = (b"torc is a tensor and autograd framework in C11 with PyTorch's semantics, ggml's lightness and "
        b"a plugin ABI: compute backends, optimizers and communication engines are shared objects loaded "
        b"with dlopen through versioned vtables, so any of them can be added without rebuilding the core. "
        b"It is for people who want to train and measure small models from C with PyTorch's answers. ")

V, T, B, STEPS = 96, 32, 4, 50
MAX_LR, MIN_LR, WARMUP, WD, CLIP = 3e-3, 3e-4, 5, 0.1, 1.0


def get_lr(it):  # nanoGPT's train.py get_lr with lr_decay_iters = STEPS (torc_lr_cosine_warmup)
    if it < WARMUP:
        return MAX_LR * (it + 1) / (WARMUP + 1)
    if it > STEPS:
        return MIN_LR
    ratio = (it - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (MAX_LR - MIN_LR)


def make_model(outdir):
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4, activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(outdir, safe_serialization=True)  # writes model.safetensors (+ config.json)
    os.replace(os.path.join(outdir, "model.safetensors"), os.path.join(outdir, "gpt2_tiny.safetensors"))
    os.remove(os.path.join(outdir, "config.json"))
    gc = os.path.join(outdir, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    return model


def write_llmc(model, path):
    """llm.c's model file (train_gpt2.py's write_model, version 3 = float32) of the same weights: the
    Conv1D weights (in, out) transposed to llm.c's (out, in), wte padded to 128 rows of zeros."""
    sd, L = model.state_dict(), model.config.n_layer
    header = torch.zeros(256, dtype=torch.int32)
    header[:8] = torch.tensor([20240326, 3, T, V, L, model.config.n_head, model.config.n_embd, 128])
    wte = torch.zeros(128, model.config.n_embd)
    wte[:V] = sd["transformer.wte.weight"]
    parts = [wte, sd["transformer.wpe.weight"]]
    for kind in ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                 "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                 "mlp.c_proj.weight", "mlp.c_proj.bias"]:
        ts = [sd["transformer.h.%d.%s" % (i, kind)] for i in range(L)]
        parts.append(torch.stack([t.t() if t.dim() == 2 else t for t in ts]))
    parts += [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(header.numpy().tobytes())
        for t in parts:
            f.write(t.detach().float().contiguous().numpy().tobytes())


def loss_of(model, x, y):
    logits = model(x).logits
    return logits, F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1), ignore_index=-100)


def train(model, xs, ys, autocast):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=MAX_LR, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    losses, norms, lrs = [], [], []
    for step in range(STEPS):
        lr = get_lr(step)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            _, loss = loss_of(model, xs[step], ys[step])
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP, foreach=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item()), norms.append(norm.item()), lrs.append(lr)
    return losses, norms, lrs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    model = make_model(out)
    model.config._attn_implementation = "eager"
    write_llmc(model, os.path.join(out, "gpt2_tiny_llmc.bin"))
    init = {k: v.clone() for k, v in model.state_dict().items()}

    data = torch.tensor([max(0, min(V - 1, c - 32)) for c in TEXT * 40], dtype=torch.int64)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, V, (2, T), generator=g)
    y = torch.randint(0, V, (2, T), generator=g)
    y[1, -4:] = -100
    logits, loss = loss_of(model, x, y)
    loss.backward()
    ref = {"x": x.int(), "y": y.int(), "logits": logits.detach().contiguous(), "loss": loss.detach()}
    for name, p in model.named_parameters():
        ref["grad." + name] = p.grad.detach().clone()
    model.zero_grad(set_to_none=True)

    n = STEPS * B * (T + 1)
    rows = data[:n].view(STEPS, B, T + 1)
    xs, ys = rows[:, :, :T].contiguous(), rows[:, :, 1:].contiguous()
    losses, norms, lrs = train(model, xs, ys, False)
    model.load_state_dict(init)
    losses_bf16, _, _ = train(model, xs, ys, True)
    ref.update({"train_x": xs.int(), "train_y": ys.int(), "train_loss": torch.tensor(losses, dtype=torch.float64),
                "train_norm": torch.tensor(norms, dtype=torch.float64), "train_lr": torch.tensor(lrs, dtype=torch.float64),
                "train_loss_bf16": torch.tensor(losses_bf16, dtype=torch.float64)})
    import transformers
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out, "gpt2_tiny_ref.safetensors"),
              metadata={"torch": torch.__version__, "transformers": transformers.__version__})
    print("loss %.6f; trajectory %.4f -> %.4f (bf16 %.4f -> %.4f)" % (loss.item(), losses[0], losses[-1],
                                                                      losses_bf16[0], losses_bf16[-1]))


if __name__ == "__main__":
    main()

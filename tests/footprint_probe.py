"""The peak memory of two training steps of each GPT given, on the CPU: run by tests/test_sweep_packing.py in a
fresh process of its own (``python tests/footprint_probe.py '<json list of [model, batch, speed]>'``).

Peak = the growth of the resident set's high-water mark (/proc/self/status VmHWM, reset through clear_refs)
over the resident set before the model is built. glibc's mmap threshold is fixed at its starting value, so
every large tensor is mapped on allocation and unmapped on free, and a shape's peak is not hidden in memory an
earlier shape left in the heap. The first job runs once before anything is measured: it pays the process's
first-time costs (lazy imports, thread pools), which are not a job's footprint (on CUDA the footprint's context
term covers them). The step is what training computes: the trunk with the speed switches applied, the chunked
loss, backward, fused AdamW. Linux only.
"""

import ctypes
import json
import sys
from pathlib import Path

import torch

from tinygpt.model import build_model
from tinygpt.model.kernels import linear_cross_entropy
from tinygpt.model.speed import SpeedConfig

libc = ctypes.CDLL(None)
libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD fixed: large tensors are mmapped and unmapped on free
libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD


def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024


def peak(model, batch, speed):
    torch.manual_seed(0)
    x = torch.randint(0, model["vocab_size"], (batch, model["context_length"]))
    libc.malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    before = status("VmRSS")
    net = build_model(model, SpeedConfig(**speed))
    opt = torch.optim.AdamW(net.parameters(), fused=True)
    for _ in range(2):
        hidden, aux = net.features(x)
        loss = linear_cross_entropy(hidden, net.head_weight, x, None, bias=net.head_bias)
        (loss + aux).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    result = status("VmHWM") - before
    del net, opt, loss, aux, hidden
    return result


jobs = json.loads(sys.argv[1])
peak(*jobs[0])  # first-time costs of the process (lazy imports, thread pools), paid before measuring
print(json.dumps([peak(*job) for job in jobs[1:]]))

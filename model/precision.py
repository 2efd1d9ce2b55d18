"""Which precision the matrix products run in: float32, or bfloat16 where the hardware has it.

bfloat16 keeps float32's exponent range with an 8-bit mantissa, so it needs no loss scaling. It
pays only where the chip multiplies it natively: on CUDA GPUs of compute capability 8 and up, and
on x86 CPUs with AVX512-BF16 or AMX (measured on one such CPU: the model's GEMMs 1.5-3.8x faster).
A CPU without them emulates it, and there bfloat16 is *slower* (4x on an AVX512 CPU without BF16:
`docs/log.md`), so "auto" never picks it there.

Only the products change: parameters and optimizer state stay float32 (autocast casts a copy of the
weights per product), losses are taken in float32 (`model/outputs.py`), and softmax statistics are
accumulated in float32 (PyTorch's fused attention does so; the weights path of
`scaled_dot_product_attention` casts up).
"""

import contextlib

import torch

PRECISIONS = ("auto", "fp32", "bf16")


def bf16_native(device: str) -> bool:
    """Whether `device` multiplies bfloat16 in hardware (faster than float32)."""
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def resolve_precision(name: str, device: str) -> str:
    """"auto" | "fp32" | "bf16" -> "fp32" or "bf16"; "auto" is bf16 where the device has it natively.
    An explicit "bf16" is honoured anywhere (it is correct, only slower without the hardware)."""
    choice = str(name).strip().lower()
    if choice not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {name!r}")
    if choice == "auto":
        return "bf16" if bf16_native(device) else "fp32"
    return choice


def autocast(device: str, precision: str) -> contextlib.AbstractContextManager:
    """The context the forward pass runs in: bfloat16 autocast for "bf16", nothing for "fp32"."""
    device_type = torch.device(device).type
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bf16")

"""Which device to run on: one answer for training and the app."""

import re

import torch


def resolve_device(name: str = "auto") -> str:
    """"auto" | "cpu" | "cuda" | "cuda:N" -> the device string to use; "auto" is CUDA when present.
    A CUDA answer also keeps fused attention off cuDNN's kernel (`shape_agnostic_attention`).

    CUDA asked for and missing is a `ValueError` that says so, raised here rather than as a
    driver error at the first tensor moved (a caller that prefers to fall back to the CPU checks
    `torch.cuda.is_available()` first, as the app does).
    """
    choice = str(name).strip().lower()
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return choice
    match = re.fullmatch(r"cuda(?::(\d+))?", choice)
    if match is None:
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, not {name!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {choice}: no CUDA device is available (torch {torch.__version__}, "
                         f"built with CUDA {torch.version.cuda or 'none'})")
    count = torch.cuda.device_count()
    if match.group(1) is not None and int(match.group(1)) >= count:
        raise ValueError(f"device {choice}: there {'is' if count == 1 else 'are'} only {count} CUDA "
                         f"device{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1})")
    shape_agnostic_attention()
    return choice


def shape_agnostic_attention() -> None:
    """Keep `F.scaled_dot_product_attention` (`model.fused_attention`) off cuDNN's attention kernel,
    for this process: it builds an execution plan on the CPU for every new (batch, length) shape,
    ~16 ms a call, and length-bucketed training batches and the app's requests change shape at
    nearly every call. Measured on one H100 (PyTorch 2.11), the shipped classifier's fine-tuning
    step took 305 ms with it, the GPU 7% busy, and 34.5 ms on the flash and memory-efficient kernels,
    which need no plan; the full 1,900-step run fell from 341 s of training to 55 s
    (docs/experiments/sentiment-backward-2026-11-27)."""
    torch.backends.cuda.enable_cudnn_sdp(False)

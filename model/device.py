"""Which device to run on: one answer for training and the app."""

import re

import torch


def resolve_device(name: str = "auto") -> str:
    """"auto" | "cpu" | "cuda" | "cuda:N" -> the device string to use; "auto" is CUDA when present.

    CUDA asked for and missing is a `ValueError` that says so, raised here rather than as a
    driver error at the first tensor moved (a caller that prefers to fall back to the CPU checks
    `torch.cuda.is_available()` first, as the app does).
    """
    choice = str(name).strip().lower()
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
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
    return choice

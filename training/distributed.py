"""Several processes training one model (torchrun: DistributedDataParallel): the process group, the
collectives the loop agrees through, and the check that every rank holds the same weights.

Every collective runs on the training device (NCCL has no CPU tensors), and what one rank decides
(stop for time, stop for a signal, a re-fitted count) all do, at the same step (`agreed`).
"""

import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> DistInfo:
    """Set up a torchrun process group (NCCL on GPUs, gloo on CPU) when WORLD_SIZE > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return info


def _wait_released(*tensors: torch.Tensor) -> None:
    """Return once gloo's worker thread has let go of the tensors of a collective that has completed.

    The worker drops its reference a moment after the collective returns, and dropping a tensor
    that Python also holds takes the GIL. If the process is shutting down by then (the collective
    was a rank's last), the worker cannot take it and the process aborts with "terminate called
    without an active exception" (pytorch/pytorch#190489): a rank that did its work exits with
    SIGABRT. Waiting here, with the GIL released, lets the worker finish first. Only gloo is
    waited for: NCCL's references go from its watchdog thread on its own schedule, and waiting
    for that at every step would cost more than it guards (and no GPU here could test it)."""
    if dist.get_backend() != dist.Backend.GLOO:
        return
    deadline = time.monotonic() + 1.0  # a gloo that kept them longer brings back the race, not a hang
    while any(t._use_count() > 1 for t in tensors) and time.monotonic() < deadline:  # 1: the caller's own
        time.sleep(0)  # releases the GIL


def weights_in_sync(model: torch.nn.Module, info: DistInfo) -> bool:
    """True when every rank holds bit-identical weights (what DDP promises). Gathered on the
    weights' own device: NCCL cannot gather CPU tensors."""
    if info.world_size == 1:
        return True
    flat = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(info.world_size)]
    dist.all_gather(gathered, flat)
    _wait_released(flat, *gathered)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def agreed(code: int, device: str, info: DistInfo) -> int:
    """The largest of every rank's `code` (an all-reduce MAX on `device`), on every rank: what one rank
    decides (stop for time, stop for a signal), all do, at the same step."""
    if info.world_size == 1:
        return code
    t = torch.tensor([float(code)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    _wait_released(t)
    return int(t.item())

"""The learning rate as a pure function of the step: warmup + cosine decay (the default), ULMFiT's slanted
triangular rate (`stlr`) and warmup-stable-decay (`wsd`), the choices of `Recipe.schedule`
(`recipe.SCHEDULES`), all in one place so that the loop, the time budget (`training.budget`: where a wsd
decay starts decides how long a count can still be re-fitted) and the tests read the same formulas.

Each schedule needs the run's last step, `max_steps`, before its decay starts: a run sized to its time
budget fixes it before its first step (and under wsd may re-fit it until the decay starts).
"""

import math

from .training_args import TrainConfig

STLR_RATIO = 32  # ULMFiT's slanted triangular schedule starts and ends at lr / 32


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then cosine decay to `lr * min_lr_ratio` at `max_steps`; or the recipe's
    slanted triangular schedule (`stlr`), whose climb is the warmup; or its warmup-stable-decay (`wsd`),
    which holds `lr` until the last `decay_fraction` of the steps."""
    if cfg.recipe.schedule == "stlr":
        return stlr(step, cfg.lr, cfg.warmup_steps, cfg.max_steps)
    if cfg.recipe.schedule == "wsd":
        return wsd(step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.recipe.decay_fraction, cfg.min_lr_ratio)
    return cosine(step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.min_lr_ratio)


def cosine(step: int, peak: float, warmup: int, total: int, floor: float) -> float:
    """Linear warmup to `peak` over `warmup` steps, then cosine decay to peak x floor at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def stlr(step: int, peak: float, cut: int, total: int) -> float:
    """ULMFiT's slanted triangular learning rate at `step` (0-based): climbs linearly over `cut` steps
    from peak / STLR_RATIO to `peak`, then falls linearly to peak / STLR_RATIO at `total`."""
    p = step / cut if step < cut else 1 - (step - cut) / max(1, total - cut)
    return peak * (1 + max(0.0, p) * (STLR_RATIO - 1)) / STLR_RATIO


def wsd_decay_start(warmup: int, total: int, fraction: float) -> int:
    """The first step of a warmup-stable-decay schedule's decay: `fraction` of `total` steps (at least
    one) before the end, never inside the warmup."""
    return max(warmup, total - max(1, round(fraction * total)))


def wsd(step: int, peak: float, warmup: int, total: int, fraction: float, floor: float) -> float:
    """The warmup-stable-decay learning rate at `step` (0-based): peak x (step + 1) / warmup during
    the warmup (as the cosine schedule's), then `peak` until `wsd_decay_start`, then Hägele et al.'s
    (1 - sqrt) cooldown to peak x floor at `total`: peak x (floor + (1 - floor)(1 - sqrt(p))), p the
    decay's progress from 0 at its first step to 1 at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    start = wsd_decay_start(warmup, total, fraction)
    if step < start:
        return peak
    progress = min(1.0, (step - start) / max(1, total - start))
    return peak * (floor + (1 - floor) * (1 - math.sqrt(progress)))

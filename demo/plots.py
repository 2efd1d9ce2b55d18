"""Attention heatmaps with matplotlib.

Figures are built with the object-oriented API (`Figure`, no `pyplot`): pyplot keeps global
state that is not thread-safe, and the server renders plots for several visitors at once.
matplotlib is imported on first use, which keeps it off the start-up path.
"""

import functools
import logging
import math
import warnings

import numpy as np

from demo.attention import AttentionResult

MEAN = -1  # "head" value meaning the mean over heads


@functools.cache
def _mpl():
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import font_manager
    from matplotlib.figure import Figure

    # Tokens can be CJK, Hebrew, emoji...: prefer fonts with wide coverage when installed
    # (matplotlib falls back per glyph); missing glyphs draw as boxes, never an error.
    installed = {f.name for f in font_manager.fontManager.ttflist}
    wanted = ["DejaVu Sans", "Noto Sans", "Noto Sans CJK JP", "Noto Sans Hebrew", "Noto Color Emoji"]
    matplotlib.rcParams["font.family"] = [f for f in wanted if f in installed] or ["sans-serif"]
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    # a missing glyph draws as a box; not worth a warning on every request (the figure is saved
    # later, by Gradio, so a catch_warnings block here would not cover it)
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
    return Figure


def _escape(label: str) -> str:
    """Stop matplotlib's mathtext from reading a token such as "$5" as a formula."""
    return label.replace("$", r"\$")


def _masked(weights: np.ndarray, causal: bool) -> np.ma.MaskedArray:
    """Mask what the model could not look at, so it plots as blank rather than as 0: the future
    positions of causal self-attention (upper triangle, aligned to the end as in the model)."""
    t_q, t_k = weights.shape[-2:]
    if not causal:
        return np.ma.masked_array(weights, mask=np.zeros_like(weights, dtype=bool))
    future = np.triu(np.ones((t_q, t_k), dtype=bool), k=1 + (t_k - t_q))
    return np.ma.masked_array(weights, mask=np.broadcast_to(future, weights.shape))


def select_head(result: AttentionResult, head: object) -> tuple[np.ndarray, str]:
    """The (T_q, T_k) map of one head, or the mean over heads for `MEAN`/None/out of range."""
    try:
        h = int(head)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        h = MEAN
    if 0 <= h < result.n_heads:
        return result.weights[h], f"head {h + 1} of {result.n_heads}"
    return result.weights.mean(axis=0), f"mean of {result.n_heads} heads"


def heatmap(result: AttentionResult, head: object = MEAN):
    """One attention map: queries down the side, keys along the bottom, with a colour bar."""
    Figure = _mpl()
    weights, which = select_head(result, head)
    t_q, t_k = weights.shape
    cell = 0.28
    fig = Figure(figsize=(min(max(4.5, 1.8 + cell * t_k), 18), min(max(3.2, 1.5 + cell * t_q), 18)),
                 layout="constrained")
    ax = fig.add_subplot()
    cmap = _cmap()
    image = ax.imshow(_masked(weights, result.causal), cmap=cmap, norm=_norm(weights), aspect="auto",
                      interpolation="nearest")
    ax.set_xticks(range(t_k), [_escape(t) for t in result.key_tokens], rotation=90, fontsize=8)
    ax.set_yticks(range(t_q), [_escape(t) for t in result.query_tokens], fontsize=8)
    ax.set_xlabel("attended to (keys)")
    ax.set_ylabel("attending (queries)")
    ax.set_title(f"{result.title}, layer {result.layer + 1}, {which}", fontsize=10)
    fig.colorbar(image, ax=ax, label="attention weight", shrink=0.9)
    return fig


def heads_grid(result: AttentionResult):
    """Small multiples: every head of the layer side by side, on one shared colour scale."""
    Figure = _mpl()
    n = result.n_heads
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(2.6 * cols + 0.8, 2.5 * rows + 0.5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    norm = _norm(result.weights)
    cmap = _cmap()
    image = None
    few = max(len(result.query_tokens), len(result.key_tokens)) <= 16  # labels only if readable
    for h, ax in enumerate(axes):
        if h >= n:
            ax.axis("off")
            continue
        image = ax.imshow(_masked(result.weights[h], result.causal), cmap=cmap, norm=norm, aspect="auto",
                          interpolation="nearest")
        ax.set_title(f"head {h + 1}", fontsize=9)
        if few:
            ax.set_xticks(range(len(result.key_tokens)), [_escape(t) for t in result.key_tokens],
                          rotation=90, fontsize=6)
            ax.set_yticks(range(len(result.query_tokens)), [_escape(t) for t in result.query_tokens], fontsize=6)
        else:
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(f"{result.title}: all heads of layer {result.layer + 1}", fontsize=10)
    fig.colorbar(image, ax=list(axes[:n]), label="attention weight", shrink=0.9)
    return fig


def _norm(weights: np.ndarray):
    """Square-root colour scale: a few large weights (the first token often takes all of its own
    row) would otherwise squash every other weight into the darkest colour."""
    from matplotlib.colors import PowerNorm

    return PowerNorm(gamma=0.5, vmin=0.0, vmax=max(float(weights.max()), 1e-6))


def _cmap():
    from matplotlib import colormaps

    return colormaps["viridis"].with_extremes(bad="white")  # masked cells (the causal triangle) are blank



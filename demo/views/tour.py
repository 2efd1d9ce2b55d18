"""The "How it works" tour's computation: one forward pass of a shipped model, one step per screen,
each step with the live values the model computed, the same values recomputed by hand, and the
source lines that computed them (no Gradio here; `demo.tabs.tour` shows it).

How a step's values are obtained, and why:
- *Captured*, never reimplemented: forward hooks on the model's own modules (`LM_MODULES`,
  `SENTIMENT_MODULES`) record what each module received and returned during the model's ordinary
  forward pass. The hooks record only the thread that set them (`recording`): the models are shared
  by every visitor, and another visitor's pass through the same modules must not land in this tour.
- *Recomputed by hand* in this module from the previous step's captured values (LayerNorm, Q/K/V,
  softmax(QKᵀ/√d_k + mask), GELU, the tied projection, the temperature, top-k/top-p), in float64,
  and compared with the captured value (`Check`). A mismatch is shown in the step, and the tests
  fail on it: what the tour teaches is what the model computes.
- *Source*: `CODE` maps each step to a function, class or method and a pattern of the lines inside
  it; `code_range` finds them with `inspect` and reads them from the file at run time, so a
  displayed line is always the line that ran. After a refactor of `model/`, re-point `CODE` (and the
  module paths in `LM_MODULES` / `SENTIMENT_MODULES`); `tests/test_tour.py` says which entry broke.
"""

import functools
import importlib
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from classifier import Reader
from demo.serving import LM, SENTIMENT, Checkpoint, DemoError, DemoService, read_number, visitor_text
from demo.text import TOY_NOTE
from demo.views.sentiment import labels_and_candidates, read_source
from demo.views.tokens import EMPTY_TEXT
from demo.views.toy import toy_checkpoint
from inspection.logit_lens import residual_stream_points
from model.generation import GenerationConfig, sampling_distribution, select_token
from tokenization import read_texts, token_label, visible

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_TOUR_TOKENS = 32  # a longer text keeps its last tokens (LM) or its head and tail (review): heatmaps stay legible
PADDING = 2  # pad tokens added after a review, to show what the padding mask does
SAMPLING = GenerationConfig(temperature=0.8, top_k=40, top_p=0.95, seed=0)  # the chat's default settings
TOLERANCE = 1e-4  # |recomputed - captured| allowed, relative to the captured values' size (float32 passes)
TOP_TOKENS = 10  # the JSON's top_tokens


# -- where each step's source lives (re-point here after a refactor of model/) ------------------


@dataclass(frozen=True)
class CodeRef:
    """A function, class or method (dotted path) and, optionally, the lines of it to show: from the
    first line matching `start` to the first line from there matching `end` (regular expressions;
    `end` None: the start line alone; both None: the whole definition)."""

    target: str
    start: str | None = None
    end: str | None = None


CODE = {
    "tokens": CodeRef("tokenization.bpe.BPETokenizer.encode"),
    "source_tokens": CodeRef("tokenization.review.read_review", r"text = clean_text", r"return Review"),
    "embedding": CodeRef("model.embeddings.Embeddings.forward"),
    "position": CodeRef("model.embeddings.sinusoidal_table"),
    "source_embedding": CodeRef("model.encoder_decoder.EncoderDecoder.encode", r"x = self\.embed", r"self\.src_pos\("),
    "norm": CodeRef("model.layers.SublayerConnection.forward", r"if self\.norm_first",
                    r"sublayer\(self\.hook_in\(self\.norm\(x\)\)\)"),
    "qkv": CodeRef("model.attention.MultiHeadAttention.forward", r"q, k, v = self\.in_proj", r"_split_heads\(v\)"),
    "scores": CodeRef("model.attention.attention", r"scores = at\(\"scores\", q @ k\.transpose"),
    "scaling": CodeRef("model.attention.attention", r"/ math\.sqrt"),
    "mask": CodeRef("model.attention.attention", r"if mask is not None", r"masked_fill\(~mask"),
    "padding_mask": CodeRef("model.masks.padding_mask"),
    "softmax": CodeRef("model.attention.attention", r"weights = scores.*softmax"),
    "weighted_sum": CodeRef("model.attention.attention", r"return F\.dropout\(weights.*@ v"),
    "heads": CodeRef("model.attention.MultiHeadAttention.forward", r"out = self\.at\(\"heads\", out\)",
                     r"self\.out_proj\(out\)"),
    "residual": CodeRef("model.layers.SublayerConnection.forward", r"if self\.norm_first",
                        r"return self\.hook_resid\(x \+"),
    "ffn": CodeRef("model.layers.FeedForward", r"self\.w_1 = ", r"return self\.hook_out\(self\.w_2"),
    "stack": CodeRef("model.layers.Decoder.forward", r"for i, layer in enumerate", r"return self\.hook_norm\("),
    "memory": CodeRef("model.layers.Encoder.forward", r"for layer in self\.layers", r"return self\.hook_norm\("),
    "logits": CodeRef("model.embeddings.Embeddings.logits"),
    "probabilities": CodeRef("model.generation.sampling_distribution", r"return .*temperature"),
    "sampling": CodeRef("model.generation.filter_logits"),
    "decoder_input": CodeRef("model.encoder_decoder.EncoderDecoderConfig.decoder_input_ids"),
    "cross": CodeRef("model.attention.MultiHeadAttention.forward", r"else:  # cross-attention", r"k, v = F\.linear"),
    "label": CodeRef("model.encoder_decoder.EncoderDecoder.scored_candidates", r"logits, maps = self\.decode",
                     r"return \(log_probs"),
}

@dataclass(frozen=True)
class CodeRange:
    path: str  # relative to the repository
    first_line: int  # 1-based, inclusive
    last_line: int
    lines: tuple[str, ...]  # read from the file


def _resolve(target: str):
    """A dotted path -> the object: the longest importable module prefix, then attributes."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise LookupError(f"cannot import {target}")


@functools.cache
def code_range(key: str) -> CodeRange:
    """The source lines of step `key` (see `CODE`), read from the file; LookupError if `CODE[key]`
    no longer matches the code."""
    ref = CODE[key]
    obj = inspect.unwrap(_resolve(ref.target))
    lines, first = inspect.getsourcelines(obj)
    path = Path(inspect.getsourcefile(obj)).resolve()

    def find(pattern: str, start: int) -> int:
        for i in range(start, len(lines)):
            if re.search(pattern, lines[i]):
                return i
        raise LookupError(f"CODE[{key!r}]: no line of {ref.target} matches {pattern!r}")

    begin = find(ref.start, 0) if ref.start else 0
    end = (find(ref.end, begin) if ref.end else begin) if ref.start else len(lines) - 1
    text = path.read_text(encoding="utf-8").splitlines()
    return CodeRange(path.relative_to(REPO_ROOT).as_posix(), first + begin, first + end,
                     tuple(text[first + begin - 1: first + end]))


# -- capture: the model's own pass, read at its named points ---------------------------------------


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


@dataclass
class Pass:
    """What one forward pass computed, for the steps to show and recompute: `values` (float64 on CPU,
    batch dimension dropped) by name, the `modules` whose parameters the recomputation reads, and
    the token labels. The tests corrupt a value here to see a check fail."""

    model: str  # LM or SENTIMENT
    config: object
    ids: list[int]
    tokens: list[str]
    layer: int
    values: dict[str, torch.Tensor]
    modules: dict[str, torch.nn.Module]
    extra: dict = field(default_factory=dict)  # what else a track needs (the decoder's tokens, the labels, ...)


def _label(tok, i: int) -> str:
    return visible(token_label(tok, i), show_spaces=True)


def _heads_to_rows(x: torch.Tensor) -> torch.Tensor:
    """(H, T, d_k), one head after another -> (T, H·d_k), the heads side by side as the layer concatenates them."""
    return x.transpose(0, 1).flatten(1)


def lm_pass(ckpt: Checkpoint, text: str, layer: int) -> tuple[Pass, list[str]]:
    """The LM's forward pass over `[bos] + encode(text)` (the chat's reading), its last
    `MAX_TOUR_TOKENS` at most, read at `layer`'s named points and along the residual stream."""
    model, tok = ckpt.require()
    c = model.config
    if not c.norm_first:
        raise DemoError("The tour follows pre-norm models (LayerNorm before each sublayer), as the shipped ones are.")
    notices = []
    ids = tok.encode(text)
    keep = min(MAX_TOUR_TOKENS, c.block_size) - 1
    if len(ids) > keep:
        notices.append(f"Your text is {len(ids)} tokens: the tour reads its last {keep}, after the start token.")
        ids = ids[-keep:]
    ids = [tok.bos_id, *ids]
    at = f"decoder.{layer}"
    points = {"embedded": "decoder.embed", "positioned": "decoder.input", "norm_1": f"{at}.attn.in",
              "q": f"{at}.attn.q", "k": f"{at}.attn.k", "v": f"{at}.attn.v", "weights": f"{at}.attn.weights",
              "heads": f"{at}.attn.heads", "attention": f"{at}.attn.out", "norm_2_in": f"{at}.attn.resid",
              "norm_2": f"{at}.ffn.in", "ffn_hidden": f"{at}.ffn.hidden", "ffn": f"{at}.ffn.out",
              "final": "decoder.norm", "logits": "logits"}
    streams = residual_stream_points(model)
    x = torch.tensor([ids], device=ckpt.device)
    with torch.inference_mode():
        with model.hooks(read=[*points.values(), *streams]) as seen:  # this request's pass only
            model(x)
        next_logits = model.next_token_logits(x, None)  # the generation path: what the chat samples from
    values = {key: _f64(seen[name][0]) for key, name in points.items()}
    values["qkv"] = torch.cat([_heads_to_rows(values.pop(part)) for part in "qkv"], -1)  # (T, 3C), as in_proj writes
    values["heads_in"] = _heads_to_rows(values.pop("heads"))  # (T, C): what the output projection reads
    values["next_logits"] = _f64(next_logits[0])
    values["stream"] = torch.stack([_f64(seen[name][0]) for name in streams])  # (L+1, T, C)
    values["norm_1_in"] = values["stream"][layer]
    values["final_in"] = values["stream"][-1]
    owners = {"lookup": "logits", "norm_1": f"{at}.attn.in", "qkv": f"{at}.attn.q", "heads": f"{at}.attn.out",
              "norm_2": f"{at}.ffn.in", "ffn": f"{at}.ffn.out", "final_norm": "decoder.norm"}
    modules = {key: model.point_owner(name) for key, name in owners.items()}
    modules = {"lookup": modules["lookup"].lut, "norm_1": modules["norm_1"].norm, "qkv": modules["qkv"].in_proj,
               "heads": modules["heads"].out_proj, "norm_2": modules["norm_2"].norm, "ffn_1": modules["ffn"].w_1,
               "ffn_2": modules["ffn"].w_2, "final_norm": modules["final_norm"].norm}
    p = Pass(LM, c, ids, [_label(tok, i) for i in ids], layer, values, modules,
             {"is_causal": True, "mask": None, "tokenizer": tok})
    return p, notices


def sentiment_pass(ckpt: Checkpoint, text: str, layer: int) -> tuple[Pass, list[str]]:
    """The classifier's pass over the review (cut as training cut it, at most `MAX_TOUR_TOKENS`),
    with `PADDING` pad tokens after it as a batch would add them, and the label words scored by the
    decoder; also the same review classified without the padding (the padding must change nothing)."""
    model, tok = ckpt.require()
    c = model.config
    source = read_source(text, tok, c, "review", ckpt.device, min(MAX_TOUR_TOKENS, c.max_src_len) - PADDING)
    labels, candidates = labels_and_candidates(model, tok)
    ids = source.ids[0].tolist() + [c.pad_token_id] * PADDING
    real = torch.tensor([[1] * source.ids.size(1) + [0] * PADDING], device=ckpt.device)
    cross_layer = min(layer, c.n_decoder_layer - 1)
    at, cross = f"encoder.{layer}.attn", f"decoder.{cross_layer}.cross"
    points = {"source_positioned": "encoder.input", "qkv_in": f"{at}.in", "q": f"{at}.q", "k": f"{at}.k",
              "v": f"{at}.v", "weights": f"{at}.weights", "mask": f"{at}.mask",
              "memory_in": f"encoder.{c.n_encoder_layer - 1}.ffn.resid",
              "decoder_positioned": "decoder.input", "cross_query_in": f"{cross}.in",
              "cross_weights": f"{cross}.weights", "decoder_out": "decoder.norm"}
    with torch.inference_mode():
        with model.hooks(read=list(points.values())) as seen:  # this request's pass only
            memory, _ = model.encode(torch.tensor([ids], device=ckpt.device), real)
            log_probs = Reader(model).log_probs(memory, candidates, real)
        unpadded = Reader(model).read(source.ids, candidates=candidates)
    best = int(log_probs[0].argmax())
    decoder_ids = c.decoder_input_ids(candidates[best])
    t = len(decoder_ids)  # the decoder pass padded every candidate to the longest: the winner's own rows
    values = {
        "source_positioned": _f64(seen["encoder.input"][0]), "qkv_in": _f64(seen[f"{at}.in"][0]),
        "qkv": torch.cat([_heads_to_rows(_f64(seen[f"{at}.{part}"][0])) for part in "qkv"], -1),
        "weights": _f64(seen[f"{at}.weights"][0]), "memory": _f64(memory[0]),
        "decoder_positioned": _f64(seen["decoder.input"][best][:t]),
        "cross_query_in": _f64(seen[f"{cross}.in"][best][:t]), "cross_memory": _f64(memory[0]),
        "cross_weights": _f64(seen[f"{cross}.weights"][best][:, :t]), "decoder_out": _f64(seen["decoder.norm"]),
        "label_log_probs": _f64(log_probs[0]), "unpadded": _f64(unpadded[0]),
    }
    values["memory_in"] = _f64(seen[points["memory_in"]][0])  # the last layer's output, before the final norm
    n = len(ids)
    mask = seen[f"{at}.mask"].expand(1, 1, n, n)  # (1, 1, T, T) True where a query may look (padding: one row)
    modules = {"lookup": model.point_owner("logits").lut, "qkv": model.point_owner(f"{at}.q").in_proj,
               "encoder_norm": model.point_owner("encoder.norm").norm, "cross": model.point_owner(f"{cross}.q")}
    p = Pass(SENTIMENT, c, ids, [_label(tok, i) for i in ids], layer, values, modules, {
        "is_causal": c.causal_encoder, "mask": mask[0, 0].cpu(), "real": real[0].cpu().bool(), "labels": labels,
        "candidates": candidates, "best": best, "cross_layer": cross_layer, "decoder_ids": decoder_ids,
        "decoder_tokens": [_label(tok, i) for i in decoder_ids], "tokenizer": tok})
    return p, source.notices


# -- recomputation by hand ------------------------------------------------------------------------


@dataclass
class Check:
    """A value recomputed in the tour against the model's own: equal within `tolerance`."""

    what: str  # "the model's attention weights", as a sentence names it
    error: float  # the largest absolute difference
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance

    def sentence(self) -> str:
        if self.ok:
            return f"✓ Recomputed here by hand: equals {self.what} (largest difference {self.error:.1e})."
        return (f"⚠️ Mismatch: recomputed by hand, this differs from {self.what} by {self.error:.3g} (more than "
                f"{self.tolerance:.0e}). The tour's arithmetic and the model disagree here.")


def check(what: str, mine: torch.Tensor, theirs: torch.Tensor) -> Check:
    """`mine` against the model's `theirs` (same shape; -inf where both are -inf counts as equal)."""
    mine, theirs = mine.double(), theirs.double()
    if mine.shape != theirs.shape:
        return Check(what + f" (shape {tuple(mine.shape)} against {tuple(theirs.shape)})", math.inf, 0.0)
    both_inf = torch.isinf(mine) & torch.isinf(theirs) & (mine.sign() == theirs.sign())
    error = (mine - theirs).abs().masked_fill(both_inf, 0.0)
    scale = float(theirs.masked_fill(torch.isinf(theirs), 0.0).abs().max()) if theirs.numel() else 0.0
    return Check(what, float(error.max()) if error.numel() else 0.0, TOLERANCE * max(1.0, scale))


def layer_norm(x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    """γ ⊙ (x − mean) / √(variance + ε) + β over the last dimension (the biased variance, as the paper's)."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * _f64(norm.weight) + _f64(norm.bias)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x @ _f64(weight).T + (0 if bias is None else _f64(bias))


def gelu(x: torch.Tensor) -> torch.Tensor:
    """x · Φ(x), Φ the standard normal's distribution function (the exact GELU)."""
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """exp(s − max) / Σ exp(s − max) per row; a row with every entry −∞ gives zeros, as the model's does."""
    top = scores.max(-1, keepdim=True).values
    e = torch.exp(scores - torch.where(torch.isinf(top), 0.0, top))
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp(min=1e-300), 0.0)


def sinusoids(n: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same), written out with numpy."""
    pos, i = np.arange(n)[:, None], np.arange(0, d, 2)[None, :]
    angle = pos / 10000 ** (i / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(pe)


def head_qkv(qkv: torch.Tensor, head: int, n_head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (T, 3C) projection -> head `head`'s Q, K, V, (T, d_k) each."""
    c = qkv.size(-1) // 3
    d_k = c // n_head
    return tuple(qkv[:, part * c + head * d_k: part * c + (head + 1) * d_k] for part in range(3))


def allowed(t_q: int, t_k: int, key_mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
    """(T_q, T_k) True where a query may look: real keys, and with `is_causal` no later position."""
    ok = torch.ones(t_q, t_k, dtype=torch.bool) if key_mask is None else key_mask.expand(t_q, t_k).clone()
    if is_causal:
        ok &= torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)
    return ok


def sampled_by_hand(logits: torch.Tensor, config: GenerationConfig) -> torch.Tensor:
    """The distribution a draw uses: logits / T, the top-k kept, then the smallest set of the most
    likely whose probabilities reach top-p, renormalised."""
    z = logits / config.temperature
    order = z.argsort(descending=True)
    keep = torch.zeros_like(z, dtype=torch.bool)
    keep[order[:config.top_k]] = True
    p = softmax(z.masked_fill(~keep, -math.inf))
    ranked = p[order]
    before = ranked.cumsum(0) - ranked  # the mass of the more likely tokens
    keep[order[before >= config.top_p]] = False
    return softmax(z.masked_fill(~keep, -math.inf))


# -- the steps ------------------------------------------------------------------------------------


@dataclass
class Panel:
    """One picture of a step: a heatmap (rows × columns) or bars (one value per label)."""

    name: str  # its caption: what the numbers are
    values: np.ndarray  # 2-D for a heatmap, 1-D for bars
    rows: list[str]  # heatmap rows (tokens) or bar labels
    columns: list[str] = field(default_factory=list)  # a heatmap's columns when they are tokens (keys); else dimensions
    kind: str = "signed"  # "signed" (blue < 0 < red), "weights" (0 to 1), "bars", "pieces" (tokens and ids)
    masked: np.ndarray | None = None  # heatmap cells a mask removed (−∞), drawn blank


@dataclass
class Step:
    """One screen of the tour: what it says, its formula, its pictures and its checks."""

    key: str  # its code in `CODE`
    title: str
    explanation: str  # one paragraph, Markdown
    formula: str  # LaTeX
    shape: str  # the live tensor's shape, in words
    panels: list[Panel]
    checks: list[Check] = field(default_factory=list)
    worked: str = ""  # one number worked out by hand
    link: str = ""  # "lens" or "sampling": the app view that goes further

    @property
    def mismatches(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def code(self) -> CodeRange | None:
        try:
            return code_range(self.key)
        except (LookupError, AttributeError, OSError, TypeError):  # CODE not re-pointed after a refactor
            return None


@dataclass
class Tour:
    """One pass as steps, and what the API reports of it; kept in the visitor's session."""

    model: str  # LM or SENTIMENT
    toy: bool
    text: str
    layer: int  # 0-based
    head: int
    n_layers: int
    n_heads: int
    steps: list[Step]
    overview: list[tuple[str, int]]  # the overview figure's parts: (label, the step it opens)
    notices: list[str]
    top_tokens: list[tuple[str, float]] = field(default_factory=list)  # LM: the model's likeliest next tokens
    label_probabilities: dict[str, float] = field(default_factory=dict)  # sentiment


def _lines(*formulas: str) -> str:
    """Formulas one under the other (a phone is too narrow for them side by side)."""
    return r"\begin{gathered}" + r" \\ ".join(formulas) + r"\end{gathered}"


def _t(token: str) -> str:
    """A token inside Markdown text: as code, so that `<s>` or `**` shows as typed."""
    fence = "``" if "`" in token else "`"
    return f"{fence}{token}{fence}" if fence == "`" else f"{fence} {token} {fence}"


def _n(x: float) -> str:
    """A number in a worked example: 3 decimals, or 3 significant digits below 0.1 (−0.0107, not −0.011)."""
    return (f"{x:.3g}" if 0 < abs(x) < 0.1 else f"{x:.3f}").replace("-", "−")


def _dot(a: torch.Tensor, b: torch.Tensor) -> str:
    """a·b written out: every product of a toy-sized vector (8 at most), the first 4 and a count otherwise."""
    terms = a.numel() if a.numel() <= 8 else 4
    shown = [f"{_n(x)}×{_n(y)}" for x, y in zip(a.tolist()[:terms], b.tolist()[:terms], strict=True)]
    rest = f" + … ({a.numel() - terms} more)" if a.numel() > terms else ""
    return " + ".join(shown) + rest


def _ids_worked(p: Pass, shown: int = 8) -> str:
    """The first pieces with their ids: "<s> → 1 · This → 1212 · …"."""
    pairs = " · ".join(f"{_t(t)} → {i}" for t, i in zip(p.tokens[:shown], p.ids[:shown], strict=True))
    return pairs + (" …" if len(p.ids) > shown else "")


def _masked(scores: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(~ok, -math.inf)


def _heat(name: str, values: torch.Tensor, rows: list[str], columns: list[str] | None = None, kind="signed",
          masked: torch.Tensor | None = None) -> Panel:
    v = values.float().numpy()  # float32: what a picture needs, half the session's memory
    return Panel(name, v, rows, columns or [], kind, None if masked is None else masked.numpy())


@functools.lru_cache(maxsize=4)
def vocabulary_labels(tok) -> tuple[str, ...]:
    """Every token's display label, by id (bars over the whole vocabulary)."""
    return tuple(_label(tok, i) for i in range(tok.vocab_size))


def _bars(name: str, values: torch.Tensor, tok, vocab_size: int, mark: int | None = None) -> Panel:
    labels = list(vocabulary_labels(tok)) + [f"<{i}>" for i in range(tok.vocab_size, vocab_size)]
    if mark is not None:
        labels[mark] += " ◀ drawn"
    return Panel(name, values.float().numpy(), labels, kind="bars")


def attention_steps(p: Pass, head: int, proj_in: torch.Tensor, proj: torch.nn.Module, qkv: torch.Tensor,
                    weights: torch.Tensor, ok: torch.Tensor, masking: Callable[[torch.Tensor], "Step"],
                    where: str, focus: int) -> tuple[list["Step"], torch.Tensor, torch.Tensor]:
    """Q, K, V → QKᵀ → /√d_k → mask → softmax of one head: the projection recomputed from its captured
    input `proj_in` and checked against the captured `qkv` (T, 3C), the weights against the model's
    `weights` (H, T, T). `ok` (T, T): where a query may look; `masking(scaled scores)` is the track's
    mask step (causal or padding), placed between the scaling and the softmax; `focus`: the token
    whose row the worked examples follow. Returns the steps, the head's weights and its values V."""
    c = p.config
    d_k, tokens = c.d_model // c.n_head, p.tokens
    mine = linear(proj_in, proj.weight, proj.bias)
    q, k, v = head_qkv(mine, head, c.n_head)
    scores = q @ k.T
    scaled = scores / math.sqrt(d_k)
    attn = softmax(_masked(scaled, ok))
    last, n = focus, len(tokens)
    tail = f"{_t(tokens[last])} → {_t(tokens[0])}"
    row = head * d_k  # W_Q's row of this head's first query entry
    steps = [
        Step("qkv", f"Queries, keys and values ({where}, head {head + 1})",
             f"Each token's vector is multiplied by three learned matrices. Its **query** asks what it is looking "
             f"for, its **key** says what it offers, its **value** is what it passes on when attended to. A "
             f"**head** is one of the {c.n_head} attention computations a layer runs side by side, each on its own "
             f"d_k = {c.d_model} / {c.n_head} = {d_k} numbers: this is head {head + 1}'s share.",
             _lines(r"Q = X W_Q + b_Q", r"K = X W_K + b_K", r"V = X W_V + b_V"),
             f"Q, K, V: ({n}, {d_k}) each: tokens × d_k",
             [_heat("Q (queries)", q, tokens), _heat("K (keys)", k, tokens), _heat("V (values)", v, tokens)],
             [check(f"the model's Q, K, V projection ({where})", mine, qkv)],
             worked=f"q of {_t(tokens[last])}, entry 0: {_dot(proj_in[last], _f64(proj.weight)[row])} + "
                    f"{_n(float(_f64(proj.bias)[row]))} = **{_n(float(q[last, 0]))}**"),
        Step("scores", "Scores: every query against every key",
             "Each query is compared with every key by a dot product: a large score means the key offers what "
             "the query looks for. Row i holds token i's scores for all tokens.",
             r"S = Q K^{\top}", f"S: ({n}, {n}): queries × keys", [_heat("QKᵀ", scores, tokens, tokens)],
             worked=f"{tail}: q·k = {_dot(q[last], k[0])} = **{_n(float(scores[last, 0]))}**"),
        Step("scaling", f"Scaling by √d_k = √{d_k}",
             f"Dot products of {d_k} numbers grow with d_k; divided by √d_k they stay in a range where the softmax "
             "that follows still gives weight to more than one token (and learns well).",
             r"S' = \frac{Q K^{\top}}{\sqrt{d_k}}", f"S': ({n}, {n})", [_heat("QKᵀ / √d_k", scaled, tokens, tokens)],
             worked=f"{tail}: {_n(float(scores[last, 0]))} / √{d_k} = {_n(float(scores[last, 0]))} / "
                    f"{_n(math.sqrt(d_k))} = **{_n(float(scaled[last, 0]))}**"),
        masking(scaled),
        Step("softmax", "Softmax: attention weights (each row sums to 1)",
             "Each row of scores becomes weights: e raised to each score, divided by the row's total. The weights "
             "are positive and add up to 1, so they say how a query shares its attention among the tokens it may "
             "see; a masked score (−∞) gets weight 0. Many heads put most weight on the first token: a resting "
             "place when nothing else is relevant.",
             _lines(r"A_{ij} = \frac{e^{S'_{ij}}}{\sum_{j'} e^{S'_{ij'}}}", r"\sum_j A_{ij} = 1"),
             f"A: ({n}, {n}): queries × keys", [_heat("attention weights", attn, tokens, tokens, "weights", ~ok)],
             [check(f"the model's attention weights ({where}, head {head + 1})", attn, weights[head]),
              check("1 in every row's sum", attn.sum(-1), torch.ones(n, dtype=torch.float64))],
             worked=f"row {_t(tokens[last])}: " + ", ".join(f"{_t(tokens[j])} {_n(float(attn[last, j]))}"
                                                       for j in range(min(n, 6)))
                    + (" …" if n > 6 else "") + f"; sum {_n(float(attn[last].sum()))}"),
    ]
    return steps, attn, v


def lm_steps(p: Pass, head: int) -> list[Step]:
    """The LM track, from text to the drawn next token (see the module doc)."""
    c, v, m, tokens = p.config, p.values, p.modules, p.tokens
    n, d, d_k, layer = len(tokens), c.d_model, c.d_model // c.n_head, p.layer
    tok = p.extra["tokenizer"]
    last = n - 1
    at = _t(tokens[last])  # the worked examples follow the last token, the one whose next token is predicted
    ids = torch.tensor(p.ids)
    where = f"layer {layer + 1}"

    lookup = _f64(m["lookup"].weight)[ids]
    embedded = lookup * math.sqrt(d)
    pe = sinusoids(n, d)
    positioned = embedded + pe
    normed = layer_norm(v["norm_1_in"], m["norm_1"])
    x = v["norm_1_in"]
    mu, sd = float(x[last].mean()), float(x[last].var(unbiased=False).add(m["norm_1"].eps).sqrt())
    gamma, beta = _f64(m["norm_1"].weight), _f64(m["norm_1"].bias)

    ok = allowed(n, n, None if p.extra["mask"] is None else p.extra["mask"][0, 0, 0].bool(), p.extra["is_causal"])
    weights = v["weights"]

    def masking(scaled: torch.Tensor) -> Step:
        return Step(
            "mask", "The causal mask: no looking ahead",
            "A **mask** says which tokens a query may look at. A language model learns to predict each next "
            "token, so token i may see tokens 0 to i only: the scores above the diagonal become −∞, which the "
            "softmax turns into weight 0 (blank cells).",
            r"S'_{ij} = -\infty \quad \text{for } j > i", f"S' masked: ({n}, {n})",
            [_heat("QKᵀ / √d_k, masked", _masked(scaled, ok), tokens, tokens, masked=~ok)],
            [check("the model's weight 0 on every masked cell", weights[:, ~ok], torch.zeros_like(weights[:, ~ok]))],
            worked=f"row {_t(tokens[0])} sees only itself; row {_t(tokens[last])} sees all {n} tokens")

    attention, attn, values_h = attention_steps(p, head, v["norm_1"], m["qkv"], v["qkv"], weights, ok, masking, where,
                                                last)
    head_out = attn @ values_h
    all_heads = torch.cat([v_w @ head_qkv(v["qkv"], h, c.n_head)[2] for h, v_w in enumerate(weights)], dim=-1)
    projected = linear(all_heads, m["heads"].weight, m["heads"].bias)
    mid = x + v["attention"]
    normed_2 = layer_norm(mid, m["norm_2"])
    hidden = gelu(linear(v["norm_2"], m["ffn_1"].weight, m["ffn_1"].bias))  # each step from the model's previous values
    ffn = linear(hidden, m["ffn_2"].weight, m["ffn_2"].bias)
    pre = float(linear(v["norm_2"], m["ffn_1"].weight, m["ffn_1"].bias)[last, 0])
    phi = 0.5 * (1 + math.erf(pre / math.sqrt(2)))  # Φ, the standard normal's distribution function
    stream = v["stream"]
    final = layer_norm(v["final_in"], m["final_norm"])
    logits = v["final"] @ _f64(m["lookup"].weight).T
    z = logits[last]
    probs = softmax(z)
    tempered = softmax(z / SAMPLING.temperature)
    drawn_from = sampled_by_hand(v["next_logits"], SAMPLING)  # from the model's logits: the same cut at top-p
    generator = torch.Generator().manual_seed(SAMPLING.seed)
    drawn = select_token(v["next_logits"].float(), SAMPLING, generator)
    lens = [int(t) for t in (layer_norm(stream[:, last], m["final_norm"]) @ _f64(m["lookup"].weight).T).argmax(-1)]
    depth = ["embeddings"] + [f"block {i + 1}" for i in range(c.n_layer)]
    best = int(probs.argmax())
    vocab = c.vocab_size
    kept = int((drawn_from > 0).sum())

    return [
        Step("tokens", "Text → pieces → ids",
             f"The tokenizer cuts your text into pieces from its vocabulary of {vocab:,} (frequent words are one "
             "piece, rare ones several) and the model puts the start token `<s>` in front. From here on the model "
             "sees only these numbers, the ids.",
             r"\text{ids} = [\langle s\rangle] + \mathrm{tokenize}(\text{text})", f"ids: ({n},)",
             [Panel("pieces and their ids", np.array(p.ids), tokens, kind="pieces")],
             worked=_ids_worked(p)),
        Step("embedding", "Embedding lookup (× √d_model)",
             f"Each id picks its row of the embedding table, a learned vector of d_model = {d} numbers; the row is "
             f"multiplied by √{d} so that it is not drowned by the positional encoding added next. The same table "
             "turns the final vectors back into scores for every token at the end.",
             r"X_{\text{emb}} = E[\text{ids}] \cdot \sqrt{d_{\text{model}}}", f"X_emb: ({n}, {d}): tokens × d_model",
             [_heat("token embeddings × √d_model", embedded, tokens)],
             [check("the model's embeddings", embedded, v["embedded"])],
             worked=f"{at}, entry 0: {_n(float(lookup[last, 0]))} × √{d} = {_n(float(lookup[last, 0]))} × "
                    f"{_n(math.sqrt(d))} = **{_n(float(embedded[last, 0]))}**"),
        Step("position", "Positional encoding: where each token is",
             "Attention itself ignores order, so each position adds a fixed pattern of sines and cosines: fast waves "
             "in the first dimensions, slow ones in the last, a different mix at every position.",
             _lines(r"PE_{(pos,\,2i)} = \sin\big(pos / 10000^{2i/d_{\text{model}}}\big)",
                    r"PE_{(pos,\,2i+1)} = \cos\big(pos / 10000^{2i/d_{\text{model}}}\big)", r"X = X_{\text{emb}} + PE"),
             f"PE and X: ({n}, {d}): positions × d_model",
             [_heat("PE: the sinusoids that are added", pe, [f"{i}: {t}" for i, t in enumerate(tokens)]),
              _heat("X = embeddings + PE", positioned, tokens)],
             [check("the model's input to block 1", positioned, v["positioned"])],
             worked=f"position {last} ({_t(tokens[last])}), entry 0: sin({last} / 10000^(0/{d})) = "
                    f"{_n(float(pe[last, 0]))}; {_n(float(embedded[last, 0]))} + {_n(float(pe[last, 0]))} = "
                    f"**{_n(float(positioned[last, 0]))}**"),
        Step("norm", f"LayerNorm before attention ({where})",
             f"A **layer** (or block) is one round of attention then feed-forward; this model stacks {c.n_layer} and "
             f"the tour follows layer {layer + 1}. It first normalises each token's vector: minus its mean, divided "
             "by its standard deviation, then scaled and shifted by learned γ and β.",
             r"\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta",
             f"LN₁(x): ({n}, {d})", [_heat("normalised vectors", normed, tokens)],
             [check(f"the model's LayerNorm ({where})", normed, v["norm_1"])]
             + ([check("the embeddings + PE of the previous step", x, v["positioned"])] if layer == 0 else
                [check(f"block {layer}'s output", x, stream[layer])]),
             worked=f"{at}: mean {_n(mu)}, standard deviation {_n(sd)}; entry 0: ({_n(float(x[last, 0]))} − "
                    f"{_n(mu)}) / {_n(sd)} × {_n(float(gamma[0]))} + {_n(float(beta[0]))} = "
                    f"**{_n(float(normed[last, 0]))}**"),
        *attention,
        Step("weighted_sum", "Weighted sum of the values",
             "Each token's output from this head is the average of the value vectors, weighted by its row of "
             "attention: it gathers what the tokens it attends to pass on.",
             r"\text{head}_h = A V", f"head {head + 1}: ({n}, {d_k}): tokens × d_k",
             [_heat(f"head {head + 1}'s output", head_out, tokens)],
             [check(f"the model's head {head + 1} output", head_out, v["heads_in"][:, head * d_k:(head + 1) * d_k])],
             worked=f"{_t(tokens[last])}, entry 0: " + _dot(attn[last], values_h[:, 0])
                    + f" = **{_n(float(head_out[last, 0]))}**"),
        Step("heads", f"{c.n_head} heads concatenated, then projected",
             f"The {c.n_head} heads' outputs ({d_k} numbers each) are put side by side into {d} numbers per token and "
             "mixed by one more learned matrix W_O.",
             r"\mathrm{MultiHead}(X) = \mathrm{Concat}(\text{head}_1, \dots, \text{head}_H)\, W_O",
             f"({n}, {d}): tokens × d_model", [_heat("attention output", projected, tokens)],
             [check(f"the model's attention output ({where})", projected, v["attention"]),
              check("the model's concatenated heads", all_heads, v["heads_in"])],
             worked=f"{c.n_head} × {d_k} = {d} numbers per token, times W_O ({d} × {d})"),
        Step("residual", "Residual + LayerNorm",
             "The attention output is *added* to the vector it started from (the residual connection: each block "
             "only adds a correction), then the sum is normalised again for the feed-forward network.",
             _lines(r"x \leftarrow x + \mathrm{MultiHead}(\mathrm{LN}_1(x))", r"h = \mathrm{LN}_2(x)"),
             f"x and h: ({n}, {d})",
             [_heat("x + attention", mid, tokens), _heat("LN₂(x)", normed_2, tokens)],
             [check("the model's residual stream after attention", mid, v["norm_2_in"]),
              check("the model's LayerNorm", normed_2, v["norm_2"])],
             worked=f"{_t(tokens[last])}, entry 0: {_n(float(x[last, 0]))} + {_n(float(v['attention'][last, 0]))} = "
                    f"**{_n(float(mid[last, 0]))}**"),
        Step("ffn", "Feed-forward network with GELU",
             f"Each token alone goes through two layers: {d} → {c.d_ff} numbers, GELU (negative values squashed to "
             f"about 0, positive ones kept), → {d} again; the result is added to the residual stream. This is where "
             "most of the model's weights are.",
             _lines(r"\mathrm{FFN}(h) = W_2\, \mathrm{GELU}(W_1 h + b_1) + b_2", r"x \leftarrow x + \mathrm{FFN}(h)"),
             f"GELU(W₁h + b₁): ({n}, {c.d_ff}); FFN(h): ({n}, {d})",
             [_heat("GELU activations", hidden, tokens), _heat("FFN(h)", ffn, tokens)],
             [check("the model's GELU activations", hidden, v["ffn_hidden"]),
              check("the model's feed-forward output", ffn, v["ffn"]),
              check(f"block {layer + 1}'s output", v["norm_2_in"] + ffn, stream[layer + 1])],
             worked=f"GELU({_n(pre)}) = {_n(pre)} × Φ({_n(pre)}) = {_n(pre)} × {_n(phi)} = "
                    f"**{_n(float(hidden[last, 0]))}**"),
        Step("stack", f"The stack: {c.n_layer} blocks, one after the other",
             f"Every block reads the residual stream and adds to it; the {c.n_layer} blocks have the same shape and "
             f"different weights. Rows: the vector of the last token ({at}) after the embeddings and after each "
             "block. Read through the final LayerNorm and the output projection, each row gives the token "
             "that layer would predict next (in the row names): the **logit lens**, which the Chat tab shows for "
             "every generated token.",
             r"x^{(\ell+1)} = \mathrm{Block}_\ell\big(x^{(\ell)}\big),\quad \ell = 1, \dots, L",
             f"({c.n_layer + 1}, {d}): depth × d_model, last token",
             [_heat(f"{tokens[last]}'s vector through depth", stream[:, last],
                    [f"{name} → {_label(tok, i)}" for name, i in zip(depth, lens, strict=True)])],
             [check("the model's logits for the last token (the last row)",
                    layer_norm(stream[-1, last], m["final_norm"]) @ _f64(m["lookup"].weight).T, v["logits"][last])],
             worked="  ·  ".join(f"{name}: {_t(_label(tok, i))}" for name, i in zip(depth, lens, strict=True)),
             link="lens"),
        Step("logits", "Final LayerNorm and the tied output projection → logits",
             f"The last vector is normalised once more and compared with every row of the embedding table (the same "
             f"table as at the start: tied weights), giving one **logit** per token of the vocabulary: a raw score, "
             f"any real number, higher meaning more likely. The bars show the {vocab:,} logits for what follows "
             f"{_t(tokens[last])}.",
             r"z = \mathrm{LN}_f\big(x^{(L)}\big)\, E^{\top}", f"logits: ({n}, {vocab:,}); bars: the last row",
             [_bars(f"logits after {tokens[last]}", z, tok, vocab)],
             [check("the model's logits (every position)", logits, v["logits"]),
              check("the model's final LayerNorm", final, v["final"])],
             worked=f"z({_t(_label(tok, best))}) = final vector · its embedding row = {_n(float(z[best]))}"),
        Step("probabilities", "Softmax (with temperature) → probabilities",
             f"The softmax turns logits into **probabilities**: positive, adding up to 1 over all {vocab:,} tokens. "
             f"Dividing the logits by a temperature T first sharpens (T < 1) or flattens (T > 1) them; the chat "
             f"samples at T = {SAMPLING.temperature:g}.",
             r"p_i = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}}", f"p: ({vocab:,},)",
             [_bars("T = 1: the model's own probabilities", probs, tok, vocab),
              _bars(f"T = {SAMPLING.temperature:g}", tempered, tok, vocab)],
             [check("the model's next-token distribution (its generation path)", probs,
                    torch.softmax(v["next_logits"], -1))],
             worked=f"p({_t(_label(tok, best))}) = e^{{{_n(float(z[best]))}}} / Σ e^z = **{_n(float(probs[best]))}**; "
                    f"at T = {SAMPLING.temperature:g}: **{_n(float(tempered[best]))}**"),
        Step("sampling", "Top-k, top-p and the draw",
             f"The chat keeps the {SAMPLING.top_k} most likely tokens (top-k), then the fewest of those whose "
             f"probabilities add up to {SAMPLING.top_p:g} (top-p), renormalises them to sum to 1, and draws one at "
             f"random (seed {SAMPLING.seed}). Here {kept} tokens were left; the draw picked "
             f"{_t(_label(tok, drawn))}. The Chat tab's “How was this token sampled?” shows this for every generated "
             "token.",
             _lines(r"\mathcal{S} = \text{top-}k \cap \text{top-}p",
                    r"\text{next} \sim \frac{p_i\,[i \in \mathcal{S}]}{\sum_{j \in \mathcal{S}} p_j}"),
             f"({vocab:,},): {kept} tokens above 0",
             [_bars("what the draw chooses from", drawn_from, tok, vocab, mark=drawn)],
             [check("the sampler's own distribution", drawn_from,
                    sampling_distribution(v["next_logits"].float(), SAMPLING).double())],
             worked=f"{vocab:,} tokens → top-k {SAMPLING.top_k} → top-p {SAMPLING.top_p:g}: {kept} left; drawn: "
                    f"{_t(_label(tok, drawn))} (p = {_n(float(drawn_from[drawn]))})",
             link="sampling"),
    ]


def sentiment_steps(p: Pass, head: int) -> list[Step]:
    """The sentiment track: the review through the encoder (self-attention with the padding mask),
    the decoder's cross-attention from the label it writes, and the label's probability."""
    c, v, m, x = p.config, p.values, p.modules, p.extra
    tokens, d, d_k = p.tokens, c.d_model, c.d_model // c.n_head
    n = len(tokens)
    where = f"encoder layer {p.layer + 1}"
    ids = torch.tensor(p.ids)
    real = x["real"]
    key_mask = real[None, :]
    ok = allowed(n, n, key_mask, x["is_causal"])
    weights = v["weights"]
    causal = " and, since this encoder keeps the language model's causal mask, no later token" \
        if x["is_causal"] else ""

    def masking(scaled: torch.Tensor) -> Step:
        return Step(
            "padding_mask", "The padding mask",
            f"Reviews in a batch have different lengths, so the shorter ones are filled up with `<pad>` tokens; the "
            f"tour added {PADDING} to yours. A **mask** says which tokens a query may look at: every real token here, "
            f"not the padding{causal}. Those scores become −∞ (blank cells), so the padding changes nothing.",
            r"S'_{ij} = -\infty \quad \text{where key } j \text{ is padding}", f"S' masked: ({n}, {n})",
            [_heat("QKᵀ / √d_k, masked", _masked(scaled, ok), tokens, tokens, masked=~ok)],
            [check("the mask the model applied", ok.double(), x["mask"].double()),
             check("the model's weight 0 on every padding key", weights[:, :, ~real],
                   torch.zeros_like(weights[:, :, ~real]))],
            worked=f"columns {', '.join(_t(t) for t, r in zip(tokens, real.tolist(), strict=True) if not r)}: "
                   "−∞ in every row")

    focus = max(int(real.sum()) - 2, 0)  # the review's last piece, before </s>
    attention, _, _ = attention_steps(p, head, v["qkv_in"], m["qkv"], v["qkv"], weights, ok, masking, where, focus)
    memory = layer_norm(v["memory_in"], m["encoder_norm"]) if isinstance(m["encoder_norm"], torch.nn.LayerNorm) \
        else v["memory_in"]
    embedded = _f64(m["lookup"].weight)[ids] * math.sqrt(d) + sinusoids(n, d)

    dec_ids, dec_tokens = x["decoder_ids"], x["decoder_tokens"]
    t = len(dec_ids)
    dec_in = _f64(m["lookup"].weight)[torch.tensor(dec_ids)] * math.sqrt(d) + sinusoids(t, d)
    cross = m["cross"]
    w, b = _f64(cross.in_proj.weight), _f64(cross.in_proj.bias)
    cq = (v["cross_query_in"] @ w[:d].T + b[:d])[:, head * d_k:(head + 1) * d_k]
    ck = (v["cross_memory"] @ w[d:2 * d].T + b[d:2 * d])[:, head * d_k:(head + 1) * d_k]
    cross_ok = allowed(t, n, key_mask, False)
    cross_scaled = _masked((cq @ ck.T) / math.sqrt(d_k), cross_ok)
    cross_attn = softmax(cross_scaled)
    label_logits = v["decoder_out"] @ _f64(m["lookup"].weight).T  # (K, T, V): every candidate's decoder rows
    log_p = torch.log_softmax(label_logits, -1)
    scores = torch.stack([sum(log_p[j, i, target] for i, target in enumerate([*cand, c.eos_token_id]))
                          for j, cand in enumerate(x["candidates"])])
    probs = softmax(scores / c.temperature)
    labels, best = x["labels"], x["best"]
    cross_where = f"decoder layer {x['cross_layer'] + 1}"
    top = int(cross_attn[0].argmax())
    return [
        Step("source_tokens", "Review → pieces → ids",
             "The classifier reads the review as the language model does: pieces of its vocabulary, then the end "
             f"token `</s>`; the {PADDING} `<pad>` tokens after it stand for the filling a batch adds (see the mask "
             "step).",
             r"\text{ids} = \mathrm{tokenize}(\text{review}) + [\langle /s\rangle]", f"ids: ({n},)",
             [Panel("pieces and their ids", np.array(p.ids), tokens, kind="pieces")],
             worked=_ids_worked(p)),
        Step("source_embedding", "Embeddings + positions",
             f"As in the language model: each id's row of the embedding table × √{d}, plus the sinusoid of its "
             f"position. The encoder then runs {c.n_encoder_layer} **layers** (blocks of self-attention then "
             f"feed-forward) over these vectors; the tour looks inside layer {p.layer + 1}.",
             r"X = E[\text{ids}] \cdot \sqrt{d_{\text{model}}} + PE", f"X: ({n}, {d}): tokens × d_model",
             [_heat("embeddings + PE", embedded, tokens)],
             [check("the model's encoder input", embedded, v["source_positioned"])]),
        *attention,
        Step("memory", f"The encoder's output: the memory ({c.n_encoder_layer} layers)",
             f"After all {c.n_encoder_layer} encoder layers (each: self-attention, then feed-forward, with residuals) "
             "every review token has a vector that has looked at the whole review: the **memory** the decoder "
             "reads.",
             r"M = \mathrm{LN}\big(\mathrm{Encoder}(X)\big)", f"M: ({n}, {d}): tokens × d_model",
             [_heat("memory", memory, tokens)],
             [check("the model's memory", memory, v["memory"])]),
        Step("decoder_input", "The decoder reads the label it writes",
             f"The classifier answers by writing a label word. The decoder's input is the start token then the label's "
             f"pieces; the tour follows the label the model prefers, {_t(labels[best])}: "
             f"{' '.join(_t(t) for t in dec_tokens)}.",
             r"Y = E[\langle s\rangle, \text{label}] \cdot \sqrt{d_{\text{model}}} + PE",
             f"Y: ({t}, {d}): decoder tokens × d_model", [_heat("decoder input", dec_in, dec_tokens)],
             [check("the model's decoder input", dec_in, v["decoder_positioned"])]),
        Step("cross", f"Cross-attention: the label looks at the review ({cross_where}, head {head + 1})",
             "In cross-attention the **queries** come from the decoder (the label being written) and the **keys and "
             "values** from the encoder's memory (the review): each row shows which review tokens a decoder step "
             "reads. The padding keys are masked here too.",
             r"A = \mathrm{softmax}\!\Big(\frac{Q_{\text{dec}} K_{\text{mem}}^{\top}}{\sqrt{d_k}} + \text{mask}\Big)",
             f"A: ({t}, {n}): decoder tokens × review tokens",
             [_heat("cross-attention weights", cross_attn, dec_tokens, tokens, "weights", ~cross_ok)],
             [check(f"the model's cross-attention weights ({cross_where}, head {head + 1})", cross_attn,
                    v["cross_weights"][head])],
             worked=f"the start token (the step that writes the label's first piece) looks most at {_t(tokens[top])} "
                    f"({_n(float(cross_attn[0, top]))})"),
        Step("label", "The label's probability",
             "The decoder's last vectors go through the tied output projection, giving **logits** (raw scores, one "
             "per token of the vocabulary), and a softmax, as in the language model. The log-probabilities of each "
             "label's pieces and of the end token are added up, and a softmax over the labels (at the fitted "
             f"temperature {c.temperature:g}) gives each label's **probability**. (The Sentiment tab's verdict "
             "averages these with a second classifier's, one that reads the review from its last token to its "
             "first, where one is served: see About.)",
             _lines(r"s(\text{label}) = \sum_t \log p(y_t \mid y_{<t}, \text{review})",
                    r"P(\text{label}) = \mathrm{softmax}_{\text{labels}}\big(s / T\big)"),
             f"({len(labels)},): one per label",
             [Panel("P(label | review)", probs.numpy(), list(labels), kind="bars"),
              Panel("log P(label words | review)", scores.numpy(), list(labels), kind="bars")],
             [check("the classifier's probabilities", probs, v["label_log_probs"].exp()),
              check("the same review classified without padding", probs, v["unpadded"].exp())],
             worked=" · ".join(f"{label}: log P {_n(float(s))} → **{_n(float(pr))}**"
                              for label, s, pr in zip(labels, scores, probs, strict=True))),
    ]


# -- the tour -------------------------------------------------------------------------------------

OVERVIEW = {  # the overview figure's parts: (label, the step it opens); {n}: the number of blocks
    LM: [("Text → tokens", "tokens"), ("Embeddings + positions", "embedding"),
         ("{n} blocks: attention + feed-forward", "norm"), ("Output: logits → probabilities", "logits"),
         ("Next token", "sampling")],
    SENTIMENT: [("Review → tokens", "source_tokens"), ("Embeddings + positions", "source_embedding"),
                ("Encoder: {n} blocks", "qkv"), ("Decoder: cross-attention", "cross"),
                ("Output: the label's probability", "label")],
}
TRACKS: dict[str, tuple[Callable, Callable, str]] = {  # model -> pass, steps, the config's layer count
    LM: (lm_pass, lm_steps, "n_layer"), SENTIMENT: (sentiment_pass, sentiment_steps, "n_encoder_layer")}


def _index(value: object, n: int, what: str, notices: list[str]) -> int:
    i = int(round(read_number(value, 0)))
    if not 0 <= i < n:
        notices.append(f"There is no {what} {i + 1} (1 to {n}): showing the nearest.")
    return min(max(i, 0), n - 1)


def track_shape(ckpt: Checkpoint) -> tuple[int, int]:
    """(layers, heads) the visitor picks from: the LM's blocks, the classifier's encoder layers."""
    model, _ = ckpt.require()
    return getattr(model.config, TRACKS[ckpt.name][2]), model.config.n_head


def tour_checkpoint(service: DemoService, model_name: object, toy: bool = False) -> Checkpoint:
    """The model the tour follows: a served one, or its toy (`demo.views.toy`)."""
    ckpt = service.checkpoint(model_name)
    return toy_checkpoint(ckpt.name) if toy else ckpt


def tour(service: DemoService, text: object, model_name: object = LM, layer: object = 0, head: object = 0,
         toy: object = False) -> Tour:
    """The tour of the served model `model_name`, or of its toy, on `text` (see `tour_of`)."""
    toy = toy is True or str(toy).lower() == "true"  # an API caller's "false" is not a toy
    ckpt = tour_checkpoint(service, model_name, toy)
    with service.compute():
        return tour_of(ckpt, text, layer, head, toy)


def tour_of(ckpt: Checkpoint, text: object, layer: object = 0, head: object = 0, toy: bool = False) -> Tour:
    """One forward pass of `ckpt`'s model over `text`, as steps (`layer`, `head`: 0-based, clamped)."""
    n_layers, n_heads = track_shape(ckpt)
    text, notices = visitor_text(text)
    (text,) = read_texts([text])  # as the models read it (both tracks and the result show it)
    if not text:
        raise DemoError(EMPTY_TEXT)
    run_pass, make_steps, _ = TRACKS[ckpt.name]
    layer_i, head_i = _index(layer, n_layers, "layer", notices), _index(head, n_heads, "head", notices)
    p, more = run_pass(ckpt, text, layer_i)
    steps = make_steps(p, head_i)
    keys = [s.key for s in steps]
    overview = [(label.format(n=n_layers), keys.index(key)) for label, key in OVERVIEW[ckpt.name]]
    if toy:
        more.append(TOY_NOTE)
    result = Tour(ckpt.name, toy, text, layer_i, head_i, n_layers, n_heads, steps, overview, notices + more)
    if ckpt.name == LM:
        top = torch.softmax(p.values["next_logits"], -1).topk(TOP_TOKENS)  # the model's own distribution
        result.top_tokens = [(p.extra["tokenizer"].decode_token(int(i)), float(q))
                             for q, i in zip(top.values, top.indices, strict=True)]
    else:
        result.label_probabilities = dict(zip(p.extra["labels"], p.values["label_log_probs"].exp().tolist(),
                                              strict=True))
    return result


def tour_json(t: Tour) -> dict:
    """What the `/tour` API returns: the steps with their code ranges and checks, and the outcome.

    A code range names its file under "file", not "path": `gradio_client` takes any dict with a
    "path" string in an output for a file to download, and fails on it."""
    steps = []
    for s in t.steps:
        code = s.code()
        steps.append({"title": s.title, "explanation": s.explanation, "formula": s.formula, "shape": s.shape,
                      "code": code and {"file": code.path, "first_line": code.first_line, "last_line": code.last_line},
                      "checks": [{"what": c.what, "error": c.error, "ok": c.ok} for c in s.checks]})
    out = {"model": t.model, "toy": t.toy, "layer": t.layer, "head": t.head, "steps": steps, "notices": t.notices}
    if t.model == LM:
        out["top_tokens"] = [[token, p] for token, p in t.top_tokens]
    else:
        out["label_probabilities"] = t.label_probabilities
    return out

"""Everything the demo computes, as plain Python: no Gradio here, so each tab's logic can be unit
tested, benchmarked and reused without a server.

`DemoService` loads the checkpoints once (at start-up, on CUDA when there is one) and offers one
method per tab. Methods return small dataclasses; `demo.app` turns them into components.

Robustness rules every method follows, because the caller is an anonymous web visitor:
- Input text is cleaned (`clean_text`): non-strings, lone surrogates (which JSON can carry but
  UTF-8 cannot encode) and absurd lengths are handled up front.
- Anything the visitor can fix (empty input, a missing checkpoint) raises `DemoError` with a
  sentence meant for them; the UI shows it as a notice, never as an error box.
- Out-of-range settings are clamped and the clamp is explained in `notices`, never raised.
- Messages never contain absolute file system paths (see `_scrub`).
"""

import json
import logging
import math
import random
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from model import DecoderOnlyLM, EncoderDecoder, GenerationConfig, load_pretrained, resolve_device
from storage import CONFIG_NAME, CURVE_NAME, METRICS_NAME, TOKENIZER_NAME
from tokenization import BPETokenizer, truncate
from tokenization import clean_text as model_text  # the clean-up training applied

log = logging.getLogger(__name__)

LM, SENTIMENT = "lm", "sentiment"  # sub-directories of the checkpoints directory

MAX_INPUT_CHARS = 20_000  # far beyond any context; only stops a visitor from pasting a book
MAX_NEW_TOKENS = 512
MAX_TEMPERATURE = 5.0
MIN_TOP_P = 0.01
MAX_ATTENTION_TOKENS = 64  # beyond this a heatmap's labels are unreadable
MAX_TOKENIZER_PIECES = 2_000  # pieces rendered in the tokenizer tab (all are counted)
MAX_CURVE_BYTES = 5_000_000

EMPTY_PROMPT = "Type the opening of a movie review first, e.g. *“This movie was”*."
EMPTY_REVIEW = "Paste or type a movie review to classify first."
EMPTY_TEXT = "Type some text first."

ATTENTION_KINDS: dict[str, tuple[str, str, str]] = {
    # key: (checkpoint, AttentionMap.kind, label)
    "lm_self": (LM, "decoder_self", "LM self-attention (masked)"),
    "encoder_self": (SENTIMENT, "encoder_self", "Encoder self-attention"),
    "cross": (SENTIMENT, "cross", "Decoder cross-attention (label → review)"),
    "decoder_self": (SENTIMENT, "decoder_self", "Decoder self-attention (masked)"),
}
CAUSAL_KINDS = {"lm_self", "decoder_self"}


class DemoError(Exception):
    """A problem the visitor can understand (and usually fix); the message is shown as is."""


# ---------------------------------------------------------------------------------------------
# results


@dataclass
class TokenView:
    """One generated token as shown to the visitor: its text, probability and alternatives."""

    token: str
    prob: float
    alternatives: list[tuple[str, float]]


@dataclass
class ChatUpdate:
    """The state of a streamed continuation after each new token."""

    text: str  # the continuation so far
    steps: list[TokenView]
    notices: list[str]
    done: bool = False
    seed: int | None = None


@dataclass
class SentimentResult:
    probabilities: dict[str, float]  # label -> probability, sums to 1
    label: str
    highlights: list[tuple[str, float | None]]  # review segments with attention in [0, 1]
    notices: list[str]


@dataclass
class AttentionResult:
    kind: str
    title: str
    layer: int
    n_layers: int
    n_heads: int
    query_tokens: list[str]
    key_tokens: list[str]
    weights: np.ndarray  # (H, T_q, T_k), rows sum to 1
    causal: bool  # True: the upper triangle is masked by construction, not learned
    notices: list[str]


@dataclass
class TokenizeResult:
    pieces: list[tuple[str, int]]  # (piece text, id), at most MAX_TOKENIZER_PIECES
    count: int  # all tokens, even those not listed
    characters: int
    notices: list[str]


@dataclass
class CheckpointInfo:
    """What the header and the About tab say about one checkpoint."""

    name: str
    location: str  # relative, for display: never an absolute path
    status: str  # "ready", "missing" or "error"
    message: str = ""
    model_type: str | None = None
    parameters: int | None = None
    config: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    training_curve_png: bytes | None = None

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def trained(self) -> bool:
        """A training run writes metrics.json next to the weights; without it, assume random init."""
        return bool(self.metrics)


# ---------------------------------------------------------------------------------------------
# helpers


def clean_text(text: object) -> tuple[str, list[str]]:
    """Make any visitor input safe to tokenize; return the text and notices about changes."""
    if text is None:
        return "", []
    if not isinstance(text, str):
        text = str(text)
    notices = []
    safe = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> "?"
    if safe != text:
        notices.append("Some characters were not valid Unicode and were replaced by “?”.")
    if len(safe) > MAX_INPUT_CHARS:
        notices.append(f"The text was cut to its first {MAX_INPUT_CHARS:,} characters.")
        safe = safe[:MAX_INPUT_CHARS]
    return safe, notices


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])(?:/[\w.@+~-]+)+/(?=[\w.@+~-])")  # not URLs, not relative


def scrub_paths(text: str) -> str:
    """Hide the directories of absolute paths (`/home/me/data/imdb` -> `…/imdb`): metrics.json
    records the training command and data source, which may name the trainer's file system."""
    return _ABSOLUTE_PATH.sub("…/", text)


_CONTROL_PICTURES = {"\n": "↵", "\t": "⇥", "\r": "␍", "\x7f": "␡"}


def visible(token: str, show_spaces: bool = False) -> str:
    """Token text with control characters (NUL, newline, ...) replaced by visible symbols.

    Heatmap labels also show spaces as "␣": " the" and "the" are different tokens and a plain
    space at the start of a rotated label would be invisible.
    """
    out = []
    for ch in token:
        if ch in _CONTROL_PICTURES:
            out.append(_CONTROL_PICTURES[ch])
        elif ord(ch) < 32:
            out.append(chr(0x2400 + ord(ch)))  # U+2400 block: ␀ ␁ ...
        elif ch == " " and show_spaces:
            out.append("␣")
        else:
            out.append(ch)
    return "".join(out)


def _number(value: object, default: float) -> float:
    """Read a UI/API number; None, text and NaN fall back to the default."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    return default if math.isnan(x) else x


def serving_device(choice: str | None) -> tuple[str, str | None]:
    """`model.resolve_device`, except that CUDA asked for and missing falls back to CPU with a
    notice instead of an error, so the same command works on a CPU Space and a GPU one."""
    choice = (choice or "auto").lower()
    if choice.startswith("cuda") and not torch.cuda.is_available():
        return "cpu", "CUDA was requested but is not available: running on CPU."
    return resolve_device(choice), None


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's `bytes_to_unicode`, the byte <-> printable character map that
    byte-level BPE uses to store tokens as strings in tokenizer.json."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


_BYTE_DECODER = _byte_decoder()


def token_label(tokenizer: BPETokenizer, token_id: int) -> str:
    """Display text of one token id.

    A token holding only part of a multibyte character (byte-level BPE splits emoji and CJK)
    decodes to U+FFFD, which would make all such tokens look alike; it is shown as its bytes
    instead, e.g. `⟨f0 9f⟩`. Ids the tokenizer lacks (a padded vocabulary) show as `<id>`.
    """
    try:
        text = tokenizer.decode_token(token_id)
    except ValueError:
        return f"<{token_id}>"
    if "\ufffd" in text:
        raw = tokenizer.tokenizer.id_to_token(token_id) or ""
        if raw and all(ch in _BYTE_DECODER for ch in raw):
            data = bytes(_BYTE_DECODER[ch] for ch in raw)
            if data.decode("utf-8", "replace") == text:  # genuinely partial, not a literal U+FFFD
                return "⟨" + " ".join(f"{b:02x}" for b in data) + "⟩"
    return text


def merge_spans(text: str, pieces: list, scores: list[float]) -> list[tuple[str, float | None]]:
    """Review segments with the summed score of their tokens; text no piece covers scores None.

    Byte-level BPE can split one character (an emoji, a CJK character) across tokens whose
    character spans overlap; such tokens are merged into one segment. Text between pieces (the
    middle that head + tail truncation skipped) and after the last piece (a cut end) becomes an
    unscored segment, so the segments always tile the text exactly and nothing shows as U+FFFD.
    """
    groups: list[list] = []  # [start, end, score]
    for piece, score in zip(pieces, scores, strict=True):
        if groups and piece.start < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], piece.end)
            groups[-1][2] += score
        else:
            if groups and piece.start > groups[-1][1]:
                groups.append([groups[-1][1], piece.start, None])
            groups.append([piece.start, piece.end, score])
    end = groups[-1][1] if groups else 0
    if end < len(text):
        groups.append([end, len(text), None])
    return [(text[start:end], score) for start, end, score in groups]


# ---------------------------------------------------------------------------------------------
# the service


class DemoService:
    """Loads the checkpoints once and answers every tab. Thread-safe: models are only read
    (eval mode, no dropout) and every request builds its own tensors, caches and RNG."""

    def __init__(self, checkpoints: str | Path, device: str = "auto"):
        self.root = Path(checkpoints)
        self.device, device_notice = serving_device(device)
        self.notices = [device_notice] if device_notice else []
        if not self.root.is_dir():
            self.notices.append(f"No checkpoints directory `{self.root.name}/` found.")
        shared_tokenizer, _ = self._load_tokenizer(self.root)
        self.lm, self.lm_tokenizer, self.lm_info = self._load_checkpoint(LM, DecoderOnlyLM, shared_tokenizer)
        self.sentiment, self.sentiment_tokenizer, self.sentiment_info = self._load_checkpoint(
            SENTIMENT, EncoderDecoder, shared_tokenizer)
        # the Tokenizer tab shows the shared tokenizer, else whichever a model brought
        self.tokenizer = shared_tokenizer or self.lm_tokenizer or self.sentiment_tokenizer

    # -- loading ------------------------------------------------------------------------------

    def _scrub(self, message: str) -> str:
        """Replace the checkpoints path in an error message by its short display name (longest
        spelling first), then shorten any other absolute path."""
        prefixes = {str(self.root.resolve()), str(self.root.absolute()), str(self.root)} - {"", "."}
        for prefix in sorted(prefixes, key=len, reverse=True):
            message = message.replace(prefix, self.root.name)
        return scrub_paths(message)

    def _load_tokenizer(self, directory: Path) -> tuple[BPETokenizer | None, str]:
        if not (directory / TOKENIZER_NAME).is_file():
            return None, f"no {TOKENIZER_NAME}"
        try:
            return BPETokenizer.from_file(directory / TOKENIZER_NAME), ""
        except Exception as e:  # a broken file must not stop the app from starting
            log.exception("could not load %s", directory / TOKENIZER_NAME)
            return None, self._scrub(f"{TOKENIZER_NAME} could not be read: {e}")

    def _load_checkpoint(self, name: str, cls: type, shared_tokenizer: BPETokenizer | None):
        directory = self.root / name
        info = CheckpointInfo(name=name, location=f"{self.root.name}/{name}", status="missing")
        if not (directory / CONFIG_NAME).is_file():
            info.message = f"no checkpoint in `{info.location}/` (train one, see About)"
            return None, None, info
        info.metrics = self._read_metrics(directory)
        curve = directory / CURVE_NAME
        if curve.is_file() and curve.stat().st_size <= MAX_CURVE_BYTES:
            info.training_curve_png = curve.read_bytes()
        tokenizer, why = self._load_tokenizer(directory)
        tokenizer = tokenizer or shared_tokenizer
        try:
            if tokenizer is None:
                raise DemoError(f"no tokenizer ({why}, and none shared in `{self.root.name}/`)")
            model = load_pretrained(directory, self.device)
            if not isinstance(model, cls):
                raise DemoError(f"`{info.location}` holds a {model.model_type!r} model, "
                                f"expected {cls.model_type!r}")
            if tokenizer.vocab_size > model.config.vocab_size:
                raise DemoError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model "
                                f"only {model.config.vocab_size}: they were not trained together")
        except Exception as e:
            if not isinstance(e, DemoError):
                log.exception("could not load checkpoint %s", directory)
            info.status, info.message = "error", self._scrub(str(e))
            return None, None, info
        info.status, info.model_type = "ready", model.model_type
        info.parameters = model.num_parameters()
        info.config = {k: v for k, v in vars(model.config).items()}
        if not info.trained:
            info.message = f"no {METRICS_NAME}: probably untrained (random weights), expect gibberish"
        return model, tokenizer, info

    def _read_metrics(self, directory: Path) -> dict:
        path = directory / METRICS_NAME
        if not path.is_file():
            return {}
        try:
            metrics = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("unreadable %s", path)
            return {}
        return metrics if isinstance(metrics, dict) else {}

    # -- shared -------------------------------------------------------------------------------

    @property
    def checkpoints(self) -> list[CheckpointInfo]:
        return [self.lm_info, self.sentiment_info]

    def device_description(self) -> str:
        if self.device == "cuda":
            return f"CUDA ({torch.cuda.get_device_name(0)})"
        n = torch.get_num_threads()
        return f"CPU ({n} thread{'s' if n > 1 else ''})"

    def _require(self, name: str):
        model, tokenizer, info = {
            LM: (self.lm, self.lm_tokenizer, self.lm_info),
            SENTIMENT: (self.sentiment, self.sentiment_tokenizer, self.sentiment_info),
        }[name]
        if model is None:
            what = "language model" if name == LM else "sentiment model"
            raise DemoError(f"The {what} is not available: {info.message}.")
        return model, tokenizer

    def warmup(self) -> None:
        """One tiny forward pass per model, so the first visitor does not pay for lazy set-up."""
        with torch.inference_mode():
            if self.lm is not None:
                self.lm(torch.tensor([[self.lm.config.bos_token_id]], device=self.device))
            if self.sentiment is not None:
                c = self.sentiment.config
                ids = torch.tensor([[c.eos_token_id]], device=self.device)
                self.sentiment(ids, torch.tensor([[c.bos_token_id]], device=self.device))

    # -- chat ---------------------------------------------------------------------------------

    def generation_config(self, max_new_tokens=64, temperature=0.8, top_k=None, top_p=None,
                          seed=None) -> tuple[GenerationConfig, list[str]]:
        """Clamp visitor settings into a valid `GenerationConfig`, explaining every change."""
        notices = []
        vocab = self.lm.config.vocab_size if self.lm is not None else None

        n = int(round(_number(max_new_tokens, 64)))
        if n < 1:
            notices.append("Max new tokens must be at least 1: using 1.")
            n = 1
        elif n > MAX_NEW_TOKENS:
            notices.append(f"Max new tokens is capped at {MAX_NEW_TOKENS}.")
            n = MAX_NEW_TOKENS

        t = _number(temperature, 0.8)
        if t <= 0:
            notices.append("Temperature ≤ 0 means greedy decoding: always the most likely token.")
            t = 0.0
        elif t > MAX_TEMPERATURE:
            notices.append(f"Temperature is capped at {MAX_TEMPERATURE:g}.")
            t = MAX_TEMPERATURE

        k = _number(top_k, 0)
        k = None if math.isinf(k) else int(round(k))
        if k is not None and k < 0:
            notices.append("Top-k below 0 is not meaningful: top-k is off.")
        if k is not None and k < 1:
            k = None  # 0 = off, as in the slider
        if k is not None and vocab is not None and k >= vocab:
            if k > vocab:
                notices.append(f"Top-k {k} exceeds the vocabulary ({vocab} tokens): top-k is off.")
            k = None

        p = _number(top_p, 1.0)
        if p <= 0:
            notices.append(f"Top-p must be above 0 (0 would keep no token): using {MIN_TOP_P}, "
                           "which keeps only the most likely token(s).")
            p = MIN_TOP_P
        elif p > 1:
            notices.append("Top-p above 1 is the same as 1: top-p is off.")
        p = None if p >= 1 else p

        s = _number(seed, -1)
        s = random.randrange(2**31) if s < 0 or math.isinf(s) else int(s) % 2**63

        eos = self.lm.config.eos_token_id if self.lm is not None else None
        config = GenerationConfig(max_new_tokens=n, temperature=t, top_k=k, top_p=p, seed=s,
                                  eos_token_id=eos, num_alternatives=5)
        return config, notices

    def stream_continuation(self, prompt: object, max_new_tokens=64, temperature=0.8, top_k=None,
                            top_p=None, seed=None) -> Iterator[ChatUpdate]:
        """Continue the visitor's review, yielding after every token.

        The prompt is `[bos] + encode(text)`, as in training. A prompt too long for the context
        keeps its *end* (the part being continued), leaving room for the reply. Inference mode
        is entered per step inside `model.stream`, never held across a `yield`: Gradio may resume
        this generator on a different worker thread, and grad mode is thread-local.
        """
        model, tok = self._require(LM)
        text, notices = clean_text(prompt)
        text = model_text(text)
        if not text:
            raise DemoError(EMPTY_PROMPT)
        config, clamp_notices = self.generation_config(max_new_tokens, temperature, top_k, top_p, seed)
        notices += clamp_notices
        ids = tok.encode(text)
        block = model.config.block_size
        room = min(config.max_new_tokens, block // 2)
        keep = block - room - 1  # -1 for bos
        if len(ids) > keep:
            notices.append(f"Your text is {len(ids)} tokens; the model reads {block} at a time, so it "
                           f"sees only the last {keep} (leaving room for {room} new ones).")
            ids = ids[-keep:]
        input_ids = torch.tensor([[tok.bos_id, *ids]], device=self.device)

        generated: list[int] = []
        steps: list[TokenView] = []
        for step in model.stream(input_ids, config):
            if step.token_id == config.eos_token_id:
                notices.append("The model ended the review (it produced the end-of-text token).")
                break
            generated.append(step.token_id)
            steps.append(TokenView(
                token=token_label(tok, step.token_id), prob=step.prob,
                alternatives=[(token_label(tok, i), p) for i, p in step.alternatives]))
            # a character split across tokens decodes to U+FFFD until its last byte arrives
            text_so_far = tok.decode(generated).rstrip("\ufffd")
            yield ChatUpdate(text_so_far, list(steps), list(notices), False, config.seed)
        yield ChatUpdate(tok.decode(generated), steps, notices, True, config.seed)

    def continue_text(self, prompt: object, **settings) -> ChatUpdate:
        """The whole continuation at once (the last update of `stream_continuation`)."""
        return deque(self.stream_continuation(prompt, **settings), maxlen=1)[0]

    # -- sentiment ----------------------------------------------------------------------------

    def _source(self, text: str, tok: BPETokenizer, max_len: int, what: str, keep_tail: int = 0):
        """Pieces and source ids `encode(text) + [eos]`, cut to `max_len` with eos kept last, the way
        training cut them (`truncate`: the head, or the head and the last `keep_tail` tokens)."""
        pieces = tok.pieces(text)
        notices = []
        if len(pieces) + 1 > max_len:
            tail = min(keep_tail, max_len - 1)
            read = f"the first {max_len - 1 - tail} and the last {tail}" if tail else f"the first {max_len - 1}"
            notices.append(f"The {what} is {len(pieces)} tokens; only {read} are read "
                           f"(the model's limit is {max_len} including the end token).")
            pieces = truncate(pieces, max_len - 1, keep_tail)
        ids = torch.tensor([[*(p.id for p in pieces), tok.eos_id]], device=self.device)
        return pieces, ids, notices

    def _label_candidates(self, model: EncoderDecoder, tok: BPETokenizer) -> tuple[list[str], list[list[int]]]:
        labels = list(model.config.labels or [])
        if len(labels) < 2:
            raise DemoError("The sentiment checkpoint lists no labels (config.json `labels`).")
        return labels, [tok.encode(label) for label in labels]

    def classify(self, text: object) -> SentimentResult:
        """Class probabilities and which review tokens the label step attended to.

        The model is text-to-text: the probability of each label is the softmax over the
        decoder's log-likelihoods of the label words. The highlight is the cross-attention of the
        decoder's first step (the one that predicts the label's first token), averaged over heads
        and layers, summed per visible segment and scaled so the strongest is 1.
        """
        model, tok = self._require(SENTIMENT)
        text, notices = clean_text(text)
        text = model_text(text)  # the highlight shows this text, so it tiles what the model read
        if not text:
            raise DemoError(EMPTY_REVIEW)
        pieces, src, cut_notices = self._source(text, tok, model.config.max_src_len, "review",
                                                model.config.src_keep_tail)
        notices += cut_notices
        labels, candidates = self._label_candidates(model, tok)
        with torch.inference_mode():
            probs = model.score_candidates(src, candidates).float().softmax(-1)[0].cpu()
            best = int(probs.argmax())
            tgt = torch.tensor([[model.config.bos_token_id, *candidates[best]]], device=self.device)
            maps = model(src, tgt, output_attentions=True).attentions
            cross = torch.stack([m.weights[0, :, 0, :] for m in maps if m.kind == "cross"])  # (L, H, S)
            weights = cross.float().mean(dim=(0, 1)).cpu().tolist()  # (S,)
        highlights = merge_spans(text, pieces, weights[: len(pieces)])  # unread text scores None
        top = max((w for _, w in highlights if w is not None), default=0.0)
        highlights = [(segment, w if w is None or top == 0 else round(w / top, 4)) for segment, w in highlights]
        return SentimentResult(dict(zip(labels, probs.tolist(), strict=True)), labels[best], highlights, notices)

    # -- attention ----------------------------------------------------------------------------

    def attention_kinds(self, model_name: str | None = None) -> list[tuple[str, str]]:
        """(label, key) of the attention kinds whose checkpoint is loaded."""
        loaded = {LM: self.lm is not None, SENTIMENT: self.sentiment is not None}
        return [(label, key) for key, (ckpt, _, label) in ATTENTION_KINDS.items()
                if loaded[ckpt] and (model_name is None or ckpt == model_name)]

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(number of layers, number of heads) for an attention kind."""
        if kind not in ATTENTION_KINDS:
            raise DemoError(f"Unknown attention kind {kind!r}.")
        ckpt = ATTENTION_KINDS[kind][0]
        model, _ = self._require(ckpt)
        c = model.config
        if ckpt == LM:
            return c.n_layer, c.n_head
        return (c.n_encoder_layer if kind == "encoder_self" else c.n_decoder_layer), c.n_head

    def attention(self, text: object, kind: str = "lm_self", layer: object = 0) -> AttentionResult:
        """All heads' attention weights of one layer, with the tokens for both axes."""
        n_layers, n_heads = self.attention_shape(kind)
        ckpt, map_kind, title = ATTENTION_KINDS[kind]
        model, tok = self._require(ckpt)
        text, notices = clean_text(text)
        text = model_text(text)
        if not text:
            raise DemoError(EMPTY_TEXT)
        layer_i = int(round(_number(layer, 0)))
        if not 0 <= layer_i < n_layers:
            notices.append(f"Layer {layer_i} does not exist (0 to {n_layers - 1}): showing the nearest.")
            layer_i = min(max(layer_i, 0), n_layers - 1)

        with torch.inference_mode():
            if ckpt == LM:
                limit = min(model.config.block_size, MAX_ATTENTION_TOKENS)
                ids = [tok.bos_id, *tok.encode(text)]
                if len(ids) > limit:
                    notices.append(f"The text is {len(ids)} tokens with the start token; the heatmap "
                                   f"shows the first {limit}.")
                    ids = ids[:limit]
                maps = model(torch.tensor([ids], device=self.device), output_attentions=True).attentions
                query_ids = key_ids = ids
            else:
                limit = min(model.config.max_src_len, MAX_ATTENTION_TOKENS)
                _, src, cut = self._source(text, tok, limit, "text")
                notices += [n + " (heatmap limit)" if limit < model.config.max_src_len else n for n in cut]
                labels, candidates = self._label_candidates(model, tok)
                best = int(model.score_candidates(src, candidates).argmax(-1)[0])
                tgt_ids = [model.config.bos_token_id, *candidates[best]]
                maps = model(src, torch.tensor([tgt_ids], device=self.device), output_attentions=True).attentions
                src_ids = src[0].tolist()
                query_ids = src_ids if kind == "encoder_self" else tgt_ids
                key_ids = tgt_ids if kind == "decoder_self" else src_ids
                if kind != "encoder_self":
                    notices.append(f"The decoder rows are the start token and the predicted label "
                                   f"“{labels[best]}”.")
            weights = next(m.weights for m in maps if m.kind == map_kind and m.layer == layer_i)
            weights = weights[0].float().cpu().numpy()  # (H, T_q, T_k)

        return AttentionResult(
            kind=kind, title=title, layer=layer_i, n_layers=n_layers, n_heads=n_heads,
            query_tokens=[visible(token_label(tok, i), show_spaces=True) for i in query_ids],
            key_tokens=[visible(token_label(tok, i), show_spaces=True) for i in key_ids],
            weights=weights, causal=kind in CAUSAL_KINDS, notices=notices)

    # -- tokenizer ----------------------------------------------------------------------------

    def tokenize(self, text: object) -> TokenizeResult:
        """The BPE pieces of any text with their ids (the piece texts concatenate to the text,
        except that a character split across tokens shows as U+FFFD in each part)."""
        if self.tokenizer is None:
            raise DemoError(f"No tokenizer found in `{self.root.name}/`.")
        text, notices = clean_text(text)
        if not text:
            raise DemoError(EMPTY_TEXT)
        pieces = self.tokenizer.pieces(text)
        if len(pieces) > MAX_TOKENIZER_PIECES:
            notices.append(f"{len(pieces):,} tokens: showing the first {MAX_TOKENIZER_PIECES:,}.")
        shown = [(token_label(self.tokenizer, p.id), p.id) for p in pieces[:MAX_TOKENIZER_PIECES]]
        return TokenizeResult(shown, len(pieces), len(text), notices)

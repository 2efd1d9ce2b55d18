"""`DemoService`: the checkpoints, loaded once, and one method per tab, as plain Python.

No Gradio here, so every tab's logic can be unit tested, benchmarked and reused without a
server. The logic itself lives in one module per tab (`demo.chat`, `demo.sentiment`,
`demo.attention`, `demo.tokens`); the service holds what they share: the two `Checkpoint`
records, the device and the one compute budget every request draws on (`demo.budget`).

Robustness rules every method follows, because the caller is an anonymous web visitor:
- Input text is cleaned (`demo.inputs.visitor_text`): non-strings, lone surrogates and absurd
  lengths are handled up front; numbers are read with `read_number` (no NaN, no ±inf).
- Anything the visitor can fix (empty input, a missing checkpoint) raises `DemoError` with a
  sentence meant for them; the UI shows it as a notice, never as an error box.
- Out-of-range settings are clamped and the clamp is explained in `notices`, never raised.
- Messages never contain absolute file system paths.
"""

import contextlib
import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import torch

from demo import ablation, chat, compare, lens, qk, sampling, sentiment, snapshots, token_explain, tokens, tour
from demo.attention import ATTENTION_KINDS, AttentionResult, attention_kind, attention_maps, attention_shape
from demo.budget import ComputeBudget, machine_slots
from demo.checkpoint import LM, SENTIMENT, Checkpoint, Scrubber, load_checkpoint, load_tokenizer
from demo.inputs import DemoError
from demo.toy import toy_checkpoint
from model import autocast, resolve_device, resolve_precision

MAX_WAITING = 64  # requests waiting for a compute slot before new ones are told "busy"
MAX_HEAVY_WAITING = 8  # explanations waiting for their turn before new ones are told "busy"
PRECISION_ENV = "DEMO_PRECISION"  # the Space's override of `--precision` (auto | fp32 | bf16)


def serving_device(choice: str | None) -> tuple[str, str | None]:
    """`model.resolve_device`, except that CUDA asked for and missing falls back to CPU with a
    notice instead of an error, so the same command works on a CPU Space and a GPU one."""
    choice = (choice or "auto").lower()
    if choice.startswith("cuda") and not torch.cuda.is_available():
        return "cpu", "CUDA was requested but is not available: running on CPU."
    return resolve_device(choice), None


class DemoService:
    """Loads the checkpoints once and answers every tab. Thread-safe: models are only read
    (eval mode, no dropout) and every request builds its own tensors, caches and RNG."""

    def __init__(self, checkpoints: str | Path, device: str = "auto", slots: int | None = None,
                 max_waiting: int = MAX_WAITING, precision: str | None = None, models: dict[str, str] | None = None):
        """`models`: {LM or SENTIMENT: a run folder, checkpoint folder or Hub id} served instead of the
        one in `checkpoints` (`python -m demo --lm PATH --sentiment PATH`), each with the tokenizer
        beside its weights."""
        self.root, models = Path(checkpoints), models or {}
        self.device, device_notice = serving_device(device)
        # bfloat16 for the batched passes (classifier, attention maps, attributions, logit lens) where the
        # hardware multiplies it natively; generation's single-row steps stay float32 (bf16 gains nothing there)
        self.precision = resolve_precision(precision or os.environ.get(PRECISION_ENV, "auto"), self.device)
        self.notices = [device_notice] if device_notice else []
        self.budget = ComputeBudget(slots or machine_slots(), max_waiting)
        # explanations take seconds (integrated gradients on a 1,024-token review: tens of seconds on
        # one busy core): they never hold every slot, so chats and classifications keep moving
        self.heavy = ComputeBudget(max(1, self.budget.slots - 1), MAX_HEAVY_WAITING)
        if not self.root.is_dir():
            self.notices.append(f"No checkpoints directory `{self.root.name}/` found.")
        shared_tokenizer, _ = load_tokenizer(self.root, Scrubber(self.root))
        self.lm = load_checkpoint(self.root, LM, self.device, shared_tokenizer, models.get(LM))
        self.sentiment = load_checkpoint(self.root, SENTIMENT, self.device, shared_tokenizer, models.get(SENTIMENT))
        # the Tokenizer tab shows the tokenizer of a model named on the command line, else the shared one,
        # else whichever a model brought
        named = [c.tokenizer for c in self.checkpoints if c.name in models]
        self.tokenizer = next((t for t in [*named, shared_tokenizer, self.lm.tokenizer, self.sentiment.tokenizer]
                               if t is not None), None)
        self.snapshots = snapshots.find(self.lm, self.root, self.device)  # the "watch it learn" tab's, or None

    @property
    def checkpoints(self) -> list[Checkpoint]:
        return [self.lm, self.sentiment]

    def checkpoint(self, name: str) -> Checkpoint:
        return {LM: self.lm, SENTIMENT: self.sentiment}[name]

    def device_description(self) -> str:
        if self.device == "cuda":
            return f"CUDA ({torch.cuda.get_device_name(0)})"
        n = torch.get_num_threads()
        return f"CPU ({n} thread{'s' if n > 1 else ''})"

    def _batched(self) -> contextlib.AbstractContextManager:
        """The precision of the batched passes: bfloat16 autocast when `self.precision` is "bf16"."""
        return autocast(self.device, self.precision)

    def warmup(self) -> None:
        """One pass through every tab's computation, so the first visitor pays for no lazy set-up."""
        if self.lm.ready:
            self.continue_text("This movie was", max_new_tokens=2, temperature=0)
            self.tour("This movie was")  # the page opens on it: its source lines and vocabulary labels, read once
        if self.sentiment.ready:
            self.classify("A fine film.")

    # -- chat -------------------------------------------------------------------------------

    def generation_config(self, max_new_tokens=64, temperature=0.8, top_k=None, top_p=None, seed=None):
        """Visitor settings clamped into a valid `GenerationConfig`, and notices explaining each change."""
        config = self.lm.model.config if self.lm.model is not None else None
        return chat.generation_config(config and config.vocab_size, config and config.eos_token_id,
                                      max_new_tokens, temperature, top_k, top_p, seed)

    def stream_continuation(self, prompt: object, max_new_tokens=64, temperature=0.8, top_k=None, top_p=None,
                            seed=None) -> Iterator[chat.ChatUpdate]:
        """Continue the visitor's review, yielding after every token (see `demo.chat`)."""
        return chat.stream_continuation(self.lm, self.budget, prompt, max_new_tokens, temperature, top_k, top_p,
                                        seed)

    def continue_text(self, prompt: object, **settings) -> chat.ChatUpdate:
        """The whole continuation at once (the last update of `stream_continuation`)."""
        return deque(self.stream_continuation(prompt, **settings), maxlen=1)[0]

    def logit_lens(self, token_ids, n_generated: int) -> lens.LensView:
        """Each layer's prediction before each generated token (see `demo.lens`)."""
        with self.budget.slot():
            with self._batched():
                return lens.lens_view(self.lm, token_ids, n_generated)

    def sampling_view(self, generated, step, temperature=0.8, top_k=None, top_p=None) -> sampling.SamplingView:
        """How one step of the last continuation was sampled (see `demo.sampling`)."""
        with self.budget.slot():
            return sampling.sampling_view(self.lm, generated, step, temperature, top_k, top_p)

    def explain_token(self, text: object, position: object, method: object,
                      alternative: object = None) -> token_explain.TokenExplanation:
        """Why the LM wrote token `position` of `text` (see `demo.token_explain`)."""
        with self.heavy.slot(), self.budget.slot():
            return token_explain.explain_text(self.lm, text, position, method, alternative)

    def explain_step(self, generated, step, method: object, alternative: object = None):
        """Why the LM wrote step `step` of the last continuation (see `demo.token_explain`)."""
        with self.heavy.slot(), self.budget.slot():
            return token_explain.explain_step(self.lm, generated, step, method, alternative)

    # -- sentiment ----------------------------------------------------------------------------

    def classify(self, text: object) -> sentiment.SentimentResult:
        with self.budget.slot():
            with self._batched():
                return sentiment.classify(self.sentiment, text)

    def explain(self, text: object, method: object) -> sentiment.Explanation:
        with self.heavy.slot(), self.budget.slot():
            with self._batched():
                return sentiment.explain(self.sentiment, text, method)

    def agreement(self, text: object) -> tuple[list[str], list[list[float]]]:
        with self.heavy.slot(), self.budget.slot():
            with self._batched():
                return sentiment.agreement(self.sentiment, text)

    def compare_reviews(self, text_a: object, text_b: object, method: object) -> compare.Comparison:
        """Two versions of a review side by side (see `demo.compare`)."""
        with self.heavy.slot(), self.budget.slot():
            with self._batched():
                return compare.compare(self.sentiment, text_a, text_b, method)

    # -- attention ----------------------------------------------------------------------------

    def attention_kinds(self, model_name: str | None = None) -> list[tuple[str, str]]:
        """(label, key) of the attention kinds whose checkpoint is loaded."""
        return [(spec.title, key) for key, spec in ATTENTION_KINDS.items()
                if self.checkpoint(spec.checkpoint).ready and model_name in (None, spec.checkpoint)]

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(number of layers, number of heads) for an attention kind."""
        spec = attention_kind(kind)
        return attention_shape(self.checkpoint(spec.checkpoint), kind)

    def attention(self, text: object, kind: str = "lm_self", layer: object = 0) -> AttentionResult:
        spec = attention_kind(kind)
        with self.budget.slot():
            with self._batched():
                return attention_maps(self.checkpoint(spec.checkpoint), text, kind, layer)

    def query_key(self, text: object, kind: str = "lm_self", layer: object = 0, head: object = 0,
                  query: object = 0) -> qk.QueryKeyView:
        """One head's q·k/√d_k and softmax for one query token (see `demo.qk`)."""
        spec = attention_kind(kind)
        with self.budget.slot():
            return qk.query_key(self.checkpoint(spec.checkpoint), text, kind, layer, head, query)

    # -- the tour -----------------------------------------------------------------------------

    def tour_checkpoint(self, model_name: object, toy: bool = False) -> Checkpoint:
        """The model the tour follows: a served one, or its toy (`demo.toy`)."""
        ckpt = self._model_checkpoint(model_name)
        return toy_checkpoint(ckpt.name) if toy else ckpt

    def tour(self, text: object, model_name: object = LM, layer: object = 0, head: object = 0,
             toy: object = False) -> tour.Tour:
        """One forward pass as the "How it works" steps (see `demo.tour`); `toy`: the toy model instead."""
        toy = toy is True or str(toy).lower() == "true"  # an API caller's "false" is not a toy
        ckpt = self.tour_checkpoint(model_name, toy)
        with self.budget.slot():
            return tour.tour(ckpt, text, layer, head, toy)

    # -- head ablation ------------------------------------------------------------------------

    def _model_checkpoint(self, model_name: object) -> Checkpoint:
        if model_name not in (LM, SENTIMENT):
            raise DemoError(f"Unknown model {str(model_name)[:20]!r}: choose {LM!r} or {SENTIMENT!r}.")
        return self.checkpoint(model_name)  # type: ignore[arg-type]

    def head_names(self, model_name: object) -> list[str]:
        """Every head of a model, as the ablation panel names them (see `demo.ablation`)."""
        return ablation.head_names(self._model_checkpoint(model_name))

    def ablate(self, model_name: object, text: object, heads: object, mode: object = "zero") -> ablation.AblationResult:
        with self.budget.slot():
            return ablation.ablate_heads(self._model_checkpoint(model_name), text, heads, mode)

    def rank_heads(self, model_name: object, text: object, mode: object = "zero") -> ablation.HeadRanking:
        with self.heavy.slot(), self.budget.slot():
            return ablation.rank_heads(self._model_checkpoint(model_name), text, mode)

    # -- watch it learn -----------------------------------------------------------------------

    def learning(self, index: object, prompt: object, sampled: object = False, layer: object = None
                 ) -> snapshots.LearningView:
        """One snapshot of a training run answering the prompt (see `demo.snapshots`)."""
        if self.snapshots is None:
            raise DemoError(snapshots.NO_SNAPSHOTS)
        return snapshots.learning_view(self.snapshots, self.budget, self._batched, index, prompt, sampled, layer)

    # -- tokenizer ----------------------------------------------------------------------------

    def tokenize(self, text: object) -> tokens.TokenizeResult:
        if self.tokenizer is None:
            raise DemoError(f"No tokenizer found in `{self.root.name}/`.")
        return tokens.tokenize(self.tokenizer, text)

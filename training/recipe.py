"""Fine-tuning options that fight memorisation, each off by default and recorded in metrics.json.

The shipped classifier memorises its 22,500 training reviews within about two epochs. These are
the standard remedies, each small and separately switchable so that the selection rows can say
which ones help:

- layer-wise learning-rate decay (ULMFiT's discriminative fine-tuning, Howard & Ruder 2018): the
  decoder trains at the full rate, each encoder layer below the top at `layer_decay` times the
  rate of the one above, the embeddings lowest;
- gradual unfreezing (ULMFiT): only the top group trains at first, one more group every
  `unfreeze_every` steps, top down;
- label smoothing of the target-token loss (Szegedy et al. 2016);
- adversarial training on the source embeddings (FGM: Goodfellow et al. 2015, as applied to text
  by Miyato et al. 2017): the loss is also taken at embeddings moved by `adversarial_eps` along the
  normalised gradient of the loss, the direction that hurts most;
- averaging the weights of the last `average_last` evaluation points (checkpoint averaging);
- random short crops: a fraction `crop_prob` of the training reviews is replaced by one to three
  contiguous sentences of the review, with its label, so that a one-line review is in distribution;
- evidence rows: each distinct snippet of the evidence caches joins the training rows as a row of
  its own, `evidence_copies` times, with its label: where `evidence_prob` draws snippets in proportion
  to how many reviews gave them ("Bad." 2,812 times, "Terrific." 28) and only in place of a review in a
  batch of reviews (about a dozen rows of 4,096 tokens), a row of its own is batched with rows of its
  length, so one step reads hundreds of them and every snippet is read each epoch;
- sentence rows: each training review's first and last sentence join the training rows as examples
  of their own, with the review's label, `sentence_copies` times each (the short-text check's own
  kind of text, `training.heldout.short_texts`, taken from the training reviews): unlike a crop,
  such a row is batched with rows of its length, so a step of short rows costs what its tokens cost,
  and the copies set how much of each epoch is short text;
- pseudo-labelled reviews: the unlabeled reviews the shipped readers are confident of, with their
  verdict (`training.pseudo`, built beforehand into the file `pseudo_labels`; kept where the
  verdict's probability is at least `pseudo_confidence`), join the training rows: self-training,
  the student noised by the crops and dropout above;
- shouted crops: a fraction `shout_prob` of the crops is recased, a third of them one word of three
  letters or more in capitals, a third the whole crop in capitals, a third the whole crop in Title
  Case, so that "the acting was SUPERB" reads as "superb" does (a shouted word is rare in the
  reviews and splits into rare BPE pieces);
- a slanted triangular learning rate (ULMFiT, eq. 3): a short linear climb from lr / 32 to lr over
  the warmup steps, then a long linear decay back to lr / 32 at the last step, so that the model
  first moves quickly towards the task and then refines;
- warmup-stable-decay ("wsd": MiniCPM, Hu et al. 2024; Hägele et al. 2024, "Scaling Laws and
  Compute-Optimal Training Beyond Fixed Training Durations"): the linear warmup, then the peak rate
  held, and a decay only over the last `decay_fraction` of the steps, in Hägele et al.'s (1 - sqrt)
  shape, to the floor cosine ends at. Until the decay starts the rate does not depend on where the
  run ends, so a run sized to its time budget can re-fit its step count while it trains
  (`training.budget`), and a short run spends its steps at the peak rate;
- evidence snippets: a fraction `evidence_prob` is replaced by sentences, phrases and words that
  carried their review's label by the full-review classifier's own attribution
  (`training.evidence`, built beforehand into the caches `evidence`), each with its own label;
- an auxiliary language-model loss on the source (GPT-1's fine-tuning objective, Radford et al.
  2018, section 3.2): `lm_weight` x the next-token loss of a causal encoder's states, which keeps the
  encoder the language model it started as while the classifier trains on top of it.

More dropout is `--set dropout=0.2` (model config). Every option is a pure function of the step
and the seed, so `--resume` stays bit-exact.
"""

import re
import string
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model import IGNORE_INDEX, EncoderDecoder, PreTrainedModel, head_and_loss
from tokenization import sentences

from .data import PairSet
from .errors import UsageError

SCHEDULES = ("cosine", "stlr", "wsd")  # the learning-rate schedules (`training.schedules`)


@dataclass(frozen=True)
class Recipe:
    layer_decay: float = 1.0  # lr factor per encoder layer below the decoder (1 = off)
    unfreeze_every: int = 0  # steps between unfreezing one more layer group, top down (0 = off)
    label_smoothing: float = 0.0
    adversarial_eps: float = 0.0  # L2 size of the embedding perturbation per example (0 = off)
    average_last: int = 1  # average the weights of the last N evaluation points (1 = off)
    crop_prob: float = 0.0  # fraction of training reviews replaced by 1-3 contiguous sentences
    lm_weight: float = 0.0  # weight of the source's next-token loss (needs a causal encoder; 0 = off)
    schedule: str = "cosine"  # or "stlr": ULMFiT's slanted triangular learning rate; or "wsd": warmup-stable-decay
    decay_fraction: float = 0.2  # wsd: the share of the steps, at the end, over which the rate decays
    # a run sized to its minutes that would read its training tokens more than `REPEAT_PASSES` times
    # trains with this dropout from its first step (0 = off; `training.budget`)
    repeat_dropout: float = 0.0
    evidence_prob: float = 0.0  # fraction of training reviews replaced by an evidence snippet
    evidence: tuple[str, ...] = ()  # the evidence caches (training.evidence) the snippets come from
    evidence_copies: int = 0  # each distinct evidence snippet as a row of its own, N times
    sentence_copies: int = 0  # each training review's first and last sentence as rows of their own, N times
    shout_prob: float = 0.0  # fraction of the crops recased (capitals: one word or all of it; or Title Case)
    pseudo_labels: str = ""  # the unlabeled reviews' verdicts (training.pseudo) whose confident ones are rows
    pseudo_confidence: float = 0.9  # the verdict's probability a pseudo-labelled review needs

    def __post_init__(self):
        if not 0 < self.layer_decay <= 1:
            raise UsageError(f"--layer-decay must be in (0, 1], got {self.layer_decay}")
        if self.unfreeze_every < 0 or self.average_last < 1:
            raise UsageError("--unfreeze-every must be >= 0 and --average-last >= 1")
        if not 0 <= self.label_smoothing < 1 or not 0 <= self.crop_prob <= 1 or self.adversarial_eps < 0:
            raise UsageError("--label-smoothing must be in [0, 1), --crop-prob in [0, 1], --adversarial-eps >= 0")
        if self.lm_weight < 0 or self.lm_weight and self.adversarial_eps:
            raise UsageError("--lm-weight must be >= 0, and does not combine with --adversarial-eps")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not 0 < self.decay_fraction <= 1:
            raise UsageError(f"--decay-fraction must be in (0, 1], got {self.decay_fraction}")
        if not 0 <= self.repeat_dropout < 1:
            raise UsageError(f"--repeat-dropout must be in [0, 1), got {self.repeat_dropout}")
        if not 0 <= self.evidence_prob <= 1 - self.crop_prob or self.evidence_copies < 0 \
                or bool(self.evidence_prob or self.evidence_copies) != bool(self.evidence):
            raise UsageError("--evidence-prob must be in [0, 1 - --crop-prob] and --evidence-copies >= 0; either is "
                             "given with --evidence PATH")
        if self.sentence_copies < 0:
            raise UsageError(f"--sentence-copies must be >= 0, got {self.sentence_copies}")
        if not 0 <= self.shout_prob <= 1 or self.shout_prob and not self.crop_prob:
            raise UsageError("--shout-prob must be in [0, 1], and shouts crops: give --crop-prob too")
        if not 0.5 <= self.pseudo_confidence <= 1:
            raise UsageError(f"--pseudo-confidence must be in [0.5, 1], got {self.pseudo_confidence}")


# --- layer groups: discriminative learning rates and gradual unfreezing ---------------------------
def layer_depth(name: str, n_encoder_layer: int) -> int:
    """0 for the decoder (and final encoder norm), 1 for the top encoder layer, ..., n for the
    bottom one, n + 1 for the (shared) embeddings."""
    if name.startswith("embed."):
        return n_encoder_layer + 1
    match = re.match(r"encoder\.layers\.(\d+)\.", name)
    return n_encoder_layer - int(match.group(1)) if match else 0


def _depths(model: PreTrainedModel) -> dict[str, int]:
    if not isinstance(model, EncoderDecoder):
        return {name: 0 for name, _ in model.named_parameters()}
    return {name: layer_depth(name, model.config.n_encoder_layer) for name, _ in model.named_parameters()}


def param_groups(model: PreTrainedModel, weight_decay: float, layer_decay: float = 1.0) -> list[dict]:
    """AdamW parameter groups: weight decay on every matrix (linear weights and embedding tables, as
    in nanoGPT), none on vectors (biases, norm gains), decided by shape so that a renamed or new
    layer cannot slip through; and `lr_scale` = layer_decay ** depth, which the trainer multiplies
    the scheduled learning rate by."""
    depths, groups = _depths(model), {}
    for name, p in model.named_parameters():
        decayed = p.dim() >= 2
        group = groups.setdefault((depths[name], decayed), {
            "params": [], "weight_decay": weight_decay if decayed else 0.0, "lr_scale": layer_decay ** depths[name]})
        group["params"].append(p)
    return [groups[key] for key in sorted(groups)]


def apply_unfreezing(model: PreTrainedModel, step: int, every: int) -> int:
    """Let only the top 1 + step // every layer groups train (requires_grad); returns how many.
    Frozen parameters get no gradient, so AdamW leaves them (and their moments) alone."""
    depths = _depths(model)
    n_groups = max(depths.values()) + 1
    trainable = n_groups if every == 0 else min(n_groups, 1 + step // every)
    for name, p in model.named_parameters():
        p.requires_grad_(depths[name] < trainable)
    return trainable


# --- the loss: label smoothing and adversarial embeddings ----------------------------------------
def smoothed_loss(logits: torch.Tensor, targets: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Mean cross-entropy against (1 - smoothing) x one-hot + smoothing x uniform over the
    vocabulary, on the positions whose target is not IGNORE_INDEX. logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX,
                           label_smoothing=smoothing)


def _loss_from_embeds(model: EncoderDecoder, batch: dict, embeds: torch.Tensor, smoothing: float) -> torch.Tensor:
    memory, _ = model.encode(None, batch["src_mask"], inputs_embeds=embeds)
    logits, _ = model.decode(batch["tgt_ids"], memory, batch["src_mask"])
    return smoothed_loss(logits, batch["targets"], smoothing)


def source_lm_loss(model: EncoderDecoder, memory: torch.Tensor, src_ids: torch.Tensor,
                   src_mask: torch.Tensor) -> torch.Tensor:
    """The next-token loss of a causal encoder's states: memory (B, S, C) at position t predicts
    src_ids[t + 1], through the tied output projection, as the LM it started from did."""
    targets = src_ids[:, 1:].masked_fill(src_mask[:, 1:] == 0, IGNORE_INDEX)  # (B, S - 1), padding ignored
    return head_and_loss(model.embed, memory[:, :-1], targets, loss_only=True)[1]


def training_loss(model: PreTrainedModel, forward, batch: dict, recipe: Recipe) -> torch.Tensor:
    """The loss to back-propagate. `forward` is the (possibly DDP-wrapped) model call.

    With adversarial_eps > 0: loss(e) + loss(e + r), e the source embeddings (B, S, C) and
    r = eps x g / ||g|| per example, g = d loss / d e (Miyato et al. 2017, eq. 2-3; r is held
    constant, as there). With lm_weight > 0: loss + lm_weight x `source_lm_loss`."""
    if recipe.adversarial_eps == 0:
        if recipe.label_smoothing == 0:
            out = forward(**batch, loss_only=True)
            loss = out.loss
        else:
            out = forward(**{k: v for k, v in batch.items() if k != "targets"})  # the model's own loss would go unused
            loss = smoothed_loss(out.logits, batch["targets"], recipe.label_smoothing)
        if recipe.lm_weight:
            loss = loss + recipe.lm_weight * source_lm_loss(model, out.encoder_hidden_state, batch["src_ids"],
                                                            batch["src_mask"])
        return loss
    embeds = model.embed(batch["src_ids"])  # (B, S, C)
    clean = _loss_from_embeds(model, batch, embeds, recipe.label_smoothing)
    (grad,) = torch.autograd.grad(clean, embeds, retain_graph=True)
    grad = grad * batch["src_mask"][..., None]  # padding is not part of the review
    r = recipe.adversarial_eps * grad / grad.flatten(1).norm(dim=1).clamp_min(1e-12)[:, None, None]
    return clean + _loss_from_embeds(model, batch, embeds + r.detach(), recipe.label_smoothing)


# --- checkpoint averaging -----------------------------------------------------------------------
def average_state_dicts(states: list[dict]) -> dict:
    """The element-wise mean of several state dicts of one model (computed in float32)."""
    return {k: torch.stack([s[k].float() for s in states]).mean(0).to(states[0][k].dtype) for k in states[0]}


# --- short text in place of reviews: crops and evidence snippets ----------------------------------
LONG_WORD = re.compile(r"[^\W\d_]{3,}")  # a word of three letters or more, the kind shouted for emphasis


def shout(text: str, rng: np.random.Generator) -> str:
    """`text` with, a third of the time each, one word of three letters or more in capitals, all of
    it in capitals (also where it has no such word), or Every Word Capitalised (a headline's case:
    the behavioural check found that one flips the label too)."""
    words, draw = list(LONG_WORD.finditer(text)), rng.random()
    if not words or draw < 1 / 3:
        return text.upper()
    if draw < 2 / 3:
        return string.capwords(text)
    m = words[int(rng.integers(len(words)))]
    return text[: m.start()] + m.group().upper() + text[m.end():]


class ShortExamples:
    """Short text in place of some of a batch's reviews, so that one-line text is in distribution:
    each example is replaced with probability `crop_prob` by 1-3 contiguous sentences of its own
    review (with the review's label), or with probability `evidence_prob` by an evidence snippet
    drawn uniformly from `evidence` (texts, labels: `training.evidence.load_evidence`), with the
    snippet's own label, written as `label_targets[label]` (the label words' target ids)."""

    def __init__(self, texts: list[str], tokenizer, max_len: int, crop_prob: float = 0.0,
                 evidence: tuple[list[str], list[int]] = ([], []), evidence_prob: float = 0.0,
                 label_targets: list[list[int]] | None = None, shout_prob: float = 0.0):
        self.sentences = [sentences(t, min_words=1) or [t] for t in texts] if crop_prob else []
        self.tokenizer, self.max_len = tokenizer, max_len
        self.crop_prob, self.evidence_prob, self.shout_prob = crop_prob, evidence_prob, shout_prob
        self.evidence_texts, self.evidence_labels = evidence
        self.label_targets = label_targets
        if evidence_prob and not self.evidence_texts:
            raise UsageError("--evidence-prob: the evidence caches hold no snippet")

    def crop(self, i: int, rng: np.random.Generator) -> str:
        found = self.sentences[i]
        k = min(len(found), int(rng.integers(1, 4)))
        start = int(rng.integers(0, len(found) - k + 1))
        text = " ".join(found[start : start + k])
        return shout(text, rng) if self.shout_prob and rng.random() < self.shout_prob else text

    def replace(self, pairs: PairSet, indices: list[int], rng: np.random.Generator) -> PairSet:
        """The batch's examples `pairs[indices]` in order, some replaced. One uniform draw per example
        picks what it becomes (below crop_prob a crop, below crop_prob + evidence_prob a snippet);
        then the crops are drawn, then the snippets: without evidence the random stream is the one
        crops alone have always drawn. Replacements are encoded like a review: at most max_len
        tokens with the end token."""
        draws = [rng.random() for _ in indices]
        texts = {pos: self.crop(i, rng) for pos, (i, u) in enumerate(zip(indices, draws, strict=True))
                 if u < self.crop_prob}
        targets = [pairs.targets[i] for i in indices]
        labels = [pairs.labels[i] for i in indices]
        for pos, u in enumerate(draws):
            if self.crop_prob <= u < self.crop_prob + self.evidence_prob:
                k = int(rng.integers(len(self.evidence_texts)))
                texts[pos], labels[pos] = self.evidence_texts[k], self.evidence_labels[k]
                targets[pos] = self.label_targets[labels[pos]]
        sources = [pairs.sources[i] for i in indices]
        if texts:
            encoded = self.tokenizer.encode_batch(list(texts.values()), max_length=self.max_len, add_eos=True,
                                                  padding=False, return_tensors=False).input_ids
            for pos, ids in zip(texts, encoded, strict=True):
                sources[pos] = ids
        return PairSet(sources, targets, labels)

"""One sentiment checkpoint reading a review: label probabilities from an encoder-decoder.

`model/` has the architecture: an encoder-decoder that scores a target sequence given a source
(`EncoderDecoder.candidate_scores`, the summed log-likelihood of each label's words). A classifier
is a use of it, and what makes it one lives here: its `ClassifierConfig` (classifier.json: the label
words, `tokenization.label_candidates`; the temperature that turns scores into calibrated
probabilities, temperature scaling, Guo et al. 2017, fitted on held-out rows at the end of a
sentiment run; the head + tail cut), and the batched reading of raw texts (`tokenization.source_windows`: the
reading every reader of a review shares, the whole review in windows of the encoder's length, their
scores averaged).

    reader = Reader.from_pretrained("checkpoints/sentiment")
    reader.read_texts(["A wonderful film."]).exp()   # (1, K): P(label), in `reader.labels` order

A `Reader` is also what `inspection.attribute` explains: it has the `embed`, `encode` and
`log_probs` that the attribution methods read, as `inspection.token_attribution.NextToken` has them
for the language model's next token.
"""

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from model import EncoderDecoder, load_pretrained
from tokenization import BPETokenizer, label_candidates, source_windows
from tokenization.batches import length_batches

from .config import ClassifierConfig, Reading

DEFAULT_MAX_TOKENS = 16384  # padded source tokens per batch of `read_texts`


def calibrated(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """Label scores (..., K) -> log P(label) (..., K) at `temperature`: the one place a temperature
    divides (the argmax, the label, is the same at any temperature; the probabilities are not)."""
    return (scores.float() / temperature).log_softmax(-1)


class Reader(nn.Module):
    """A sentiment checkpoint (`model`, with its `tokenizer` when it reads raw text) as a classifier,
    used as its `classifier_config` says (None: an encoder-decoder read as it is, at temperature 1,
    with the candidates given to each call)."""

    def __init__(self, model: EncoderDecoder, tokenizer: BPETokenizer | None = None, name: str = "",
                 classifier_config: ClassifierConfig | None = None):
        super().__init__()
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.classifier_config = classifier_config
        if classifier_config is not None:
            classifier_config.check(model.config)
        self.training = model.training  # a wrapper in the model's own mode: putting the wrapper back in train
        # mode (`inspection.attribution.evaluating` restores what it switched) must never turn dropout on in
        # a served model that was in eval mode
        self.labels: list[str] = list(self.reading.labels or [])
        # each label's words: the candidates scored (a checkpoint without two labels: `ValueError`)
        self.candidates = label_candidates(tokenizer, self.reading) if tokenizer is not None else None

    @classmethod
    def from_pretrained(cls, folder: str | Path, device: str | torch.device = "cpu", name: str = "") -> "Reader":
        model = load_pretrained(folder, device)
        if not isinstance(model, EncoderDecoder):
            raise ValueError(f"{folder}: a sentiment checkpoint is an encoder-decoder, this is a {model.model_type!r}")
        return cls(model, BPETokenizer.from_file(folder), name or Path(folder).name,
                   ClassifierConfig.from_pretrained(folder))

    @property
    def config(self):
        """The architecture (`EncoderDecoderConfig`, config.json)."""
        return self.model.config

    @property
    def reading(self) -> Reading:
        """How this reader reads a review (`tokenization.review`'s `SourceConfig`)."""
        return Reading(self.model.config, self.classifier_config)

    @property
    def temperature(self) -> float:
        return self.classifier_config.temperature if self.classifier_config is not None else 1.0

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed(ids)

    def encode(self, src_ids, src_mask=None, output_attentions=False, inputs_embeds=None):
        """The source -> memory (B, S, C) and the encoder's attention maps (`EncoderDecoder.encode`)."""
        return self.model.encode(src_ids, src_mask, output_attentions=output_attentions, inputs_embeds=inputs_embeds)

    def log_probs(self, memory, candidates: list[list[int]] | None = None, src_mask=None) -> torch.Tensor:
        """log P(label | source) (B, K) from an encoded source: the candidates' scores at the
        checkpoint's temperature. Differentiable (the gradient attributions go through it)."""
        return calibrated(self.model.candidate_scores(memory, candidates or self.candidates, src_mask)[0],
                          self.temperature)

    def log_probs_and_maps(self, memory, candidates: list[list[int]] | None = None, src_mask=None):
        """`log_probs` and the attention maps of the same decoder pass, from which the attention
        attribution reads the label step's cross-attention without decoding again (computed by the
        explicit formula: the log-probabilities can differ from `log_probs`' in the last float bits)."""
        scores, maps = self.model.candidate_scores(memory, candidates or self.candidates, src_mask,
                                                   output_attentions=True)
        return calibrated(scores, self.temperature), maps

    @torch.inference_mode()
    def read(self, src_ids: torch.Tensor, src_mask: torch.Tensor | None = None,
             candidates: list[list[int]] | None = None) -> torch.Tensor:
        """Source ids (B, S) as `tokenization.read_review` gives them -> log P(label) (B, K)."""
        return self.log_probs(self.encode(src_ids, src_mask)[0], candidates, src_mask)

    @torch.inference_mode()
    def read_windows(self, windows: list[list[int]]) -> torch.Tensor:
        """One review's windows (`Review.window_ids`) -> its log P(label) (K,): the windows' label
        scores averaged, then calibrated, as `read_texts` reads a review whole."""
        return calibrated(self.score_rows(windows).mean(0), self.temperature)

    def read_texts(self, texts: Sequence[str], max_tokens: int = DEFAULT_MAX_TOKENS,
                   whole: bool = True) -> torch.Tensor:
        """Raw reviews -> log P(label) (N, K), in text order, each read as the app reads one."""
        return calibrated(self.score_texts(texts, max_tokens, whole), self.temperature)

    def score_texts(self, texts: Sequence[str], max_tokens: int = DEFAULT_MAX_TOKENS,
                    whole: bool = True) -> torch.Tensor:
        """Raw reviews -> the label scores (N, K) before any temperature (what a temperature is fitted
        on): each text read whole as the app reads one (`tokenization.source_windows`), the scores
        of a long review's windows averaged; `whole=False`: the training cut alone, head + tail, the
        reading `benchmarks.long_reviews` compares it with."""
        per_text = [w if whole else w[:1] for w in source_windows(list(texts), self.tokenizer, self.reading)]
        scores = self.score_rows([w for text in per_text for w in text], max_tokens)
        owner = torch.tensor([i for i, text in enumerate(per_text) for _ in text], dtype=torch.long)
        total = torch.zeros(len(per_text), scores.shape[1]).index_add_(0, owner, scores)
        return total / torch.bincount(owner, minlength=len(per_text))[:, None]

    @torch.inference_mode()
    def score_rows(self, rows: list[list[int]], max_tokens: int = DEFAULT_MAX_TOKENS) -> torch.Tensor:
        """Source rows (ids ending in eos) -> their label scores (R, K), in length-sorted batches of at
        most `max_tokens` padded tokens."""
        self.model.eval()
        device = next(self.model.parameters()).device
        out = torch.empty(len(rows), len(self.candidates))
        for idx in length_batches([len(r) for r in rows], max_tokens):
            width = max(len(rows[i]) for i in idx)
            ids = torch.full((len(idx), width), self.tokenizer.pad_id, dtype=torch.long)
            mask = torch.zeros(len(idx), width, dtype=torch.long)
            for j, i in enumerate(idx):
                ids[j, : len(rows[i])], mask[j, : len(rows[i])] = torch.tensor(rows[i]), 1
            ids, mask = ids.to(device), mask.to(device)
            out[idx] = self.model.candidate_scores(self.encode(ids, mask)[0], self.candidates, mask)[0].float().cpu()
        return out

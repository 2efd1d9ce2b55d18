"""The Sentiment tab's computation: class probabilities, and which review tokens the label step
looked at (no Gradio here; `demo.tabs.sentiment` shows it)."""

from dataclasses import dataclass, field

import torch

from classifier import Classifier, Reader, Verdict
from demo.serving import SENTIMENT, SENTIMENT_BACKWARD, Checkpoint, DemoError, DemoService, visitor_text
from inspection import METHODS, attribute, attribute_methods, erase, rank_correlation, top_count
from model import EncoderDecoder
from tokenization import BPETokenizer, Piece, clean_texts, label_candidates, read_review
from tokenization.review import SourceConfig

EMPTY_REVIEW = "Paste or type a movie review to classify first."
NOTHING_LEFT = ("Nothing is left to classify once links, @handles and emoji are set aside: "
                "type a few words about the film.")
NORMALISED = ("Read as reviews are written (`tokenization.normalise`): links, @handles, emoji and markup set aside, "
              "SHOUTING, Headline Case and stretched letters (\"sooo\") spelled as reviews spell them, and a "
              "one-line text read as a sentence inside a review (one full stop, a space before it, its first word "
              "in lower case where the model knows it so: \"Terrific!\" is read \" terrific.\"), so the "
              "highlight shows the text the model read.")
DELETION_FRACTIONS = (0.05, 0.1, 0.2)  # the live deletion test: top 5/10/20% of the review's tokens


READER_NAMES = {SENTIMENT: "left to right", SENTIMENT_BACKWARD: "right to left"}  # how the verdict names them


@dataclass
class SentimentResult:
    probabilities: dict[str, float]  # label -> probability, sums to 1: the verdict, every reader's mean
    label: str
    highlights: list[tuple[str, float | None]]  # review segments with attention in [0, 1]
    notices: list[str]
    readers: dict[str, dict[str, float]] = field(default_factory=dict)  # each reader's own, by `READER_NAMES`


@dataclass
class Source:
    """A review as the sentiment model reads it (`tokenization.read_review`): the cleaned text, its
    pieces (cut the way training cut them), the encoder's input ids and each id's word."""

    text: str
    pieces: list[Piece]
    ids: torch.Tensor  # (1, S): the pieces' ids, then eos
    words: list[int]  # (S,) the word of each id, the end token a word of its own
    notices: list[str]
    windows: list[list[int]] = field(default_factory=list)  # a long review's windows' ids (`Review.window_ids`)


def read_source(text: str, tok: BPETokenizer, config: SourceConfig, what: str, device,
                max_len: int | None = None) -> Source:
    """Visitor text -> the source training read (`tokenization.read_review`: cleaned, the head or
    the head and the last `src_keep_tail` tokens, then eos), with a notice when it was cut.
    `config`: how the model reads (`Checkpoint.reading`); `max_len`: a tighter limit than the
    model's (the attention heatmap's)."""
    review = read_review(text, tok, config, max_len)
    notices = []
    if len(review.pieces) < review.n_tokens:
        size, shown = config.max_src_len - 1, len(review.pieces)
        view = cut_words(shown, min(config.src_keep_tail, shown))
        if len(review.windows) == 1:
            notices.append(f"The {what} is {review.n_tokens:,} tokens; this view shows {view} (it draws at most "
                           f"{shown + 1} tokens, the end token included); the model reads them all.")
        else:
            notices.append(_windows_notice(review, what, size, config.src_keep_tail)
                           + (f" This view draws {view} of the first window." if shown < size else ""))
    ids = torch.tensor([review.ids], device=device)
    return Source(review.text, review.pieces, ids, review.word_ids, notices, review.window_ids)


def cut_words(read: int, tail: int) -> str:
    """How a cut of `read` tokens keeping the last `tail` reads: "the first 639 and the last 384"."""
    parts = [f"the first {read - tail:,}" if read > tail else "", f"the last {tail:,}" if tail else ""]
    return " and ".join(p for p in parts if p)


def _windows_notice(review, what: str, size: int, tail: int) -> str:
    """What a review longer than the encoder's window gets read as: every window, and how they combine."""
    middle = " and ".join(f"{w[0].start:,}–{w[-1].end:,}" for w in review.windows[1:])
    return (f"The {what} is {review.n_tokens:,} tokens, more than the {size:,} the model reads at once. It reads "
            f"all of it, in {len(review.windows)} windows: {cut_words(size, min(tail, size))} tokens, then "
            f"characters {middle} (the middle those leave out); the verdict is the mean of the windows' scores. "
            "What this view shows is computed on the first window alone.")


def review_source(ckpt: Checkpoint, text: object) -> Source:
    """Visitor text -> the source the classifier reads; the highlight shows its cleaned text, so
    it tiles what the model read."""
    _, tok = ckpt.require()
    text, notices = visitor_text(text)
    source = read_source(text, tok, ckpt.reading, "review", ckpt.device)
    if not source.text:
        raise DemoError(NOTHING_LEFT if clean_texts([text])[0] else EMPTY_REVIEW)
    source.notices[:0] = notices + ([NORMALISED] if source.text != clean_texts([text])[0] else [])
    return source


def labels_and_candidates(ckpt: Checkpoint) -> tuple[list[str], list[list[int]]]:
    """The label words and their ids (`tokenization.label_candidates`); a checkpoint without labels
    is the visitor's error message."""
    _, tok = ckpt.require()
    try:
        candidates = label_candidates(tok, ckpt.reading)
    except ValueError as e:
        raise DemoError(f"The sentiment checkpoint cannot classify: {e}.") from None
    return list(ckpt.reading.labels), candidates


def reader_of(ckpt: Checkpoint, model: EncoderDecoder | None = None) -> Reader:
    """A served sentiment checkpoint as a `classifier.Reader`, used as its classifier.json says (its
    temperature): what the attributions explain. `model`: a private copy of the checkpoint's model."""
    return Reader(model or ckpt.model, ckpt.tokenizer, READER_NAMES.get(ckpt.name, ckpt.name), ckpt.classifier)


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


def shade(source: Source, scores: list[float]) -> list[tuple[str, float | None]]:
    """Per-token scores -> text segments scaled so the strongest is 1 (unread text: None)."""
    segments = merge_spans(source.text, source.pieces, scores[: len(source.pieces)])
    top = max((abs(w) for _, w in segments if w is not None), default=0.0)
    return [(segment, w if w is None or top == 0 else round(w / top, 4)) for segment, w in segments]


def read_by_all(service: DemoService, source: Source, forward: torch.Tensor) -> Verdict:
    """The verdict of the served readers (`service.readers`) on the review, as a `classifier.Classifier`
    gives it: `forward`, the sentiment model's P(label) (K,), is already computed (the attribution pass
    gave it); the backward reader, if one is served, reads the same ids (it reverses them itself:
    `EncoderDecoderConfig.reverse`)."""
    served = Classifier([reader_of(c) for c in service.readers])
    if len(source.windows) > 1:  # a long review: every reader reads every window (the attribution saw the first)
        return served.combine({r.name: r.read_windows(source.windows)[None] for r in served.readers})
    with torch.inference_mode():  # no gradient: the explanations are the forward reader's
        return served.read(source.ids, known={READER_NAMES[SENTIMENT]: forward.log()[None]})


def readers_notice(readers: dict[str, dict[str, float]], shown: dict[str, float]) -> list[str]:
    """With two readers, one sentence of what each said and that the label shown combines them."""
    if len(readers) < 2:
        return []
    label = max(shown, key=shown.get)
    said = "; ".join(f"read {name}, P({label}) = {p[label]:.3f}" for name, p in readers.items())
    plain = sum(p[label] for p in readers.values()) / len(readers)
    return [f"**Two readers, combined:** {said}. Their plain average would be {plain:.3f}; the label shown, "
            f"{shown[label]:.3f}, is the mean of their log-probabilities divided by a temperature fitted for the pair "
            "on held-out reviews, which can put it outside the two (more sure than either when they agree, since "
            "two readers agreeing is stronger evidence than one). A model that reads the review backwards makes "
            "other mistakes than one that reads it forwards, so together they are right more often than either "
            "(ULMFiT's forward + backward ensemble; see About)."]


def classify(service: DemoService, text: object) -> SentimentResult:
    """Class probabilities and which review tokens the label step attended to.

    The model is text-to-text: the probability of each label is the softmax over the decoder's
    log-likelihoods of the label words. The highlight is the cross-attention of the decoder's
    first step (the one that predicts the label's first token), averaged over heads and layers,
    summed per visible segment and scaled so the strongest is 1: `attribute(..., "attention")`,
    whose one encoder pass and one decoder pass give both the scores and the attention.
    """
    with service.compute(batched=True):
        ckpt = service.sentiment
        source = review_source(ckpt, text)
        labels, candidates = labels_and_candidates(ckpt)
        result = attribute(reader_of(ckpt), source.ids, candidates, "attention")  # one pass each: scores and weights
        said = read_by_all(service, source, result.probabilities)
        probabilities, readers = said.probabilities(), said.reader_probabilities()
        label = max(probabilities, key=probabilities.get)
        return SentimentResult(probabilities, label, shade(source, result.scores.tolist()),
                               source.notices + readers_notice(readers, probabilities), readers)


@dataclass
class Explanation:
    """One attribution method's reading of a review, and the live deletion test of it."""

    method: str
    probabilities: dict[str, float]  # label -> probability of the full review, by the reader explained
    label: str  # the label explained: the one the sentiment model (the left-to-right reader) writes
    highlights: list[tuple[str, float | None]]  # review segments, scores scaled to [-1, 1]
    # (fraction, tokens deleted, P(label) left with the method's top tokens deleted, and with as many random ones)
    deletion: list[tuple[float, int, float, float]]
    tokens: int  # the review's tokens the test may delete
    notices: list[str]
    verdict: dict[str, float]  # what the Sentiment tab's label shows: every reader's mean (`verdict`)


def _check_method(method: object) -> str:
    if method not in METHODS:
        raise DemoError(f"Unknown explanation method {str(method)[:40]!r}: choose one of {', '.join(METHODS)}.")
    return method  # type: ignore[return-value]


def _attribute(model: Reader, source: Source, candidates: list[list[int]], methods: tuple[str, ...]):
    """-> {method: Attribution}, the review encoded once for all `methods`."""
    return attribute_methods(model, source.ids, candidates, methods, word_ids=source.words)


def explain(service: DemoService, text: object, method: object) -> Explanation:
    """Token attributions for the label the model writes, by one method of `inspection.attribution`
    (`METHODS`, named as the faithfulness benchmark prints them), with the probability of that
    label left once the tokens the method ranks highest are deleted, and once as many random tokens
    are: the honest floor a method must beat on this very review."""
    with service.compute(heavy=True, batched=True):
        ckpt = service.sentiment
        method = _check_method(method)
        model = reader_of(ckpt)
        source = review_source(ckpt, text)
        labels, candidates = labels_and_candidates(ckpt)
        results = _attribute(model, source, candidates, (method, "random"))  # one encoder pass for both
        result = results[method]
        left, chance = (erase(model, source.ids, candidates, r.scores, result.label, DELETION_FRACTIONS).tolist()
                        for r in (result, results["random"]))
        n = len(source.pieces)
        deletion = [(f, top_count(f, n), p, q) for f, p, q in zip(DELETION_FRACTIONS, left, chance, strict=True)]
        said = read_by_all(service, source, result.probabilities)
        label, mean, readers = labels[result.label], said.probabilities(), said.reader_probabilities()
        notices = source.notices + readers_notice(readers, mean) + explained_reader(readers, mean, label)
        return Explanation(method, readers[READER_NAMES[SENTIMENT]], label, shade(source, result.scores.tolist()),
                           deletion, n, notices, mean)


def explained_reader(readers: dict[str, dict[str, float]], shown: dict[str, float], label: str) -> list[str]:
    """With two readers: which one the shading and the deletion test explain, since the label shown
    combines them."""
    if len(readers) < 2:
        return []
    name = READER_NAMES[SENTIMENT]
    differs = max(shown, key=shown.get) != label
    return [f"The shading and the deletion test explain the sentiment model, which reads {name}: its own "
            f"P({label}) is {readers[name][label]:.3f}" + (", and its label differs from the one shown"
                                                          if differs else "") + "."]


def agreement(service: DemoService, text: object) -> tuple[list[str], list[list[float]]]:
    """How much the methods agree: Spearman's rank correlation of every pair's token scores
    (NaN where a method gives every token the same score)."""
    with service.compute(heavy=True, batched=True):
        ckpt = service.sentiment
        source = review_source(ckpt, text)
        _, candidates = labels_and_candidates(ckpt)
        results = _attribute(reader_of(ckpt), source, candidates, METHODS)
        scores = [results[m].scores[: len(source.pieces)] for m in METHODS]
        return list(METHODS), [[rank_correlation(a, b) for b in scores] for a in scores]

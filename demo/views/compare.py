"""Side by side: two versions of a review, both predictions, the change of the probability, and
each token's attribution in both, aligned token to token (no Gradio here; `demo.tabs.compare_panel`
shows it). Minimal pairs, two texts that differ in one thing, show what the classifier reacts to.

Both versions are explained for the *same* label (the one the first version gets), so their
scores are in the same units, the log-probability of that label, and subtract.
"""

from dataclasses import dataclass
from difflib import SequenceMatcher

from demo.serving import DemoError, DemoService
from demo.views.sentiment import _check_method, labels_and_candidates, reader_of, review_source
from inspection import attribute

MINIMAL_PAIRS = {  # name -> (first version, second version)
    "negation": ("The movie was bad.", "The movie was not bad."),
    "a “but” clause": ("The acting was wonderful and the music was beautiful.",
                       "The acting was wonderful and the music was beautiful, but the story was a complete mess."),
    "sarcasm": ("What a great film, I enjoyed every minute of it.",
                "What a great film, if you enjoy checking your watch every minute of it."),
    "a rating in the text": ("I watched it with my family last night. 9/10.",
                             "I watched it with my family last night. 2/10."),
}


@dataclass
class AlignedToken:
    """One token of either version, or a token both share, with its score in each (None: absent)."""

    a: str | None
    b: str | None
    score_a: float | None
    score_b: float | None

    @property
    def difference(self) -> float:
        return (self.score_b or 0.0) - (self.score_a or 0.0)


@dataclass
class Comparison:
    method: str
    label: str  # the label both versions are explained for
    probabilities_a: dict[str, float]
    probabilities_b: dict[str, float]
    tokens: list[AlignedToken]
    notices: list[str]

    @property
    def change(self) -> float:
        """P(label) of the second version minus the first's."""
        return self.probabilities_b[self.label] - self.probabilities_a[self.label]


def align(a: list[str], b: list[str], scores_a: list[float], scores_b: list[float]) -> list[AlignedToken]:
    """Tokens of both versions in reading order: shared runs paired, the rest on its own side."""
    out = []
    for op, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [AlignedToken(a[i], b[j], scores_a[i], scores_b[j]) for i, j in zip(range(i1, i2), range(j1, j2),
                                                                                       strict=True)]
            continue
        out += [AlignedToken(a[i], None, scores_a[i], None) for i in range(i1, i2)]
        out += [AlignedToken(None, b[j], None, scores_b[j]) for j in range(j1, j2)]
    return out


def compare(service: DemoService, text_a: object, text_b: object, method: object) -> Comparison:
    """Both versions classified and explained by `method` for the first version's label."""
    with service.compute(heavy=True, batched=True):
        ckpt = service.sentiment
        method = _check_method(method)
        labels, candidates = labels_and_candidates(ckpt)
        model = reader_of(ckpt)
        sources, results, notices = [], [], []
        label = None
        for name, text in (("first", text_a), ("second", text_b)):
            try:
                source = review_source(ckpt, text)
            except DemoError as e:
                raise DemoError(f"The {name} version: {e}") from None
            notices += [f"The {name} version: {n}" for n in source.notices]
            result = attribute(model, source.ids, candidates, method, label=label, word_ids=source.words)
            label = result.label
            sources.append(source)
            results.append(result)
        texts = [[p.text for p in s.pieces] for s in sources]
        scores = [r.scores[: len(t)].tolist() for r, t in zip(results, texts, strict=True)]
        return Comparison(method, labels[label], *(dict(zip(labels, r.probabilities.tolist(), strict=True))
                                                    for r in results), align(*texts, *scores), notices)

"""Every shipped checkpoint loads and gives the outputs it gave before a restructure: the LM's
next-token logits and the app's sentiment verdict (each reader's probabilities and their
combination), on a few texts, in float32.

The reference, `tests/data/shipped_outputs.json`, was written by this file's `__main__` on the
commit before the named points and the classifier's move out of `model/` (a0c31ee):

    git worktree add /tmp/before a0c31ee && cp tests/test_shipped_outputs.py /tmp/before/tests/
    (cd /tmp/before && python -m tests.test_shipped_outputs > OUT.json)

A change of numbers beyond float32 rounding is a change of the model, not of the code's shape. The
classifier's reading of a text changed since, on purpose (`tokenization.normalise`: "This movie was"
is read " this movie was.", a one-line text with a space before it), so its verdict is compared on the
texts that reading leaves as typed; and
the pair's temperature was refitted for that reading, so the verdict is checked as the reference's
readers combine at today's temperature (`classifier.combine_readers`)."""

import json
import sys
from pathlib import Path

import pytest
import torch

from classifier import combine_readers
from demo.serving import DemoService
from demo.views.sentiment import classify
from tokenization import clean_texts, review_text

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "shipped_outputs.json"
TEXTS = ["This movie was", "A wonderful film, but far too long.",
         "I have never been so bored in a cinema. The plot makes no sense and the acting is wooden."]


def outputs(service: DemoService) -> dict:
    """What the shipped checkpoints say about `TEXTS`: the LM's five most likely next tokens and their
    logits, and the sentiment verdict with each reader's probabilities."""
    model, tok = service.lm.require()
    lm = {}
    for text in TEXTS:
        with torch.inference_mode():
            logits = model(torch.tensor([[tok.bos_id, *tok.encode(text)]])).logits[0, -1]
        top = logits.topk(5)
        lm[text] = {"ids": top.indices.tolist(), "logits": top.values.tolist()}
    sentiment = {}
    for text in TEXTS:
        result = classify(service, text)
        sentiment[text] = {"verdict": result.probabilities, "readers": result.readers}
    return {"lm": lm, "sentiment": sentiment}


def shipped() -> DemoService:
    return DemoService(ROOT / "checkpoints", device="cpu", precision="fp32")


def test_every_shipped_checkpoint_gives_the_outputs_it_gave_before() -> None:
    service = shipped()
    expected, got = json.loads(REFERENCE.read_text()), outputs(service)
    for text in TEXTS:
        assert got["lm"][text]["ids"] == expected["lm"][text]["ids"]
        assert got["lm"][text]["logits"] == pytest.approx(expected["lm"][text]["logits"], abs=1e-4)
    as_typed = [t for t in TEXTS if review_text(t, service.sentiment.tokenizer) == clean_texts([t])[0]]
    assert len(as_typed) == 1  # the two-sentence text
    for text in as_typed:
        was, now = expected["sentiment"][text], got["sentiment"][text]
        labels = list(was["verdict"])
        readers = [torch.tensor([p[label] for label in labels]).log() for p in was["readers"].values()]
        combined = combine_readers(readers, service.sentiment_backward.classifier.pair_temperature).exp()
        assert now["verdict"] == pytest.approx(dict(zip(labels, combined.tolist(), strict=True)), abs=1e-5)
        assert now["readers"].keys() == was["readers"].keys() and len(now["readers"]) == 2
        for reader, probabilities in was["readers"].items():
            assert now["readers"][reader] == pytest.approx(probabilities, abs=1e-5)


if __name__ == "__main__":
    json.dump(outputs(shipped()), sys.stdout, indent=1)

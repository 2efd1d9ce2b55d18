"""The classifier as one product (`classifier/`): a reader's batched reading of raw texts equals
reading each review alone, the verdict is its readers' log-probabilities averaged at the pair's
temperature, and readers that cannot form one classifier are refused."""

from pathlib import Path

import pytest
import torch

from classifier import Classifier, Reader, calibrated, combine_readers
from tokenization import read_review

ROOT = Path(__file__).resolve().parents[1] / "checkpoints"
REVIEWS = ["A wonderful film, but far too long.", "Dull.", "I laughed, I cried, I would watch it again tomorrow. "
           "The cast is superb and the ending earns every tear."]


@pytest.fixture(scope="module")
def pair() -> Classifier:
    return Classifier.from_pretrained([ROOT / "sentiment", ROOT / "sentiment-backward"])


def test_batched_texts_equal_one_review_at_a_time(pair):
    for reader in pair.readers:
        batched = reader.read_texts(REVIEWS, max_tokens=64)  # several batches, each padded to its longest
        for i, text in enumerate(REVIEWS):
            alone = reader.read(torch.tensor([read_review(text, reader.tokenizer, reader.reading).ids]))[0]
            torch.testing.assert_close(batched[i], alone, atol=1e-4, rtol=0)


def test_the_verdict_is_the_readers_mean_at_the_pairs_temperature(pair):
    verdict = pair.read_texts(REVIEWS)
    forward, backward = (r.read_texts(REVIEWS) for r in pair.readers)
    t = pair.readers[-1].classifier_config.pair_temperature
    by_hand = ((forward + backward) / 2 / t).log_softmax(-1)
    torch.testing.assert_close(verdict.log_probs, by_hand, atol=1e-5, rtol=0)
    assert pair.temperature == t != 1.0 and list(verdict.readers) == ["sentiment", "sentiment-backward"]
    assert verdict.probabilities(2) == pytest.approx(dict(zip(pair.labels, by_hand[2].exp().tolist(), strict=True)))
    assert verdict.reader_probabilities(0)["sentiment"] == pytest.approx(
        dict(zip(pair.labels, forward[0].exp().tolist(), strict=True)))


def test_known_log_probs_are_not_computed_again(pair, monkeypatch):
    ids = torch.tensor([read_review(REVIEWS[0], pair.readers[0].tokenizer, pair.readers[0].reading).ids])
    known = pair.readers[0].read(ids)
    monkeypatch.setattr(pair.readers[0], "read", lambda *a, **k: pytest.fail("read again"))
    verdict = pair.read(ids, known={"sentiment": known})
    torch.testing.assert_close(verdict.readers["sentiment"], known)


def test_one_reader_is_its_own_verdict_and_temperature_divides_once(pair):
    reader = pair.readers[0]
    alone = Classifier([reader]).read_texts(REVIEWS)
    scores = reader.score_texts(REVIEWS)
    torch.testing.assert_close(alone.log_probs, calibrated(scores, reader.temperature))
    torch.testing.assert_close(combine_readers([alone.log_probs]), alone.log_probs)


def test_readers_that_do_not_agree_are_refused(pair):
    forward = pair.readers[0]
    with pytest.raises(ValueError, match="at least one reader"):
        Classifier([])
    with pytest.raises(ValueError, match="distinct names"):
        Classifier([forward, forward])
    other = Reader(forward.model, forward.tokenizer, "other", forward.classifier_config)
    other.labels = ["bad", "good"]
    with pytest.raises(ValueError, match="share two or more labels"):
        Classifier([forward, other])


def test_explaining_or_reading_never_switches_a_served_model_to_training(pair):
    """A `Reader` takes its model's mode: the attribution methods switch the wrapper to eval and back,
    which must leave an eval-mode model in eval mode (dropout off), as the app serves it."""
    from inspection import METHODS, attribute_methods

    reader = pair.readers[0]
    model = reader.model.eval()
    ids = torch.tensor(read_review(REVIEWS[0], reader.tokenizer, reader.reading).ids)
    attribute_methods(model, ids, reader.candidates, METHODS)
    assert not any(m.training for m in model.modules())
    assert not Reader(model).training and Reader(model.train()).training
    model.eval()

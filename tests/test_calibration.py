"""Temperature scaling and expected calibration error, against direct computations."""

import pytest
import torch

from classifier import ClassifierConfig, Reader
from model import EncoderDecoder, EncoderDecoderConfig
from training.calibration import expected_calibration_error, fit_temperature, reliability


def test_fit_temperature_recovers_the_temperature_the_labels_were_drawn_with():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(20000, 3, generator=g) * 4
    labels = torch.multinomial((scores / 2.5).softmax(-1), 1, generator=g)[:, 0]  # calibrated at T = 2.5
    assert fit_temperature(scores, labels) == pytest.approx(2.5, rel=0.05)


def test_fit_temperature_minimises_the_nll():
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(500, 2, generator=g) * 3
    labels = torch.multinomial((scores / 1.7).softmax(-1), 1, generator=g)[:, 0]
    t = fit_temperature(scores, labels)
    assert 1.0 < t < 3.0  # an interior minimum, not a bound

    def nll(temperature):
        return torch.nn.functional.cross_entropy(scores.double() / temperature, labels).item()

    assert nll(t) <= min(nll(t * 1.01), nll(t / 1.01))


def test_ece_and_reliability_bins_by_hand():
    probs = torch.tensor([[0.95, 0.05], [0.9, 0.1], [0.45, 0.55], [0.3, 0.7]])
    labels = torch.tensor([0, 1, 1, 0])
    # confidences 0.95, 0.9, 0.55, 0.7; correct 1, 0, 1, 0; with 5 bins of width 0.2:
    # (0.4, 0.6]: 0.55 -> acc 1; (0.6, 0.8]: 0.7 -> acc 0; (0.8, 1]: 0.95, 0.9 -> acc 0.5, conf 0.925
    bins = reliability(probs, labels, bins=5)
    assert [b["count"] for b in bins] == [0, 0, 1, 1, 2]
    assert bins[4]["confidence"] == pytest.approx(0.925) and bins[4]["accuracy"] == 0.5
    expected = (1 / 4) * abs(1 - 0.55) + (1 / 4) * abs(0 - 0.7) + (2 / 4) * abs(0.5 - 0.925)
    assert expected_calibration_error(probs, labels, bins=5) == pytest.approx(expected)


def test_label_log_probs_apply_the_config_temperature():
    torch.manual_seed(0)
    config = EncoderDecoderConfig(vocab_size=50, n_encoder_layer=1, n_decoder_layer=1, n_head=2, d_model=16,
                                  d_ff=32, max_src_len=10, max_tgt_len=4, dropout=0.0)
    model = EncoderDecoder(config).eval()
    memory, _ = model.encode(torch.randint(3, 50, (2, 6)))
    candidates = [[7], [8, 9]]
    scores = model.candidate_scores(memory, candidates)[0]
    reader = Reader(model, classifier_config=ClassifierConfig(labels=["a", "b"], temperature=2.0))
    torch.testing.assert_close(reader.log_probs(memory, candidates), (scores / 2.0).log_softmax(-1))
    torch.testing.assert_close(Reader(model).log_probs(memory, candidates), scores.log_softmax(-1))  # none: T = 1
    with pytest.raises(ValueError, match="temperature"):
        ClassifierConfig(labels=["a", "b"], temperature=0.0)

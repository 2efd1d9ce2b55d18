"""One optimiser step on the visitor's text (`inspection/learning_step.py`): the probability after
equals Adam's first step computed by hand (every weight moved by lr · g / (|g| + ε)), it is higher
than before, the gradient's size is split over every part of the model, and the served model is
left as it was."""

import copy
from pathlib import Path

import pytest
import torch

from inspection.learning_step import LR, learning_step
from model import DecoderOnlyConfig, DecoderOnlyLM, load_pretrained
from tokenization import BPETokenizer, prompt_ids

ROOT = Path(__file__).resolve().parents[1] / "checkpoints"


@pytest.fixture(scope="module")
def tiny() -> DecoderOnlyLM:
    torch.manual_seed(0)
    return DecoderOnlyLM(DecoderOnlyConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32,
                                           dropout=0.1)).eval()


def by_hand(model: DecoderOnlyLM, ids: torch.Tensor, lr: float) -> float:
    """Adam's first step from the gradient alone: m̂ = g, v̂ = g², θ -= lr · g / (√g² + ε)."""
    learner = copy.deepcopy(model).eval()
    log_p = learner(ids[:, :-1]).logits[0, -1].log_softmax(-1)
    grads = torch.autograd.grad(-log_p[ids[0, -1]], list(learner.parameters()))
    with torch.no_grad():
        for p, g in zip(learner.parameters(), grads, strict=True):
            p -= lr * g / (g.abs() + 1e-8)
        return float(learner(ids[:, :-1]).logits[0, -1].softmax(-1)[ids[0, -1]])


def test_the_step_is_adams_first_step_and_makes_the_token_likelier(tiny):
    ids = torch.tensor([[1, 7, 9, 12, 30, 4]])
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    step = learning_step(tiny, ids, lr=1e-2)
    assert step.target == 4 and step.probability_after == pytest.approx(by_hand(tiny, ids, 1e-2), rel=1e-4)
    assert step.probability_after > step.probability_before
    assert step.loss_before == pytest.approx(-torch.log(torch.tensor(step.probability_before)).item(), rel=1e-5)
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in before.items())  # the served model is untouched
    assert not tiny.training and not any(p.grad is not None for p in tiny.parameters())


def test_the_gradient_sizes_cover_every_weight(tiny):
    ids = torch.tensor([[1, 7, 9, 12, 30, 4]])
    step = learning_step(tiny, ids)
    learner = copy.deepcopy(tiny)
    loss = -learner(ids[:, :-1]).logits[0, -1].log_softmax(-1)[4]
    total = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(learner.parameters()))]).norm()
    assert [name for name, _ in step.grad_norms] == ["embeddings", "layer 1", "layer 2", "final norm"]
    assert sum(n ** 2 for _, n in step.grad_norms) == pytest.approx(float(total) ** 2, rel=1e-4)


def test_on_the_shipped_lm_one_step_raises_the_last_words_probability():
    lm, tok = load_pretrained(ROOT / "lm"), BPETokenizer.from_file(ROOT / "lm")
    step = learning_step(lm, torch.tensor([prompt_ids("The acting was wooden and the plot was boring", tok)]))
    assert step.lr == LR and step.probability_after > 2 * step.probability_before
    with pytest.raises(ValueError, match="at least one token"):
        learning_step(lm, torch.tensor([[tok.bos_id]]))

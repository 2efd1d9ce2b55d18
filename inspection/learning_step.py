"""How a language model learns, on one token of the visitor's text: the loss is −log p(the actual
next token), its gradient says how each weight should move to make that token likelier, and one
optimiser step moves them (on a copy: the served model never changes).

    step = learning_step(lm, ids)      # ids (1, T): learn to predict ids[T-1] after ids[:T-1]
    step.probability_before, step.probability_after, step.grad_norms

The optimiser is training's (`training.trainer.make_optimizer`: AdamW, betas 0.9 and 0.95), taking
its first step, where Adam's moments are the gradient itself and its square: every weight moves by
about the learning rate, in the direction that lowers the loss, whatever its gradient's size (the
update is lr · g / (|g| + ε)). Weight decay is left out, so that the change comes from this token's
loss alone.
"""

import copy
from dataclasses import dataclass

import torch

from model import DecoderOnlyLM

LR = 1e-4  # small enough that one step nudges, as a step of a long run does, rather than rewrites
BETAS = (0.9, 0.95)  # training's (`training.trainer.make_optimizer`)


@dataclass
class LearningStep:
    target: int  # the token learned: the text's last
    loss_before: float  # −log p(target | the tokens before it), nats
    loss_after: float
    probability_before: float
    probability_after: float
    grad_norms: list[tuple[str, float]]  # each part of the model, its gradient's size (L2 norm)
    lr: float
    before: torch.Tensor  # (vocab,) the next-token distribution before the step
    after: torch.Tensor  # and after it


def _parts(model: DecoderOnlyLM) -> list[tuple[str, torch.nn.Module]]:
    """The model's parts in the order a token meets them, each named as the tour names it."""
    return [("embeddings", model.embed), *((f"layer {i + 1}", layer) for i, layer in enumerate(model.decoder.layers)),
            ("final norm", model.decoder.norm)]


def gradient(model: DecoderOnlyLM, context: torch.Tensor, target: int) -> tuple[DecoderOnlyLM, torch.Tensor]:
    """A copy of `model` (eval: no dropout, so a step is the gradient's alone) with the gradient of
    −log p(target | context) in its `.grad`s, and log p (V,) before any step."""
    learner = copy.deepcopy(model).eval()
    for p in learner.parameters():
        p.requires_grad_(True)
        p.grad = None
    with torch.enable_grad(), torch.inference_mode(False):
        log_p = learner(context).logits[0, -1].float().log_softmax(-1)
        loss = -log_p[target]
        loss.backward()
    return learner, log_p.detach()


def learning_step(model: DecoderOnlyLM, ids: torch.Tensor, lr: float = LR) -> LearningStep:
    """One optimiser step on a copy of `model` that makes the last token of `ids` (1, T), T ≥ 2, likelier
    after the tokens before it."""
    if ids.size(1) < 2:
        raise ValueError("the text needs at least one token after the start token to learn")
    context, target = ids[:, :-1], int(ids[0, -1])
    learner, before = gradient(model, context, target)
    norms = [(name, float(torch.cat([p.grad.flatten() for p in part.parameters() if p.grad is not None]).norm()))
             for name, part in _parts(learner)]
    optimizer = torch.optim.AdamW(learner.parameters(), lr=lr, betas=BETAS, weight_decay=0.0)
    optimizer.step()
    with torch.inference_mode():
        after = learner(context).logits[0, -1].float().log_softmax(-1)
    return LearningStep(target, float(-before[target]), float(-after[target]), float(before[target].exp()),
                        float(after[target].exp()), norms, lr, before.exp(), after.exp())

"""The learning chapter's experiments, keyed by its step ids (`LEARN_EXPERIMENTS`): one optimiser step
on a copy of the language model, as the chapter takes it (`inspection.learning_step`: Adam's first
step on the text's last token), against the same step changed: on the wrong target, plain SGD at the
same learning rate, or taken up the gradient instead of down. The table is the next token after the
text's context, after the chapter's step and after the changed one; the loss is −log p(the token
learned) after each, so "worse" means the changed step teaches the token less well."""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from inspection.experiments.common import TOP, Outcome, Run, Unavailable, effect, effect_sentence, nats
from inspection.learning_step import BETAS, LR, gradient
from model import DecoderOnlyLM

EPS = 1e-8  # Adam's ε (torch's default, training's)


@dataclass
class Stepped:
    """One step on a copy: the next-token distribution after it (V,), and how far the weights moved."""

    after: torch.Tensor
    moved_about_lr: float  # the share of the weights that moved by at least half the learning rate
    moved: float  # the share of the weights that moved at all
    size: float  # the L2 norm of the whole change of the weights


def step(model: DecoderOnlyLM, context: torch.Tensor, target: int, rule: str = "adam", lr: float = LR,
         sign: float = 1.0) -> Stepped:
    """One step on a copy that makes `target` likelier after `context` (1, T): "adam", Adam's first step
    (m̂ = g, v̂ = g²: each weight moves by lr · g / (|g| + ε), about lr whatever the gradient's size), or
    "sgd" (lr · g); `sign` −1 takes it up the gradient instead."""
    learner, _ = gradient(model, context, target)
    moved, about, total, size = 0, 0, 0, 0.0
    with torch.no_grad():
        for p in learner.parameters():
            if p.grad is None:
                continue
            g = p.grad.double()
            update = g / (g.abs() + EPS) if rule == "adam" else g
            delta = (-sign * lr * update).to(p.dtype)
            p.add_(delta)
            moved += int((delta != 0).sum())
            about += int((delta.abs() >= lr / 2).sum())
            total += delta.numel()
            size += float(delta.double().pow(2).sum())
    with torch.inference_mode():
        after = learner(context).logits[0, -1].float().softmax(-1)
    return Stepped(after, about / total, moved / total, size ** 0.5)


def embedding_sides(model: DecoderOnlyLM, context: torch.Tensor, target: int) -> tuple[float, float]:
    """The L2 norm of the tied embedding table's gradient from its two uses: the input side (the rows
    looked up for the context) and the output side (the table, transposed, scoring the vocabulary:
    (p − onehot(target)) ⊗ the final vector, written out)."""
    learner, log_p = gradient(model, context, target)
    with torch.inference_mode(), model.hooks(read=["decoder.hook_norm"]) as seen:
        model(context)
    h = seen["decoder.hook_norm"][0, -1].double()
    error = log_p.double().exp()
    error[target] -= 1
    output = torch.outer(error, h)  # d(−log p)/dW for logits = W h
    total = learner.embed.lut.weight.grad.double()
    return float((total - output).norm()), float(output.norm())


def _context(r: Run) -> tuple[torch.Tensor, int]:
    if r.ids.size(1) < 2:
        raise Unavailable("the text needs a token to learn after the start token")
    return r.ids[:, :-1], int(r.ids[0, -1])


def _top(r: Run, probs: torch.Tensor) -> list[tuple[str, float]]:
    top = probs.topk(TOP)
    return [(r.label(i), round(float(p), 4)) for i, p in zip(top.indices.tolist(), top.values, strict=True)]


def _compare(r: Run, change: str, changed: Stepped, said: str, worse: str) -> Outcome:
    context, target = _context(r)
    ours = step(r.model, context, target)
    loss = (float(-ours.after[target].log()), float(-changed.after[target].log()))
    word = r.label(target)
    at = f"after “{r.label(int(context[0, -1]))}” (position {context.size(1)}), learning “{word}”"
    verdict = " ".join(part for part in (
        f"{at[0].upper()}{at[1:]}: after the chapter's step P(“{word}”) is {float(ours.after[target]):.3f}; after "
        f"this one it is {float(changed.after[target]):.3f}.",
        effect_sentence(*loss, f"−log p(“{word}”) after the step"), said,
        worse if effect(*loss) == "worse" else "") if part)
    return Outcome(f"{change} (the table: after the chapter's step, and after this one)", _top(r, ours.after),
                   _top(r, changed.after), verdict, {"p_target": (float(ours.after[target]),
                                                                         float(changed.after[target]))},
                   loss[0], loss[1], position=at)


def learn_wrong_target(r: Run) -> Outcome:
    """The step taken on the model's own top guess (its second, if the guess was right) instead of the
    actual next token."""
    context, target = _context(r)
    with torch.inference_mode():
        guesses = r.model(context).logits[0, -1].topk(2).indices.tolist()
    wrong = guesses[1] if guesses[0] == target else guesses[0]
    changed = step(r.model, context, wrong)
    return _compare(r, f"the step is taken on the wrong target, “{r.label(wrong)}” (the model's likeliest token "
                       f"that is not the actual one) instead of “{r.label(target)}”", changed,
                    f"P(“{r.label(wrong)}”) becomes {float(changed.after[wrong]):.3f}.",
                    "The loss decides what is learned: a step lowers the loss it is given, and only the actual next "
                    "token's loss teaches the model the text.")


def learn_sgd(r: Run) -> Outcome:
    """Plain SGD (θ ← θ − lr · g) at the chapter's learning rate instead of Adam's first step."""
    context, target = _context(r)
    adam, sgd = step(r.model, context, target), step(r.model, context, target, "sgd")
    return _compare(r, f"plain SGD, θ ← θ − lr · g, at the same learning rate {LR:g} instead of Adam", sgd,
                    f"Adam moved {adam.moved_about_lr:.1%} of the weights by at least half the learning rate (the "
                    f"weights' whole change: {adam.size:.3g}); SGD moves each by lr × its gradient (whole change "
                    f"{sgd.size:.3g}){', so at this rate it barely moves them' if sgd.size < adam.size / 10 else ''}.",
                    "Adam divides each gradient by its own size: every weight with a gradient moves by about the "
                    "learning rate, however small its gradient; SGD's step follows the gradient's size.")


def learn_ascent(r: Run) -> Outcome:
    """The chapter's step taken up the gradient instead of down."""
    context, target = _context(r)
    changed = step(r.model, context, target, sign=-1.0)
    return _compare(r, "the step is taken up the gradient (θ ← θ + the step) instead of down", changed, "",
                    "The minus sign is the whole of learning: the gradient points to where the loss grows, and the "
                    "step goes the other way.")


LEARN_EXPERIMENTS: dict[str, Callable[[Run], Outcome]] = {
    "loss": learn_wrong_target, "gradient": learn_sgd, "update": learn_ascent,
}


def learn_experiment(step_id: str, model: DecoderOnlyLM, tokenizer, ids: torch.Tensor) -> Outcome:
    """The experiment of the learning chapter's `step_id` on `ids` (1, T): the last token is learned."""
    return LEARN_EXPERIMENTS[step_id](Run(model, tokenizer, ids, 0, 0))


__all__ = ["BETAS", "EPS", "LEARN_EXPERIMENTS", "Stepped", "embedding_sides", "learn_experiment", "nats",
           "step"]

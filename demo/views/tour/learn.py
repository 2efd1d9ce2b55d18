"""The learning chapter ("learn", after the forward pass): on the visitor's text, the loss of its last
token given the ones before, the gradient's size in each part of the model, and one optimiser step on
a copy of the weights (`inspection.learning_step`), with that token's probability before and after."""

import math

import numpy as np
import torch

from demo.serving import DemoError
from demo.views.tour.capture import Pass, label
from demo.views.tour.code import CodeRef
from demo.views.tour.recompute import check, f64
from demo.views.tour.registry import Built, Panel, State, Track, add_track, step
from demo.views.tour.show import bars, num, tok
from inspection.experiments.learn import embedding_sides
from inspection.experiments.learn import step as one_step
from inspection.learning_step import learning_step
from tokenization import fit_context, prompt_ids

LEARN = "learn"


def learn_pass(ckpt, text: str, layer: int) -> tuple[Pass, list[str]]:
    """The LM learning the last token of `[bos] + encode(text)` (its last `block_size` tokens at most)."""
    model, tokenizer = ckpt.require()
    c, notices = model.config, []
    whole = prompt_ids(text, tokenizer)
    ids = fit_context(whole, c.block_size, keep="end")  # no heatmap here: the whole text, up to the context
    if len(ids) < len(whole):
        notices.append(f"Your text is {len(whole) - 1:,} tokens, more than the model's context of {c.block_size}: "
                       f"the chapter reads its last {len(ids) - 1}, after the start token.")
    if len(ids) < 2:
        raise DemoError("The learning chapter needs at least one word to learn.")
    x = torch.tensor([ids], device=ckpt.device)
    learned = learning_step(model, x)
    values = {"before": f64(learned.before), "after": f64(learned.after)}
    sides = embedding_sides(model, x[:, :-1], ids[-1])  # the tied table's gradient: input and output side
    adam = one_step(model, x[:, :-1], ids[-1], lr=learned.lr)  # Adam's first step written out: how far it moves
    return Pass(LEARN, c, ids, [label(tokenizer, i) for i in ids], layer, values, {},
                {"tokenizer": tokenizer, "step": learned, "sides": sides, "adam": adam,
                 "weights": sum(p.numel() for p in model.parameters())}), notices


class LearnState(State):
    def __init__(self, p: Pass, head: int):
        super().__init__(p, head)
        self.step, self.tokenizer = p.extra["step"], p.extra["tokenizer"]
        self.target = tok(self.tokens[-1])
        self.context = " ".join(self.tokens[:-1][-6:])


@step("loss", CodeRef("inspection.learning_step.gradient", r"log_p = learner", r"loss\.backward"))
def loss(s: LearnState) -> Built:
    p = float(s.v["before"][s.step.target])
    return Built([bars(f"what the model predicted after …{s.tokens[-2]}", s.v["before"], s.tokenizer,
                       s.c.vocab_size, mark=s.step.target, marked="the actual next token")],
                 [check("the loss, −log p(target), from the model's distribution", -s.v["before"][s.step.target].log(),
                        torch.tensor(s.step.loss_before))],
                 target=s.target, context=tok(s.context), p=num(p), loss=num(s.step.loss_before),
                 n=len(s.tokens) - 1, vocab=f"{s.c.vocab_size:,}")


@step("gradient", CodeRef("inspection.learning_step.learning_step", r"norms = ", r"for name, part in _parts"))
def gradient(s: LearnState) -> Built:
    names, sizes = zip(*s.step.grad_norms, strict=True)
    biggest = int(np.argmax(sizes))
    inputs, outputs = s.p.extra["sides"]
    return Built([Panel("the gradient's size (L2 norm) in each part", np.array(sizes, dtype=np.float32), list(names),
                        kind="bars")],
                 biggest=names[biggest], size=num(sizes[biggest]), parts=len(names), target=s.target,
                 input_side=num(inputs), output_side=num(outputs),
                 larger="output" if outputs > inputs else "input")


@step("update", CodeRef("inspection.learning_step.learning_step", r"optimizer = torch\.optim\.AdamW",
                        r"optimizer\.step\(\)"))
def update(s: LearnState) -> Built:
    before, after = s.step.probability_before, s.step.probability_after
    adam = s.p.extra["adam"]
    return Built([bars("after one step, what the model predicts", s.v["after"], s.tokenizer, s.c.vocab_size,
                       mark=s.step.target, marked="the actual next token")],
                 [check("P(target) after Adam's first step written out (lr · g / (|g| + ε))",
                        torch.tensor(float(adam.after[s.step.target]), dtype=torch.float64),
                        torch.tensor(after, dtype=torch.float64))],
                 lr=f"{s.step.lr:g}", target=s.target, before=num(before), after=num(after),
                 moved=f"{adam.moved_about_lr:.1%}", weights=f"{s.p.extra['weights']:,}", adam_size=f"{adam.size:.3g}",
                 sgd_size=f"{s.step.lr * math.sqrt(sum(n * n for _, n in s.step.grad_norms)):.3g}",
                 vocab=f"{s.c.vocab_size:,}",
                 loss_after=num(s.step.loss_after), factor=f"{after / before:.1f}")


def outcome(p: Pass) -> dict:
    learned = p.extra["step"]
    return {"target": p.extra["tokenizer"].decode_token(learned.target),
            "probability_before": learned.probability_before, "probability_after": learned.probability_after}


add_track(Track(
    LEARN, learn_pass, LearnState, steps=("loss", "gradient", "update"), layers="n_layer",
    overview=(("The loss", "loss"), ("The gradient", "gradient"), ("One step", "update")), outcome=outcome))

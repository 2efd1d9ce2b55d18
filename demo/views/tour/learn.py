"""The learning chapter ("learn", after the forward pass): on the visitor's text, the loss of its last
token given the ones before, the gradient's size in each part of the model, and one optimiser step on
a copy of the weights (`inspection.learning_step`), with that token's probability before and after."""

import numpy as np
import torch

from demo.serving import DemoError
from demo.views.tour.capture import MAX_TOUR_TOKENS, Pass, label
from demo.views.tour.code import CodeRef
from demo.views.tour.recompute import check, f64
from demo.views.tour.registry import Built, Panel, State, Track, add_track, step
from demo.views.tour.show import bars, num, tok
from inspection.learning_step import learning_step
from tokenization import fit_context, prompt_ids

LEARN = "learn"


def learn_pass(ckpt, text: str, layer: int) -> tuple[Pass, list[str]]:
    """The LM learning the last token of `[bos] + encode(text)` (its last `MAX_TOUR_TOKENS` at most)."""
    model, tokenizer = ckpt.require()
    c, notices = model.config, []
    whole = prompt_ids(text, tokenizer)
    ids = fit_context(whole, min(MAX_TOUR_TOKENS, c.block_size), keep="end")
    if len(ids) < len(whole):
        notices.append(f"Your text is {len(whole) - 1} tokens: the chapter reads its last {len(ids) - 1}, after "
                       "the start token.")
    if len(ids) < 2:
        raise DemoError("The learning chapter needs at least one word to learn.")
    learned = learning_step(model, torch.tensor([ids], device=ckpt.device))
    values = {"before": f64(learned.before), "after": f64(learned.after)}
    return Pass(LEARN, c, ids, [label(tokenizer, i) for i in ids], layer, values, {},
                {"tokenizer": tokenizer, "step": learned}), notices


class LearnState(State):
    def __init__(self, p: Pass, head: int):
        super().__init__(p, head)
        self.step, self.tokenizer = p.extra["step"], p.extra["tokenizer"]
        self.target = tok(self.tokens[-1])
        self.context = " ".join(self.tokens[:-1][-6:])


@step("loss", CodeRef("inspection.learning_step.learning_step", r"log_p = learner", r"loss\.backward"))
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
    return Built([Panel("the gradient's size (L2 norm) in each part", np.array(sizes, dtype=np.float32), list(names),
                        kind="bars")],
                 biggest=names[biggest], size=num(sizes[biggest]), parts=len(names), target=s.target)


@step("update", CodeRef("inspection.learning_step.learning_step", r"optimizer = torch\.optim\.AdamW",
                        r"optimizer\.step\(\)"))
def update(s: LearnState) -> Built:
    before, after = s.step.probability_before, s.step.probability_after
    return Built([bars("after one step, what the model predicts", s.v["after"], s.tokenizer, s.c.vocab_size,
                       mark=s.step.target, marked="the actual next token")],
                 lr=f"{s.step.lr:g}", target=s.target, before=num(before), after=num(after),
                 vocab=f"{s.c.vocab_size:,}",
                 loss_after=num(s.step.loss_after), factor=f"{after / before:.1f}")


def outcome(p: Pass) -> dict:
    learned = p.extra["step"]
    return {"target": p.extra["tokenizer"].decode_token(learned.target),
            "probability_before": learned.probability_before, "probability_after": learned.probability_after}


add_track(Track(
    LEARN, learn_pass, LearnState, steps=("loss", "gradient", "update"), layers="n_layer",
    overview=(("The loss", "loss"), ("The gradient", "gradient"), ("One step", "update")), outcome=outcome))

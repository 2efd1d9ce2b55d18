"""Why each part exists: the same small model trained with the part and without it, side by side.

Switching a part off in a model that was trained with it (the tour's experiments) shows only that
this model now depends on it. Most parts of a Transformer exist for *training* reasons: the
residual lets the gradient reach deep layers, LayerNorm keeps training stable, √d_k keeps the
softmax from saturating, the causal mask keeps the model from reading the answer, several heads
learn several relations at once, positions tell order, a second layer composes with the first. The
counterfactual is a model *trained* without the part: here, two arms built from one config that
differs in one switch (`model.config.PARTS`, `n_head`, `n_layer`), from the same initial seed, on the
same batches in the same order, for the same number of steps, each over `--seeds` seeds.

    python -m training.why --part residual --minutes 2 --out runs/why-residual

writes `why.json`: both held-out loss curves (nats per token, mean over seeds), the final loss of
each arm and its spread over seeds, a measure that explains the why (`Part.measure`), a sample of
each arm, and a verdict computed from the numbers (`verdict`). `--part depth` trains on text that
rewards copying (`training.why_data.repeated_runs`) and also writes `induction.json` and both models: an induction head
forming in the 2-layer model and not in the 1-layer one (`training.induction`).
"""

import json
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from tqdm import tqdm

from cli import Parser
from inspection.trained_without import WITHIN, verdict
from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig, attention_point, residual_point
from model.embeddings import sinusoidal_table
from tokenization import BPETokenizer, prompt_ids
from training import induction
from training.recipe import param_groups
from training.schedules import cosine
from training.why_data import WhyData, load_why_data

EVALS = 15  # points on each curve (besides step 0)
PROMPT = "This movie was"
BASE = {"block_size": 64, "n_layer": 4, "n_head": 4, "d_model": 64, "d_ff": 256, "dropout": 0.0}
LR, WARMUP, MIN_LR_RATIO, WEIGHT_DECAY, BATCH = 3e-3, 30, 0.1, 0.1, 32
FIRST_STEPS = 20  # the gradient reaching each layer is averaged over this many first steps
SAMPLING_SECONDS = 10  # what a run spends besides its steps: the samples and the measures (a bound for --minutes)


@dataclass
class Arm:
    """One trained model of one arm and seed, with what the measures read."""

    model: DecoderOnlyLM
    data: WhyData
    first_grads: list[float]  # the gradient norm of each layer's weights, mean over the first steps
    first_scale: list[float]  # the measures' values before the first step, where one reads them (`Part.at_start`)


@dataclass(frozen=True)
class Part:
    """One experiment: what the without-arm changes (`without`; `with_`, what both arms change from
    `BASE`), in words (`change`), why the part exists (`why`), the source line the switch changes
    (`code`: a `demo.views.tour.code.CodeRef` as a dict), the tour step it belongs to, and the
    measure that explains it: `measure(arm) -> value` named `measure_name` (`labels`: one per value
    when it is a list)."""

    change: str
    why: str
    without: dict
    code: dict
    tour_step: str
    measure_name: str
    measure_about: str
    measure: Callable[[Arm], float | list[float]]
    labels: list[str] | None = None
    with_: dict = field(default_factory=dict)
    copying: bool = False  # train on text that rewards copying (`training.why_data.repeated_runs`)
    lr: float = LR  # the peak learning rate (the depth part's runs of random tokens diverged at 3e-3)


def as_generated(model: DecoderOnlyLM) -> DecoderOnlyLM:
    """The same weights read as generation reads them: each position sees only the positions before it
    (a model trained without the mask, scored on what it can do when writing one token at a time)."""
    if model.config.causal:
        return model
    twin = DecoderOnlyLM(replace(model.config, causal=True)).eval()
    twin.load_state_dict(model.state_dict())
    return twin


@torch.no_grad()
def held_out_loss(model: DecoderOnlyLM, batches: list[dict]) -> float:
    """Mean next-token loss (nats) over `batches`, as the model generates (`as_generated`)."""
    model = as_generated(model.eval())
    losses = [model(b["input_ids"], b["targets"], loss_only=True).loss.item() for b in batches]
    return sum(losses) / len(losses)


@torch.no_grad()
def read_points(model: DecoderOnlyLM, ids: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    with model.hooks(read=names) as seen:
        model.eval()(ids)
    return dict(seen)


def layer_outputs(model: DecoderOnlyLM) -> list[str]:
    """The named point of each layer's output: the residual stream after its last sublayer."""
    return [residual_point(model, "decoder", i) for i in range(model.config.n_layer)]


def stream_scale(arm: Arm) -> list[float]:
    """The root mean square of the residual stream after each layer, on held-out text."""
    names = layer_outputs(arm.model)
    seen = read_points(arm.model, arm.data.val[0]["input_ids"], names)
    return [round(seen[n].float().pow(2).mean().sqrt().item(), 3) for n in names]


def attention_entropy(arm: Arm) -> float:
    """Mean entropy (nats) of the attention rows of every head, on held-out text: low is peaked
    (a saturated softmax: nearly all weight on one key, almost no gradient to the others)."""
    names = [attention_point("decoder_self", i, "weights") for i in range(arm.model.config.n_layer)]
    seen = read_points(arm.model, arm.data.val[0]["input_ids"], names)
    w = torch.stack([seen[n].float() for n in names])[..., 1:, :]  # (L, B, H, T-1, T): rows with 2+ keys
    return round(float(-(w * w.clamp_min(1e-12).log()).sum(-1).mean()), 3)


def cheating_losses(arm: Arm) -> list[float]:
    """Held-out loss as the model trained (its own mask, or none) and as it generates (causal)."""
    batches = arm.data.val
    with torch.no_grad():
        own = sum(arm.model.eval()(b["input_ids"], b["targets"], loss_only=True).loss.item() for b in batches)
    return [round(own / len(batches), 3), round(held_out_loss(arm.model, batches), 3)]


def order_sensitivity(arm: Arm) -> float:
    """How much the loss of the last prediction of a held-out window rises (nats) when the tokens
    before the last one are shuffled: what the model draws from word order."""
    b = arm.data.val[0]
    x, y = b["input_ids"], b["targets"]
    g = torch.Generator().manual_seed(0)
    shuffled = torch.stack([torch.cat([row[:-1][torch.randperm(len(row) - 1, generator=g)], row[-1:]]) for row in x])

    def last_loss(ids):
        with torch.no_grad():
            logits = arm.model.eval()(ids).logits[:, -1].float()
        return torch.nn.functional.cross_entropy(logits, y[:, -1]).item()

    return round(last_loss(shuffled) - last_loss(x), 3)


def embedding_share(arm: Arm) -> list[float]:
    """The size of the token vectors against the position vectors added to them (RMS ratio), before the
    first step and after training: below 1, positions dominate what the first layer reads."""
    return [arm.first_scale[0], round(token_to_position(arm.model), 3)]


def token_to_position(model: DecoderOnlyLM) -> float:
    """The RMS of the scaled token vectors over that of the sinusoids (the table's, also in a model
    trained without adding it)."""
    c = model.config
    emb = model.embed.lut.weight.detach() * model.embed.scale
    return float(emb.pow(2).mean().sqrt() / sinusoidal_table(c.max_positions, c.d_model).pow(2).mean().sqrt())


def named_heads(arm: Arm) -> list[float]:
    """Heads in all, and the best previous-token score: a head that reads the token before is one
    relation; several heads of one layer can hold several at once."""
    scores = induction.head_scores(arm.model, arm.data)
    return [float(arm.model.config.n_layer * arm.model.config.n_head), round(max(scores["previous"]), 3)]


def block_parameters(arm: Arm) -> float:
    return float(sum(p.numel() for p in arm.model.decoder.layers.parameters()))


def best_induction(arm: Arm) -> float:
    return round(float(induction.scores(arm.model).max()), 3)


def first_gradients(arm: Arm) -> list[float]:
    """Each layer's gradient norm over the first steps, as a share of the last layer's: 1 everywhere
    is a gradient that reaches the first layer as strongly as the last."""
    return [round(g / arm.first_grads[-1], 3) for g in arm.first_grads]


LAYERS = [f"layer {i + 1}" for i in range(BASE["n_layer"])]
PARTS: dict[str, Part] = {
    "positions": Part(
        "the sinusoidal positions are not added (every row of the table is zero)",
        "Attention is a weighted sum over a set: without positions the only order a causal model can "
        "find is how many tokens each position sees, so word order must be inferred rather than read.",
        {"positions": False}, {"target": "model.embeddings.PositionalEncoding.__init__",
                               "start": r"self\.register_buffer\(\"pe\""}, "position",
        "loss rise when the earlier words are shuffled", "how much the last prediction relies on word "
        "order: the rise in its loss (nats) when the tokens before it are shuffled", order_sensitivity),
    "embed_scale": Part(
        "the token embeddings are not multiplied by √d_model",
        "Token vectors start at N(0, 0.02) per dimension, the sinusoids at about 0.7: unscaled, the "
        "positions drown the tokens in what the first layer reads, until training grows the embeddings.",
        {"embed_scale": False}, {"target": "model.embeddings.Embeddings.__init__", "start": r"self\.scale = "},
        "embedding", "token vectors against position vectors (RMS ratio)", "below 1, the positions are "
        "larger than the tokens they are added to", embedding_share, ["before training", "after training"]),
    "scale_scores": Part(
        "the scores Q Kᵀ are not divided by √d_k",
        "A dot product of d_k terms has a spread that grows as √d_k: unscaled, the scores are large, the "
        "softmax puts nearly all weight on one key and passes almost no gradient to the others.",
        {"scale_scores": False}, {"target": "model.attention.attention", "start": r"scale = 1 / math\.sqrt",
                                  "end": r"scores = at\(\"scores\""},
        "scaling", "attention entropy", "mean entropy of the attention rows (nats) after training: "
        "lower is more peaked, a saturated softmax", attention_entropy),
    "causal": Part(
        "the decoder's causal mask is removed: each position also sees the tokens after it",
        "Trained to predict the next token while seeing it, the model learns to copy it from the input: "
        "its training loss falls fast, and when it writes, one token at a time, that token is not there.",
        {"causal": False}, {"target": "model.layers.DecoderLayer.forward", "start": r"is_causal=self\.causal"},
        "mask", "held-out loss as it trained, and as it generates", "the first reads the text as the "
        "model trained (the next token visible without the mask), the second as it writes (only the "
        "past); the curves are the second", cheating_losses, ["as it trained", "as it generates"]),
    "heads": Part(
        "one head of width 64 in each layer instead of four of width 16",
        "One head draws one weighted average per position; several heads of the same total width draw "
        "several, so one can read the previous token while another reads further back.",
        {"n_head": 1}, {"target": "model.attention.MultiHeadAttention._split_heads", "start": r"return x\.view"},
        "heads", "heads, and the best previous-token score", "the number of heads in the model, and how "
        "much the best of them reads the token just before (the head table's criterion)", named_heads,
        ["heads", "best previous-token score"]),
    "residual": Part(
        "x + Sublayer(LayerNorm(x)) becomes Sublayer(LayerNorm(x)): no residual connection",
        "With `x +` the gradient reaches every earlier layer unchanged through the sum; without it, it "
        "must pass back through every sublayer above, shrinking or growing at each.",
        {"residual": False}, {"target": "model.layers.SublayerConnection.forward",
                              "start": r"kept = x if self\.residual"}, "residual",
        "gradient reaching each layer, as a share of the last layer's", "the gradient norm of each layer's "
        f"weights over the first {FIRST_STEPS} steps, divided by the last layer's: below 1, less of the "
        "training signal reaches that layer", first_gradients,
        LAYERS),
    "layer_norm": Part(
        "no LayerNorm before the sublayers nor after the stack",
        "Each layer adds to the residual stream, so its scale grows with depth and with training; "
        "LayerNorm hands each sublayer an input of a fixed scale whatever the layers before it did.",
        {"layer_norm": False}, {"target": "model.layers.build_norm", "start": r"return nn\.LayerNorm"}, "norm",
        "scale of the residual stream after each layer", "its root mean square on held-out text: "
        "without the norm every layer must work at whatever scale it receives", stream_scale, LAYERS),
    "feed_forward": Part(
        "no feed-forward sublayer: each block is attention alone",
        "Attention only mixes the vectors it has (a weighted average); the feed-forward network is the "
        "per-position computation that turns what was gathered into new features, and holds most weights.",
        {"feed_forward": False}, {"target": "model.layers.DecoderLayer.forward",
                                  "start": r"return self\.sublayer\[-1\]"}, "ffn",
        "parameters in the blocks", "the weights of the four blocks: the feed-forward holds two thirds",
        block_parameters),
    "depth": Part(
        "one layer instead of two",
        "Some skills need two attention layers composed: an induction head (copy what followed the "
        "last occurrence of this token) reads in layer 2 what a previous-token head wrote in layer 1.",
        {"n_layer": 1}, {"target": "model.layers.Decoder.forward", "start": r"for i, layer in enumerate",
                         "end": r"x = layer\("}, "stack",
        "best induction score", "on a random sequence shown twice, the most weight any head puts on the "
        "token that followed the current token's first occurrence (Olsson et al. 2022)", best_induction,
        with_={"n_layer": 2}, copying=True, lr=1e-3),
}


def summary(name: str, part: Part, final: dict, spread: dict, verdict_: str) -> str:
    """The verdict in one sentence, with the numbers it rests on."""
    arms = (f"held-out loss {final['with']:.3f} nats with it (spread {spread['with']:.3f}) against "
            f"{final['without']:.3f} without (spread {spread['without']:.3f})")
    if verdict_ == WITHIN:
        return (f"Trained without it, the model ends no different at this scale: {arms}; the difference "
                "is within what changing the seed changes.")
    return f"Trained without it, the model ends {verdict_}: {arms}."


def config_of(part: Part, arm: str, vocab_size: int) -> DecoderOnlyConfig:
    fields = {**BASE, **part.with_, **(part.without if arm == "without" else {})}
    return DecoderOnlyConfig(vocab_size=vocab_size, **fields)


def train_arm(config: DecoderOnlyConfig, seed: int, steps: int, data: WhyData, evals: list[int], bar,
              on_eval: Callable[[int, DecoderOnlyLM], None] | None = None, lr: float = LR
              ) -> tuple[Arm, list[list[float]]]:
    """Train one arm from seed `seed` for `steps` steps on `data`'s batches (the same for every arm of
    that seed) at peak rate `lr`; the held-out loss at each of `evals`. `on_eval(step, model)`: more
    readings there."""
    torch.manual_seed(seed)
    model = DecoderOnlyLM(config)
    opt = torch.optim.AdamW(param_groups(model, WEIGHT_DECAY), lr=lr, betas=(0.9, 0.95))
    arm = Arm(model, data, [0.0] * config.n_layer, [round(token_to_position(model), 3)])
    curve = []
    for step in range(steps + 1):
        if step in evals:
            curve.append([step, round(held_out_loss(model, data.val), 4)])
            if on_eval is not None:
                on_eval(step, model)
        if step == steps:
            break
        model.train()
        batch = data.batch(seed, step, BATCH)
        for group in opt.param_groups:
            group["lr"] = cosine(step, lr, WARMUP, steps, MIN_LR_RATIO)
        loss = model(batch["input_ids"], batch["targets"], loss_only=True).loss
        loss.backward()
        if step < FIRST_STEPS:
            for i, layer in enumerate(model.decoder.layers):
                norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in layer.parameters() if p.grad is not None))
                arm.first_grads[i] += norm.item() / FIRST_STEPS
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        bar.update(1)
    return arm, curve


def sample(model: DecoderOnlyLM, tokenizer: BPETokenizer, n: int = 40) -> str:
    ids = torch.tensor([prompt_ids(PROMPT, tokenizer)])
    with torch.no_grad():
        new = model.eval().generate(ids, GenerationConfig(max_new_tokens=n, temperature=0.8, top_k=40, seed=0))
    return PROMPT + tokenizer.decode(new)


def timing(part: Part, data: WhyData, vocab_size: int) -> tuple[float, float]:
    """(seconds a step of both arms takes here, seconds both arms' evaluations take in one run): the
    median of 3 timed steps after one untimed, and one timed evaluation."""
    step = evaluations = 0.0
    for arm in ("with", "without"):
        model = DecoderOnlyLM(config_of(part, arm, vocab_size))
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        times = []
        for i in range(4):
            batch = data.batch(0, i, BATCH)
            start = time.perf_counter()
            model(batch["input_ids"], batch["targets"], loss_only=True).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        held_out_loss(model, data.val)
        step += sorted(times[1:])[1]
        evaluations += (time.perf_counter() - start) * (EVALS + 1)
    return step, evaluations


def run(name: str, steps: int, seeds: int, out: Path, minutes: float | None, command: str, log=print) -> dict:
    """Train both arms of part `name` over `seeds` seeds, write `out/why.json` (and, for depth, the
    induction files), and return what was written. `steps` is cut to what fits `minutes`."""
    started = time.time()
    part = PARTS[name]
    data = load_why_data(BASE["block_size"], part.copying)
    tokenizer = data.tokenizer
    if minutes is not None:
        step, evaluations = timing(part, data, tokenizer.vocab_size)
        left = minutes * 60 - (time.time() - started) - SAMPLING_SECONDS
        fits = int((left / seeds - evaluations) / step)
        if fits < steps:
            log(f"{minutes:g} minutes fit {fits} steps of each arm and seed here (asked {steps})")
            steps = max(fits, EVALS)
    evals = sorted({round(i * steps / EVALS) for i in range(EVALS + 1)})
    curves, finals, measures, arms = {}, {}, {}, {}
    watch = induction.Watch() if part.copying else None
    with tqdm(total=2 * seeds * steps, desc=f"why: {name}", unit="step", file=sys.stderr) as bar:
        for arm_name in ("with", "without"):
            runs = []
            for seed in range(seeds):
                on_eval = watch.reader(arm_name) if watch is not None and seed == 0 else None
                arm, curve = train_arm(config_of(part, arm_name, tokenizer.vocab_size), seed, steps, data, evals,
                                       bar, on_eval, part.lr)
                runs.append((arm, curve))
            arms[arm_name] = runs[0][0]
            curves[arm_name] = [[s, round(sum(c[i][1] for _, c in runs) / seeds, 4)]
                                for i, (s, _) in enumerate(runs[0][1])]
            finals[arm_name] = [c[-1][1] for _, c in runs]
            values = [part.measure(a) for a, _ in runs]
            measures[arm_name] = (round(sum(values) / seeds, 4) if not isinstance(values[0], list) else
                                  [round(sum(v[i] for v in values) / seeds, 4) for i in range(len(values[0]))])
    final = {k: round(sum(v) / len(v), 4) for k, v in finals.items()}
    spread = {k: round(max(v) - min(v), 4) for k, v in finals.items()}
    v = verdict(final, spread)
    shape = asdict(config_of(part, "with", tokenizer.vocab_size))
    result = {
        "part": name, "change": part.change, "why": part.why, "code": {"end": None, **part.code},
        "arms": {"with": {k: shape[k] for k in part.without}, "without": part.without}, "shape": shape,
        "steps": steps, "seeds": list(range(seeds)), "tokens_per_step": BATCH * BASE["block_size"],
        "held_out": data.about, "curves": curves, "final": final, "spread": spread,
        "measure": {"name": part.measure_name, "labels": part.labels, "with": measures["with"],
                    "without": measures["without"], "about": part.measure_about},
        "samples": {"prompt": PROMPT, **{k: sample(a.model, tokenizer) for k, a in arms.items()}},
        "verdict": v, "summary": summary(name, part, final, spread, v), "tour_step": part.tour_step,
        "command": command, "minutes": round((time.time() - started) / 60, 2),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "why.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if watch is not None:
        watch.write(out, arms, tokenizer, command, steps, data.about)
    return result


def arguments() -> Parser:
    p = Parser("python -m training.why", __doc__.split("\n\n")[0])
    p.add_argument("--part", required=True, help=f"the part to train without: {', '.join(PARTS)}")
    p.add_argument("--steps", type=int, default=600, help="steps of each arm and seed (at most; --minutes cuts)")
    p.add_argument("--seeds", type=int, default=2, help="seeds of each arm (the spread is their range)")
    p.add_argument("--minutes", type=float, default=None, help="bound the whole run: fewer steps if needed")
    p.add_argument("--out", type=Path, default=None, help="the folder for why.json (default: runs/why/PART)")
    return p


def main(argv: list[str] | None = None) -> None:
    parser = arguments()
    args = parser.parse_args(argv)
    if args.part not in PARTS:
        parser.error(f"argument --part: unknown part {args.part!r}; the parts are {', '.join(PARTS)}")
    if args.steps < EVALS or args.seeds < 1 or (args.minutes is not None and args.minutes <= 0):
        parser.error(f"--steps must be at least {EVALS}, --seeds at least 1, --minutes above 0")
    out = args.out or Path("runs/why") / args.part
    if (out / "why.json").exists():
        parser.error(f"--out {out}: already holds a why.json; choose another folder")
    command = "python -m training.why " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = run(args.part, args.steps, args.seeds, out, args.minutes, command)
    print(result["summary"])
    print(f"wrote {out / 'why.json'} in {result['minutes']:.1f} minutes")


if __name__ == "__main__":
    main()

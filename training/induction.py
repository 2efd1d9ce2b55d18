"""Watch an induction head form: the readings `training.why --part depth` takes while its 2-layer and
1-layer models train on text that rewards copying, and the files it ships from them.

An induction head (Olsson et al. 2022) predicts the token that followed the current token's earlier
occurrence: "… Harry Potter … Harry" → "Potter". It needs two attention layers composed: a
previous-token head in layer 1 writes, at each position, which token came before; a head in layer 2
then matches the current token against that and reads what followed. One layer cannot compose, so
its best "induction" score stays near what attending evenly would give. At each evaluation `Watch`
reads every head's induction score (`inspection.head_kinds.induction_scores`, the `/heads` table's
criterion) and the loss on each copy of a random sequence shown twice, and keeps the attention of the
heads, to show the best head's pattern before, during and after the loss on the second copy drops.
"""

import json
from pathlib import Path

import torch

from inspection.head_kinds import attention_weights, copy_loss, induction_scores, on_previous, repeated_random
from model import DecoderOnlyLM
from tokenization import BPETokenizer

LENGTH = 20  # the random sequence shown twice: a look-back in the middle of the runs training repeats (10 to
# 31 tokens, `training.why_data.PERIODS`). At 31, the longest and rarest run, the 2-layer model's head
# reached 0.46 and ended at 0.34 (docs/why.md): a look-back it seldom trained on, not a missing circuit
NAMES = {"with": "2layer", "without": "1layer"}


def length(model: DecoderOnlyLM) -> int:
    """The random sequence's length: `LENGTH`, or what a smaller window holds twice."""
    return min(LENGTH, (model.config.block_size - 1) // 2)


def scores(model: DecoderOnlyLM, weights: torch.Tensor | None = None) -> torch.Tensor:
    """(L, H) induction scores on the sequence every reading uses (seed 0, `length` tokens twice)."""
    return induction_scores(model.eval(), length(model), 0, weights)


def head_scores(model: DecoderOnlyLM, data) -> dict[str, list[float]]:
    """Each head's previous-token score (flattened over layers and heads) on held-out windows."""
    ids = data.val[0]["input_ids"][:16]
    w = torch.stack([attention_weights(model.eval(), row[None]) for row in ids])  # (B, L, H, T, T)
    return {"previous": on_previous(w).mean((0, -1)).flatten().tolist()}


class Watch:
    """The readings of both depth arms at each evaluation (seed 0)."""

    def __init__(self):
        self.readings: dict[str, list[dict]] = {"with": [], "without": []}

    def reader(self, arm: str):
        def read(step: int, model: DecoderOnlyLM) -> None:
            ids = repeated_random(model, length(model), 0)
            w = attention_weights(model.eval(), ids)  # (L, H, T, T)
            first, second = copy_loss(model, ids)
            self.readings[arm].append({"step": step, "scores": scores(model, w), "weights": w,
                                       "first_loss": round(first, 4), "repeat_loss": round(second, 4)})
        return read

    def moments(self, layer: int, head: int, tokens: list[str]) -> list[dict]:
        """The 2-layer model's best head at three evaluations: before the loss on the second copy
        falls (the last reading before it first drops a tenth of its whole fall), during (the first
        reading past half of it), after (the last reading)."""
        readings = self.readings["with"]
        losses = [r["repeat_loss"] for r in readings]
        top, fall = losses[0], losses[0] - min(losses)
        before = max(next((i for i, v in enumerate(losses) if v < top - 0.1 * fall), 1) - 1, 0)
        during = next(i for i, v in enumerate(losses) if v <= top - 0.5 * fall)
        out = []
        for label, i in (("before", before), ("during", during), ("after", len(readings) - 1)):
            w = readings[i]["weights"][layer, head]  # (T, T): the induction stripe is the diagonal n - 1 left
            out.append({"step": readings[i]["step"], "label": label, "tokens": tokens,
                        "weights": [[round(float(v), 3) for v in row] for row in w],
                        "score": round(float(readings[i]["scores"][layer, head]), 4),
                        "repeat_loss": readings[i]["repeat_loss"]})
        return out

    def write(self, out: Path, arms: dict, tokenizer: BPETokenizer, command: str, steps: int, about: str) -> None:
        """`induction/induction.json` and the two models (`induction-2layer`, `induction-1layer`)
        beside `out`, each with the tokenizer it reads."""
        ids = repeated_random(arms["with"].model, length(arms["with"].model), 0)[0].tolist()
        tokens = [tokenizer.decode([i]) if i != tokenizer.bos_id else "<s>" for i in ids]
        result = {"command": command, "data": about, "steps": steps, "length": length(arms["with"].model),
                  "curves": {}, "best_head": {}, "final": {}}
        for arm, name in NAMES.items():
            readings = self.readings[arm]
            final = readings[-1]["scores"]
            layer, head = divmod(int(final.argmax()), final.size(1))
            result["best_head"][name] = {"layer": layer, "head": head, "score": round(float(final.max()), 4)}
            result["final"][name] = round(float(final.max()), 4)
            result["curves"][name] = {
                "repeat_loss": [[r["step"], r["repeat_loss"]] for r in readings],
                "first_loss": [[r["step"], r["first_loss"]] for r in readings],
                "induction": [[r["step"], round(float(r["scores"][layer, head]), 4)] for r in readings]}
            folder = out.parent / f"induction-{name}"
            arms[arm].model.save_pretrained(folder)
            tokenizer.save(folder / "tokenizer.json")
        best = result["best_head"]["2layer"]
        result["moments"] = self.moments(best["layer"], best["head"], tokens)
        (out.parent / "induction").mkdir(parents=True, exist_ok=True)
        (out.parent / "induction" / "induction.json").write_text(json.dumps(result, indent=1, ensure_ascii=False)
                                                                 + "\n", encoding="utf-8")

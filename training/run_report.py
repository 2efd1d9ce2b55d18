"""What a run writes and says once it has trained: metrics.json (what `training.evaluate`,
`publishing.report` and the app read back: the final figures, how the run was made and the settings it
trained with, beside what its time budget chose), the training curve, and its closing lines (the figures,
the samples, and a warning when a classifier learned nothing). Its start line is here too."""

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from model import load_pretrained
from storage import CURVE_NAME, METRICS_NAME, atomic_write_text, finish_run

from . import own_text
from .memory import available_bytes, memory_warning
from .plots import plot_curve
from .run_spec import RunSpec
from .sample import SAMPLE_SETTINGS
from .tasks import LMTask
from .trainer import Trainer

CHANCE_SIGMAS = 2  # a classifier this close to always answering the commoner label learned nothing


@dataclass(frozen=True)
class Provenance:
    """What a run records of where it came from, besides its settings: the data it read (`source`: its
    kind, where, what was held out), its tokenizer (`TokenizerChoice.record`) and when it began (a
    `time.monotonic` reading, from which --max-minutes count)."""

    source: dict
    tokenizer: dict
    started: float


def described(trainer: Trainer) -> dict:
    """The rows of each split, with those the recipe added."""
    return {**trainer.task.corpus.description, **trainer.data.description}


def print_start(spec: RunSpec, trainer: Trainer, origin: Provenance) -> None:
    """The run's first line: the model, the machine, the data and the tokenizer; and a warning when a CPU's
    memory would not hold the largest batch."""
    model, source, tokenizer = trainer.model, origin.source, origin.tokenizer
    held_out = own_text.held_out_line(source, described(trainer))  # with --data, the true share of the tokens
    print(f"{spec.task}: {model.num_parameters():,} parameters on {trainer.device} x{trainer.info.world_size} in "
          f"{trainer.precision}, {described(trainer)}; data {source['source']}, held out {held_out}; tokenizer "
          f"{tokenizer['origin']}: {tokenizer['vocab_size']:,} tokens -> {trainer.out} "
          f"(ready after {time.monotonic() - origin.started:.0f} s)")
    if trainer.device == "cpu":  # on a GPU the fused attention keeps no weights: the estimate is a CPU's
        warning = memory_warning(model.config, spec.train.batch_size, spec.train.max_tokens, model.num_parameters(),
                                 available_bytes())
        if warning:
            print(f"warning: {warning}", file=sys.stderr, flush=True)


def finish(spec: RunSpec, trainer: Trainer, origin: Provenance, reason: str, in_sync: bool) -> dict:
    """Score the checkpoint kept, write metrics.json and the curve, end the run folder's in-progress mark
    and print the closing lines; returns the metrics. `reason`: why training stopped (`trainer.STOPS`);
    `in_sync`: whether every rank ended with the same weights."""
    out, task, data = trainer.out, trainer.task, trainer.data
    best = load_pretrained(out, trainer.device)  # final figures are those of the checkpoint that ships
    final = trainer.final_metrics(best)
    samples = task.samples(best, data)
    metrics = {
        "task": spec.task, "model_type": best.model_type, "preset": spec.preset,
        "parameters": best.num_parameters(), **final,
        "best_step": trainer.best["step"], "steps": trainer.step, "max_steps": trainer.cfg.max_steps,
        "stopped_by": reason,  # and how max_steps was fitted to the minutes:
        **({"sized_to_budget": trainer.plan.sized} if trainer.plan.sized else {}),
        "tokens_seen": trainer.tokens_seen, "train_time_s": round(trainer.elapsed, 1),
        "wall_time_s": round(time.monotonic() - origin.started, 1), "device": device_name(trainer.device),
        "precision": trainer.precision, "world_size": trainer.info.world_size,
        "ddp_weights_in_sync": in_sync,
        "command": " && ".join(trainer.commands),
        **({"init_from": trainer.init_from} if trainer.init_from else {}),
        "data": {**origin.source, **described(trainer), "max_examples": spec.max_examples},
        "split_seed": spec.split_seed, "tokenizer": origin.tokenizer,
        **({"sample_prompts": task.sample_prompts()} if samples else {}),
        "model_config": asdict(best.config), "train_config": asdict(trainer.cfg),
        **({"classifier_config": asdict(data.classifier)} if data.classifier is not None else {}),
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "history": trainer.history, **({"samples": samples} if samples else {}),
    }
    atomic_write_text(out / METRICS_NAME, json.dumps(metrics, indent=2) + "\n")
    plot_curve(trainer.history, out / CURVE_NAME, title=f"{spec.task} ({spec.preset})")
    finish_run(out)
    print_summary(spec, trainer, origin, metrics, isinstance(best, LMTask.model_class))
    return metrics


def print_summary(spec: RunSpec, trainer: Trainer, origin: Provenance, metrics: dict, lm: bool) -> None:
    """The closing lines: where training stopped, the final figures, the samples, what to run next."""
    out, source, read = trainer.out, origin.source, metrics["final_eval"]
    summary = {k: v for k, v in metrics.items() if k.startswith(("val_", "test_")) and not isinstance(v, list)}
    rows = ", ".join(f"{split} {r['rows']:,} of {r['of']:,} rows" for split, r in read.items())
    print(f"done ({metrics['stopped_by']}): step {trainer.step}, {trainer.tokens_seen:,} tokens, training "
          f"{trainer.elapsed:.0f} s, wall time {minutes(time.monotonic() - origin.started)} -> {out}\n"
          f"final evaluation: {rows}\n" + json.dumps(summary, indent=2))
    if "samples" in metrics:
        print(f"samples ({', '.join(f'{k} {v}' for k, v in SAMPLE_SETTINGS.items())}; more: python -m training.sample "
              f"--checkpoint {out}):\n" + "\n".join(f"  {text!r}" for text in metrics["samples"]))
    if "val_bpb" in metrics:
        print(bpb_line(metrics["val_bpb"], own_text.held_out_line(source, described(trainer)), read.get("val", {}),
                       out))
    labels = getattr(trainer.data.splits["val"], "labels", None)
    if "val_accuracy" in metrics and labels:
        warning = chance_warning(metrics["val_accuracy"], read["val"]["rows"], labels, spec.init_from, spec.data,
                                 described(trainer).get("train_pairs"))
        if warning:
            print(warning, file=sys.stderr, flush=True)
    print(f"score it again: python -m training.evaluate --checkpoint {out}; serve it: python -m demo "
          f"--{'lm' if lm else 'sentiment'} {out}")


def bpb_line(bpb: float, held_out: str, val: dict, out) -> str:
    """The run's last figure, and whether it read every held-out window (`val`: the final evaluation's
    rows and of) or the sample the time left allowed: then it says so and how to read them all."""
    sample = (f"; measured on {val['rows']:,} of its {val['of']:,} windows, a sample the time left allowed: "
              f"`python -m training.evaluate --checkpoint {out}` reads them all"
              if val.get("rows", 0) < val.get("of", 0) else "")
    return f"held-out bits per byte: {bpb:.3f} ({held_out}{sample})"


def trained_text(checkpoint: str | None) -> str | None:
    """The file a checkpoint was trained on with `--data` (a text of its own, with that text's own
    tokenizer), from its metrics.json; None for any other checkpoint, or none."""
    try:
        data = json.loads((Path(checkpoint) / METRICS_NAME).read_text(encoding="utf-8")).get("data")
    except (TypeError, OSError, ValueError, AttributeError):
        return None
    own = isinstance(data, dict) and data.get("kind") == "data" and data.get("source")
    return Path(str(data["source"])).name if own else None


def chance_warning(accuracy: float, rows: int, labels: list[int], init: str | None, table: str | None = None,
                   train_rows: int | None = None) -> str | None:
    """One line when a classifier's held-out `accuracy` (on `rows` rows) is within CHANCE_SIGMAS standard
    errors of always answering the commoner of the held-out `labels`: it learned nothing. On IMDB, when it
    started from a language model of a text of its own (`init`), that is the likely cause: from the laptop
    LM of tinyshakespeare the laptop sentiment preset stayed at 50.6% (docs/training.md). On a `table` of
    your own (`--data`), its `train_rows` are the first limit (`own_text.table_advice`)."""
    majority = max(labels.count(label) for label in set(labels)) / len(labels)
    if accuracy > majority + CHANCE_SIGMAS * (majority * (1 - majority) / max(1, rows)) ** 0.5:
        return None
    cause = trained_text(init)
    why = (f": it started from {init}, a language model of `{cause}` that reads with that text's own tokenizer, "
           "not of reviews (from one of Shakespeare this preset stayed at 50.6%: docs/training.md); start from "
           "checkpoints/lm, the IMDB LM, instead" if cause else "")
    if table:
        why = own_text.table_advice(table, train_rows, rows, init, cause)
    return (f"warning: held-out accuracy {accuracy:.1%} is chance (the commoner label alone scores {majority:.1%}): "
            f"this classifier learned nothing{why}")


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d} ({seconds:.0f} s)"


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"

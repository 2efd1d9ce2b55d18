"""Everything written about the results is generated from the runs' metrics.json, so it cannot go stale.

    python -m publishing.report [checkpoints ...] [--frontier docs/frontier.png]   # the results table
    python -m publishing.report --cards                      # checkpoints/*/README.md, the model cards
    python -m publishing.report --results docs/results.md    # the results and experiment tables

Every row names the metric, its value, the split it was measured on and the command that
reproduces it (as recorded in metrics.json by the run that produced the checkpoint). A model card
carries the Hugging Face metadata (license, dataset, `model-index` with the reported metrics) that
the Hub reads, then intended use, limitations, training and evaluation.
"""

import argparse
import json
import shlex
from dataclasses import asdict, replace
from pathlib import Path

from classifier import ClassifierConfig
from model import read_config
from storage import CARD_NAME, METRICS_NAME, atomic_write_text, chain, tokens_in_all
from training.contract import ModelCard
from training.data import HUB_IMDB
from training.tasks import TASKS

ROWS = [  # (metrics.json key, label, split, format)
    ("val_bpb", "bits per byte", "validation ({n:,} held-out train reviews)", "{:.3f}"),
    ("val_ppl", "perplexity (per token)", "validation", "{:.1f}"),
    ("val_loss", "cross-entropy (nats/token)", "validation", "{:.4f}"),
    ("val_accuracy", "accuracy", "validation ({n:,} held-out train reviews)", "{:.2%}"),
    ("test_bpb", "bits per byte", "IMDB test", "{:.3f}"),
    ("test_accuracy", "accuracy", "IMDB test", "{:.2%}"),
]
METRIC_TYPES = {"bpb": "bits_per_byte", "ppl": "perplexity", "loss": "loss", "accuracy": "accuracy"}
LICENSE = "mit"  # the repository's LICENSE file


def reported(m: dict) -> list[tuple[str, str, str, str]]:
    """The ROWS this run has, their split named with its size (a classifier now validates on the
    held-out rows' selection part only); a classifier's loss is left out (its accuracy is the figure)."""
    return [(key, label, split.format(n=_held_out(m)).replace("held-out train reviews", _held_out_kind(m)), fmt)
            for key, label, split, fmt in ROWS if key in m and not (key == "val_loss" and "val_accuracy" in m)]


def own_text(m: dict) -> dict | None:
    """What a run on its own text (`training.run --data`) recorded of it (file, unit, documents, bytes);
    None for a run on IMDB, which every other sentence of a card assumes."""
    data = m.get("data")
    return data if isinstance(data, dict) and data.get("kind") == "data" else None


def _file_name(data: dict) -> str:
    return Path(str(data["source"])).name


def _held_out_kind(m: dict) -> str:
    own = own_text(m)
    return f"held-out {own.get('unit', 'documents')} of `{_file_name(own)}`" if own else "held-out train reviews"


def _held_out(m: dict) -> int:
    data = m.get("data", {})
    return data.get("val_texts") or data.get("val_pairs") or m.get("val_examples")


def table(runs: dict[str, dict]) -> str:
    lines = ["| model | metric | value | split | parameters | trained | command |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, m in runs.items():
        for key, label, split, fmt in reported(m):
            lines.append(f"| `{name}` | {label} | {fmt.format(m[key])} | {split} | "
                         f"{m['parameters'] / 1e6:.2f} M | {trained(m)} | `{as_one_command(m['command'])[0]}` |")
    return "\n".join(lines)


def trained(m: dict) -> str:
    minutes = m["train_time_s"] / 60
    return (f"{m['steps']} steps, {m['tokens_seen'] / 1e6:.1f} M tokens, "
            f"{minutes:.{1 if minutes < 10 else 0}f} min, {m['device']}")


def load_runs(roots: list[Path]) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for root in roots for p in sorted(root.glob(f"*/{METRICS_NAME}"))}


# --- model cards -------------------------------------------------------------------------------

def _split_seed(m: dict) -> int | None:
    """Which seed held the validation rows out: recorded, else the command's --split-seed (runs before it was
    recorded), else the run's --seed."""
    if "split_seed" in m:
        return m["split_seed"]
    words = shlex.split(m["command"].split(" && ")[-1])
    if "--split-seed" in words[:-1]:
        return int(words[words.index("--split-seed") + 1])
    return m.get("train_config", {}).get("seed")


def _split_note(m: dict) -> str:
    seed = _split_seed(m)
    own = own_text(m)
    if own and own.get("held_out_by") == "size":  # a text's tail, not rows drawn by a seed
        return (f"validation = {own['held_out']} of `{_file_name(own)}`, held out, never trained on; "
                "`metrics.json` records the file, its size and a SHA-256 of the held-out texts, so "
                "`training.evaluate --checkpoint` scores exactly them and refuses a file changed since")
    if own:
        return (f"validation = {_held_out(m):,} of the {own.get('documents', 0):,} {own.get('unit', 'documents')} "
                f"of `{_file_name(own)}`, held out (fixed seed {seed}), never trained on; `metrics.json` records "
                "the file, its size and a SHA-256 of the held-out texts, so `training.evaluate --checkpoint` "
                "scores exactly them and refuses a file changed since")
    rows = (" (for a classifier, the *selection* rows: the first 40% of the reviews held out, on which the "
            "kept step and the temperature were chosen; the other held-out reviews, the *report* rows, served "
            "no choice and are scored by `benchmarks.sentiment_report`)") if "val_accuracy" in m else ""
    return (f"validation = {_held_out(m):,} reviews held out of IMDB's train split{rows} (fixed seed {seed}; "
            "the same rows every run with the same `--val-size` and `--seed` or `--split-seed`), never trained on; "
            "not IMDB's test split" + (", scored separately below" if any(k.startswith("test_") for k in m) else ""))


def card_metadata(name: str, m: dict) -> str:
    """The YAML front matter the Hub reads, with `model-index` holding every reported figure."""
    from huggingface_hub import EvalResult, ModelCardData

    card, own = _card(m), own_text(m)
    dataset = {"dataset_type": _file_name(own), "dataset_name": _file_name(own)} if own else {
        "dataset_type": HUB_IMDB, "dataset_name": "IMDB"}
    results = [EvalResult(task_type=card.pipeline_tag, task_name=card.task_name, **dataset,
                          dataset_split=("held-out" if own else "train") if key.startswith("val_") else "test",
                          metric_type=METRIC_TYPES[key.split("_", 1)[1]], metric_value=m[key],
                          metric_name=f"{'validation' if key.startswith('val_') else 'test'} {label}")
               for key, label, _, _ in reported(m)]
    data = ModelCardData(license=LICENSE, language="en", library_name="pytorch", datasets=None if own else [HUB_IMDB],
                         pipeline_tag=card.pipeline_tag, tags=[*card.tags, *([] if own else ["imdb"]), "safetensors"],
                         model_name=f"tiny-transformers-{name}", eval_results=results)
    return data.to_yaml()


BACKWARD_NOTE = (" This one reads each review from its last token to its first: its encoder starts from a "
                 "language model trained on reviews written backwards (`--set reverse=1`). It is the second "
                 "reader of the app's Sentiment tab, whose verdict averages its probabilities with the forward "
                 "classifier's (ULMFiT's forward + backward ensemble, Howard & Ruder 2018).")


def _card(m: dict) -> ModelCard:
    """The task's card text; for a model of its own text (`--data`), the task's own-text card, if it has
    one, with the file's name in it."""
    own, task = own_text(m), TASKS[m["task"]]
    if not (own and task.own_text_card):
        return task.card
    named = task.own_text_card
    data = _file_name(own)
    return replace(named, what=named.what.format(data=data), intended=named.intended.format(data=data),
                   limitations=[line.replace("{data}", data) for line in named.limitations])


def _data_sentence(m: dict) -> str:
    """Where the training text came from, in the card's Training section."""
    own = own_text(m)
    if not own:
        return f"IMDB reviews (`{HUB_IMDB}`)"
    return (f"its own text, `{_file_name(own)}` ({own.get('bytes', 0):,} bytes, {own.get('documents', 0):,} "
            f"{own.get('unit', 'documents')}; `training.run --data`)")


def _rescore(name: str, m: dict) -> str:
    """The command that scores the checkpoint on its held-out rows again."""
    if own_text(m):  # the run recorded its file and held-out part: no other flag
        return f"python -m training.evaluate --checkpoint checkpoints/{name}"
    return f"python -m training.evaluate --checkpoint checkpoints/{name} --data-dir ../shared/data/imdb"


def model_card(name: str, m: dict, config: dict, classifier: dict | None = None) -> str:
    """A checkpoint's README.md: metadata, what it is, intended use, limitations, training, evaluation.
    `config`: its config.json (the architecture); `classifier`: a classifier's classifier.json."""
    card = _card(m)
    settings = classifier or {}
    facts = {"params": f"{m['parameters'] / 1e6:.1f}", "context": config.get("block_size"),
             "labels": " / ".join(settings.get("labels") or []), "max_src": config.get("max_src_len"),
             "head": (config.get("max_src_len") or 0) - (settings.get("src_keep_tail") or 0) - 1,  # - the end token
             "tail": settings.get("src_keep_tail"), "temperature": settings.get("temperature", 1.0)}
    rows = "\n".join(f"| {label} | {fmt.format(m[key])} | {split} |" for key, label, split, fmt in reported(m))
    confusion = ""
    if "val_confusion" in m and settings.get("labels"):
        header = " | ".join(f"predicted {label}" for label in settings["labels"])
        body = "\n".join(f"| true {label} | " + " | ".join(f"{v:,}" for v in row) + " |"
                         for label, row in zip(settings["labels"], m["val_confusion"], strict=True))
        confusion = (f"\nConfusion matrix on validation:\n\n| | {header} |\n|---|"
                     + "---|" * len(settings["labels"]) + f"\n{body}\n")
    shape = ", ".join(f"{k}={v}" for k, v in config.items() if k != "model_type")
    classifier_line = ("" if not settings else "; as a classifier (`classifier.json`): "
                       + ", ".join(f"{k}={v}" for k, v in settings.items()))
    files = "`config.json` (the architecture), " + ("`classifier.json` (labels, review cut, temperatures), "
                                                    if settings else "")
    note, command = _command_note(m["command"])
    return f"""---
{card_metadata(name, m).strip()}
---

# tiny-transformers `{name}`

{card.what}{BACKWARD_NOTE if config.get("reverse") else ""}

- {m['parameters']:,} parameters (`{m['model_type']}`): {shape}{classifier_line}
- Files: {files}`model.safetensors` (weights, safetensors only), `tokenizer.json` (byte-level BPE)

## Intended use

{card.intended}

## Limitations

{chr(10).join(f"- {line.format(**facts)}" for line in card.limitations)}

## Training

Data: {_data_sentence(m)}: {_counts(m.get("data", {}))}. Trained for {trained(m)}.
The weights are those of the step with the best validation score (step {m['best_step']:,} of
{m['steps']:,}); that step is chosen on the split reported below, so read its figure as slightly
optimistic. {note}{_copied(name, m['command'])}:

```bash
{command}
```
{_started_from(m)}
## Evaluation

| metric | value | split |
|---|---|---|
{rows}

Split: {_split_note(m)}.
{confusion}
Re-score it (the same held-out rows):

```bash
{_rescore(name, m)}
```

## How to load

With this project's `model` and `tokenization` packages (a local folder or a Hub repo id):

```python
from model import load_pretrained
from tokenization import BPETokenizer

model = load_pretrained("checkpoints/{name}")  # or the Hub repo id it was pushed to
tokenizer = BPETokenizer.from_file("checkpoints/{name}")
```

Generated by `python -m publishing.report --cards` from `metrics.json`; do not edit by hand.
"""


def _started_from(m: dict) -> str:
    """A fine-tuned or continued model names what it started from (as `storage.lineage` recorded it when
    the run began: the folder's name may hold other weights today) and how that was trained, back to the
    run that started from scratch."""
    ancestors = chain(m)
    if not ancestors:
        return ""
    said = []
    for record in ancestors:
        how = (f", trained for {trained(record)} by `{as_one_command(record['command'])[0]}`"
               if {"command", "steps", "tokens_seen", "train_time_s", "device"} <= record.keys() else "")
        said.append(f"`{record['checkpoint']}` as it was then (weights SHA-256 `{record['weights_sha256'][:16]}`){how}")
    return (f"\nIt started from {'; that one from '.join(said)}: {tokens_in_all(m) / 1e6:.1f} M tokens in all, "
            "counting its ancestors'.\n")


def _counts(data: dict) -> str:
    """{"train_texts": 72500, ...} -> "72,500 train texts, ..." (the run's own record of its data)."""
    return ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in data.items() if isinstance(v, int))


STRETCH_ONLY = ("--max-minutes", "--threads")  # where a stretch stopped and how many cores it had: not what it trained


def _stretches(command: str) -> list[tuple[str, str | None]]:
    """(schedule, --threads) of each invocation in a run's recorded command: the schedule is the
    invocation without the flags in STRETCH_ONLY and without --resume."""
    found = []
    for stretch in command.split(" && "):
        words, kept, threads = shlex.split(stretch), [], None
        while words:
            word = words.pop(0)
            if word in STRETCH_ONLY:
                value = words.pop(0)
                threads = value if word == "--threads" else threads
            elif word != "--resume":
                kept.append(word)
        found.append((shlex.join(kept), threads))
    return found


def as_one_command(command: str) -> tuple[str, int]:
    """A long CPU run trains in stretches: `--max-minutes` ends one, `--resume` continues it exactly (the
    same batches, optimizer and random state), and the run records each invocation. When the stretches
    differ in nothing but the flags in STRETCH_ONLY, they are one schedule: return it as the single
    command that trains it, and how many stretches it took. Anything else (a raised --max-steps) is a
    new segment, and the chain is returned as recorded."""
    stretches = _stretches(command)
    schedules = {schedule for schedule, _ in stretches}
    return (schedules.pop(), len(stretches)) if len(stretches) > 1 and len(schedules) == 1 else (command, 1)


def _command_note(command: str) -> tuple[str, str]:
    """(how the card introduces the command, the command it shows): as recorded, or as the one
    schedule its stretches ran."""
    shown, stretches = as_one_command(command)
    if stretches == 1:
        return "The command, as the run recorded it in `metrics.json`", shown
    threads = list(dict.fromkeys(threads for _, threads in _stretches(command) if threads))
    on = f" (on {', then '.join(threads)} CPU threads)" if len(threads) > 1 else ""
    return (f"It ran in {stretches} stretches{on}, each ended by `--max-minutes` and continued by `--resume` "
            "(exactly: the same batches, optimizer and random state; each stretch's command is in "
            "`metrics.json`); as one command"), shown


def _copied(name: str, command: str) -> str:
    """A checkpoint trained elsewhere and copied into checkpoints/ says so."""
    words = command.split()
    out = words[words.index("--out") + 1] if "--out" in words[:-1] else None
    return "" if out in (None, f"checkpoints/{name}") else f" (it wrote to `{out}`; this folder holds a copy)"


def write_card(directory: Path) -> Path:
    """Write `directory/README.md` from its metrics.json, config.json and classifier.json; return the path."""
    m = json.loads((directory / METRICS_NAME).read_text(encoding="utf-8"))
    if m.get("task") not in TASKS:
        raise ValueError(f"{directory}: no model card for task {m.get('task')!r} (known: {sorted(TASKS)})")
    config = read_config(directory)
    path = directory / CARD_NAME
    settings = ClassifierConfig.from_pretrained(directory)
    atomic_write_text(path, model_card(directory.name, m, config, asdict(settings) if settings else None))
    return path


# --- docs/results.md ---------------------------------------------------------------------------

def experiments_table(runs: dict[str, dict], where: str) -> str:
    """One row per run: its headline figure, size, training and the command that reproduces it."""
    lines = ["| run | task | figure | parameters | trained | command |", "| --- | --- | --- | --- | --- | --- |"]
    for name, m in runs.items():
        key, label, _, fmt = reported(m)[0]
        lines.append(f"| [`{name}`]({where}/{name}/{METRICS_NAME}) | {m['task']} | {label} {fmt.format(m[key])} | "
                     f"{m['parameters'] / 1e6:.2f} M | {trained(m)} | `{as_one_command(m['command'])[0]}` |")
    return "\n".join(lines)


def why_table(root: Path = Path("checkpoints/why")) -> str:
    """One row per part `training.why` trained without (`<root>/<part>/why.json`), and the induction
    run's final scores: what each verdict rests on, with the command that made it."""
    lines = ["| part | without it | held-out loss with (spread) | without (spread) | verdict | measure: with / without "
             "| command |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for path in sorted(root.glob("*/why.json")):
        w = json.loads(path.read_text(encoding="utf-8"))
        f, s, m = w["final"], w["spread"], w["measure"]
        lines.append(f"| [{w['part']}](../{path.as_posix()}) | {w['change']} | {f['with']:.3f} ({s['with']:.3f}) | "
                     f"{f['without']:.3f} ({s['without']:.3f}) | {w['verdict']} | {m['name']}: {_value(m['with'])} / "
                     f"{_value(m['without'])} | `{w['command']}` |")
    induction = root / "induction" / "induction.json"
    if induction.is_file():
        i = json.loads(induction.read_text(encoding="utf-8"))
        lines += ["", f"Induction (`{i['command']}`, {i['steps']} steps; {i['data']}): the best head's score on a "
                      f"random sequence of {i['length']} tokens shown twice, 2 layers "
                      f"**{i['final']['2layer']:.2f}**, 1 layer **{i['final']['1layer']:.2f}**."]
    return "\n".join(lines)


def _value(v) -> str:
    return " ".join(f"{x:g}" for x in v) if isinstance(v, list) else f"{v:g}"


def results_markdown(shipped: dict[str, dict], experiments: dict[str, dict]) -> str:
    return f"""# Results

Generated by `python -m publishing.report --results docs/results.md` from `checkpoints/*/{METRICS_NAME}`
and `docs/experiments/*/{METRICS_NAME}`; every command reproduces its row. Validation is the reviews
each run held out of IMDB's train split (fixed seed), never trained on: all 2,500 for the runs below; a
classifier trained since the selection/report split validates on its 1,000 selection rows, and the 1,500
report rows are scored only by `benchmarks.sentiment_report`.

## Shipped checkpoints

{table(shipped)}

## Experiments

Runs kept for comparison (each folder holds the run's `{METRICS_NAME}` and training curve).

{experiments_table(experiments, "experiments")}

Validation quality against minutes of training, every run's periodic evaluations
(`python -m publishing.report checkpoints docs/experiments --frontier docs/frontier.png`):

![frontier](frontier.png)

## Why each part exists: trained without it

The same small model trained with and without one part (`python -m training.why`, docs/why.md): the
held-out loss of each arm is the mean over its seeds (nats per token), the spread their range; the
verdict is "worse" only when the difference passes both spreads together.

{why_table()}
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m publishing.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", type=Path, default=[Path("checkpoints")],
                        help="folders whose */metrics.json are read (default: checkpoints)")
    parser.add_argument("--frontier", type=Path, help="also draw the quality-vs-time figure to this PNG")
    parser.add_argument("--cards", action="store_true", help="write README.md, the model card, into each run folder")
    parser.add_argument("--results", type=Path, help="write the results and experiment tables to this Markdown file "
                                                     "(reads checkpoints/ and docs/experiments/)")
    args = parser.parse_args(argv)
    runs = load_runs(args.roots)
    if args.cards:
        for root in args.roots:
            for metrics in sorted(root.glob(f"*/{METRICS_NAME}")):
                print(f"wrote {write_card(metrics.parent)}")
    if args.results:
        atomic_write_text(args.results, results_markdown(load_runs([Path("checkpoints")]),
                                                         load_runs([Path("docs/experiments")])))
        print(f"wrote {args.results}")
    if not (args.cards or args.results):
        print(table(runs))
    if args.frontier:
        from .frontier import plot_frontier

        plot_frontier(runs, args.frontier)


if __name__ == "__main__":
    main()

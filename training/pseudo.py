"""Self-training: the unlabeled reviews, labelled by the shipped readers, as more training rows
(issue 28).

Why: IMDB ships 50,000 unlabeled reviews beside its 25,000 labelled ones, twice as much text of the
same kind, which the classifier has only seen as language-model pretraining. Self-training puts
them to work on the task itself: a teacher labels them, the confident ones join the gold rows, and
a student trains on both with noise (the crops and dropout of the recipe), so that it learns from
the teacher's reading of many more reviews rather than copying it on the same ones (Noisy Student,
Xie et al. 2020; for text, Du et al. 2021, "Self-training Improves Pre-training for Natural Language
Understanding", with in-domain unlabeled text as here). The teacher is
the verdict the app shows, the readers averaged (`classifier.Classifier`) at their pair
temperature, so a student of each reading order learns from both.

Two steps, so that the scoring runs once and in stretches (two readers scored 3.5 reviews a second
on one fp32 thread of the project's 2-core AVX2 CPU, beside a training run: about 4 hours for all
50,000):

    OMP_NUM_THREADS=1 python -m training.pseudo --teacher checkpoints/sentiment checkpoints/sentiment-backward \\
        --data-dir ../shared/data/imdb --out runs/pseudo/pair.jsonl [--start 0 --limit 10000] [--device cuda]
    python -m training.pseudo --out runs/pseudo/pair.jsonl --summary      # how far it is, what it holds
    python -m training.run --task sentiment ... --pseudo-labels runs/pseudo/pair.jsonl --pseudo-confidence 0.9

The labels file is a header line (teachers, their weights' SHA-256, the held-out rows, the split's
size; checked on every later call and by training) and one line per unlabeled review,
`{"review": row in the split's file, "label": index of the verdict in the teacher's labels, "p": its
probability}`, appended and flushed batch by batch: a second call skips the reviews already there,
a killed one loses at most its last batch. It holds row numbers, not text, so it is no copy of the
data. Reviews whose text is a held-out review's (IMDB repeats 21 of them among its unlabeled ones)
are never scored (`evidence.held_out_free_rows`); training takes the rows whose `p` is at least
`--pseudo-confidence`, as many of each label (`load_pseudo_labels`). The default 0.9 was read off
the selection rows: the pair shipped then (the backward reader of 1,159 steps, kept in the labels
file's header by its SHA-256) gives 78.7% of those reviews a verdict of 0.9 or more, and is right on
97.5% of them (on all of them: 92.9%).
"""

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from tqdm.auto import tqdm

from classifier import Classifier, Reader
from cli import Parser
from model import PRECISIONS, autocast, resolve_device, resolve_precision
from storage import WEIGHTS_NAME
from tokenization import clean_texts

from .data import DataError, load_splits, text_column
from .errors import UsageError, one_line_errors
from .evidence import json_lines, read_cache, read_for_training, reviews_to_do, teacher_sha
from .heldout import add_held_out_arguments

SPLIT = "unsupervised"
FORMAT = 1  # the file's layout; a change makes old files refused, not misread
CHECKED = ("format", "teacher_sha", "val_size", "seed", "split_rows")  # what a later call must agree with
CHUNK = 256  # reviews scored between two flushes


def build_parser() -> Parser:
    p = Parser("python -m training.pseudo", __doc__)
    p.add_argument("--teacher", nargs="+", default=["checkpoints/sentiment", "checkpoints/sentiment-backward"],
                   help="the sentiment readers whose averaged verdict labels the reviews (the app's pair by default)")
    add_held_out_arguments(p)  # --data-dir, and --val-size/--seed: which rows are held out
    p.add_argument("--out", default="runs/pseudo/pair.jsonl", help="the labels file (appended to)")
    p.add_argument("--start", type=int, default=0, help="first review, counted among the split's usable rows")
    p.add_argument("--limit", type=int, help="reviews from --start (default: all)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--precision", choices=list(PRECISIONS), default="auto",
                   help="bf16 autocast where the device has it natively (auto), or fp32")
    p.add_argument("--max-tokens", type=int, default=16384, help="padded source tokens per batch")
    p.add_argument("--summary", action="store_true",
                   help="only print what the file at --out holds (reviews, verdicts by label and confidence)")
    return p


def summary(path: str | Path, confidences: tuple[float, ...] = (0.8, 0.9, 0.95)) -> dict:
    """What a labels file holds, for a build that runs in stretches: how many of the split's reviews
    it has labelled, and per confidence how many verdicts of each label (by index in the teacher's
    labels, classifier.json) reach it and how many rows training would then add (as many of each label)."""
    found, _ = read_cache(Path(path))
    if found is None:
        raise UsageError(f"--out {path}: no labels file there yet")
    verdicts = []
    for line in json_lines(Path(path).read_text(encoding="utf-8"))[1:]:
        try:
            verdicts.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line of a build still running
            continue
    by_label = lambda at: Counter(str(v["label"]) for v in verdicts if v["p"] >= at)
    return {"file": str(path), "teacher": found["teacher"], "reviews": len(verdicts), "of": found["split_rows"],
            "verdicts": dict(sorted(by_label(0).items())),
            "confident": {f"{at:g}": {"by_label": dict(sorted(by_label(at).items())),
                                      "training_rows": 2 * min(by_label(at).values(), default=0)
                                      if len(by_label(at)) == 2 else 0} for at in confidences}}


def build(args: argparse.Namespace) -> Path:
    """Append the verdicts of the requested reviews not yet in the file; returns its path."""
    for teacher in args.teacher:
        if not (Path(teacher) / WEIGHTS_NAME).is_file():
            raise UsageError(f"--teacher {teacher}: no {WEIGHTS_NAME} there (a sentiment checkpoint folder, please)")
    splits = load_splits(args.data_dir)
    if SPLIT not in splits:
        raise DataError(f"the data has no {SPLIT!r} split (it has {sorted(splits)})")
    out = Path(args.out)
    header = {"format": FORMAT, "teacher": [str(t) for t in args.teacher],
              "teacher_sha": [teacher_sha(t) for t in args.teacher], "data_dir": str(args.data_dir),
              "val_size": args.val_size, "seed": args.seed, "split_rows": len(splits[SPLIT])}
    found, todo = reviews_to_do(out, header, CHECKED, splits, SPLIT, args)
    if not todo:
        return out

    device = resolve_device(args.device)
    try:
        teacher = Classifier([Reader.from_pretrained(t, device, name=f"{i}:{t}") for i, t in enumerate(args.teacher)])
    except ValueError as e:
        raise UsageError(f"--teacher: sentiment checkpoints with the same labels, please ({e})") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(out, "a", encoding="utf-8") as f, autocast(device, resolve_precision(args.precision, device)):
        if found is None:
            f.write(json.dumps(header) + "\n")
        bar = tqdm(total=len(todo), desc="pseudo-labels", unit="review", mininterval=30.0, file=sys.stderr)
        for at in range(0, len(todo), CHUNK):
            chunk = todo[at : at + CHUNK]
            texts = clean_texts(text_column(splits[SPLIT], "text", SPLIT, chunk))
            p, label = teacher.read_texts(texts, args.max_tokens).log_probs.exp().max(-1)
            f.writelines(json.dumps({"review": r, "label": int(y), "p": round(float(q), 5)}) + "\n"
                         for r, y, q in zip(chunk, label, p, strict=True))
            f.flush()
            bar.update(len(chunk))
        bar.close()
    elapsed = time.perf_counter() - started
    print(f"{len(todo):,} reviews in {elapsed:.0f} s ({len(todo) / elapsed:.1f} reviews/s) -> {out}", file=sys.stderr)
    return out


def load_pseudo_labels(path: str, unlabeled, val_size: int, seed: int, confidence: float,
                       labels: list[str]) -> tuple[list[str], list[str]]:
    """(texts, label words) of the reviews of the labels file at `path` whose verdict's probability
    is at least `confidence`, in file order, for training (`--pseudo-labels`). `unlabeled`: the
    data's unlabeled split. As many of each label are kept, the most confident of the more
    frequent one: the gold rows are balanced, and a teacher that calls more reviews positive (or
    a file built over a stretch of the split that is) would otherwise move the student's prior. A
    file made for other held-out rows (--val-size, --seed) or another data folder (the split's
    size) is refused: its reviews could be this run's held-out ones."""
    header, lines = read_for_training(path, "--pseudo-labels", FORMAT, "training.pseudo", val_size, seed)
    if unlabeled is None or header["split_rows"] != len(unlabeled):
        raise UsageError(f"--pseudo-labels {path} labels an unlabeled split of {header['split_rows']:,} reviews; "
                         f"this data has {0 if unlabeled is None else len(unlabeled):,}")
    by_label = {}  # label -> [(p, order, row)] of the confident reviews
    for order, line in enumerate(lines):
        try:
            review = json.loads(line)
        except json.JSONDecodeError:  # a torn last line of a build still running
            continue
        if review["p"] >= confidence:
            by_label.setdefault(review["label"], []).append((review["p"], order, review["review"]))
    n = min((len(found) for found in by_label.values()), default=0) if len(by_label) == len(labels) else 0
    kept = sorted((order, row, label) for label, found in by_label.items()
                  for _, order, row in sorted(found, key=lambda f: (-f[0], f[1]))[:n])
    if not kept:
        return [], []
    texts = clean_texts(text_column(unlabeled, "text", SPLIT, [row for _, row, _ in kept]))
    return texts, [labels[label] for _, _, label in kept]


def main(argv: list[str] | None = None) -> Path | dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.summary:
        found = one_line_errors(parser, lambda a: summary(a.out), args)
        print(json.dumps(found, indent=1))
        return found
    return one_line_errors(parser, build, args)


if __name__ == "__main__":
    main()

"""Every combination of readers from several `benchmarks.ensemble --rows` files, on the same held-out rows.

Why: the GPU call's five new readers were scored there (their weights did not all come back), the
shipped readers here; each file holds every row's P(positive) per reader, so any group of readers
from either is scored as `benchmarks.ensemble` scores it (`model.combine_readers`: the mean of the
members' log-probabilities, renormalised, at T = 1), without reading a review again.

    PYTHONPATH=. python docs/experiments/sentiment-gpu-2026-11-28/pair_rows.py A.json B.json [--max-size 4]

Prints the groups that beat the shipped pair on both checks, those level with it or better, then the
best five by each check.
"""
import argparse
import json

import torch

from benchmarks.ensemble import combinations
from model import combine_readers

SHIPPED = ("checkpoints/sentiment", "checkpoints/sentiment-backward")


def read(paths: list[str]) -> tuple[dict, dict]:
    """Every reader's P(positive) per check, and the labels, checked to be the same rows in each file.
    A reader is named by its folder's last part (the GPU's `runs/bwd` is this machine's
    `runs/gpu-2026-11-28/bwd`): the first file that holds it gives its rows."""
    probs, labels = {}, None
    for path in paths:
        result = json.load(open(path))
        if labels is None:
            labels = result["labels"]
        elif result["labels"] != labels:
            raise SystemExit(f"{path}: other held-out rows than {paths[0]}")
        for name, rows in result["p_positive"].items():  # a reader scored in two files: the first file's
            if not any(n.split("/")[-1] == name.split("/")[-1] for n in probs):
                probs[name] = {k: torch.tensor(v, dtype=torch.float64) for k, v in rows.items()}
    return probs, labels


def accuracy(group: tuple[str, ...], probs: dict, labels: dict, check: str) -> float:
    p = [probs[m][check].clamp(1e-7, 1 - 1e-7) for m in group]
    verdict = combine_readers([torch.stack([(1 - q).log(), q.log()], -1) for q in p])  # (N, 2) log-probs
    return (verdict.argmax(-1) == torch.tensor(labels[check])).double().mean().item() * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--max-size", type=int, default=4)
    args = parser.parse_args()
    probs, labels = read(args.files)
    names = list(probs)
    rows = [(group, accuracy(group, probs, labels, "full_reviews"), accuracy(group, probs, labels, "short_text"))
            for group in combinations(names) if len(group) <= args.max_size]
    shipped = next(r for r in rows if set(r[0]) == set(SHIPPED))
    print(f"{len(names)} readers, {len(rows)} groups; shipped pair: {shipped[1]:.2f}% full, {shipped[2]:.2f}% short")
    for title, keep in (("beat the shipped pair on both", lambda r: r[1] > shipped[1] and r[2] > shipped[2]),
                        ("level or better on both", lambda r: r[1] >= shipped[1] and r[2] >= shipped[2])):
        print(f"\n{title}:")
        for group, full, short in sorted(filter(keep, rows), key=lambda r: -(r[1] + r[2])):
            print(f"  {full:6.2f} {short:6.2f}  " + " + ".join(m.split("/")[-1] for m in group))
    for i, check in ((1, "full reviews"), (2, "short text")):
        print(f"\nbest on {check}:")
        for group, full, short in sorted(rows, key=lambda r: -r[i])[:5]:
            print(f"  {full:6.2f} {short:6.2f}  " + " + ".join(m.split("/")[-1] for m in group))


if __name__ == "__main__":
    main()

"""Long reviews read whole or by head + tail: the choice, made on the selection rows, and its cost.

    python -m benchmarks.long_reviews --checkpoint checkpoints/sentiment --also checkpoints/sentiment-backward \\
        --data-dir ../shared/data/imdb --threads 1

The classifier reads a review longer than its encoder's window whole (`tokenization.windows`: the
head + tail cut training reads, then the middle it leaves out, in windows of their own, the scores
averaged). This compares that with the cut alone, as the verdict of every reader given (`--also`),
on two checks, and never on the report rows:

- **the selection rows' long reviews**: those longer than the window (27 of IMDB's 1,000 selection
  rows: too few to choose on alone);
- **joined reviews**: selection reviews of one label joined in a seeded random order, paragraph after
  paragraph, until each document is `--join-tokens` tokens or more, so that head + tail skips whole
  reviews in the middle. Every part says the document's label, so this checks that reading the middle
  costs nothing, not that the middle decides.

Then what reading whole costs: the seconds of one verdict (`Classifier.read_texts` of one review,
every reader, at `--threads` threads, as the app serves a request), median and 95th percentile of
`--repeats`, for reviews of `--lengths` tokens (made of the selection rows' text, cut at a token),
whole and by the cut alone (the reading before whole reviews).
"""

import argparse
import random
import statistics
import time

import numpy as np

from benchmarks.common import add_also, add_checkpoint, benchmark_parser, parse, read_classifier, write_json
from benchmarks.sentiment_baseline import imdb_split
from classifier import Classifier
from tokenization import source_windows
from training.heldout import add_held_out_arguments


def verdicts(classifier: Classifier, texts: list[str]) -> dict[str, np.ndarray]:
    """Each text's label, by the cut alone and whole."""
    return {name: classifier.read_texts(texts, whole=whole).log_probs.argmax(-1).numpy()
            for name, whole in (("head_tail", False), ("whole", True))}


def joined(texts: list[str], labels: list[int], tokens, at_least: int, seed: int) -> tuple[list[str], list[int]]:
    """Documents of same-label texts, joined in a seeded random order until each has `at_least` tokens."""
    docs, doc_labels, rng = [], [], random.Random(seed)
    for label in sorted(set(labels)):
        order = [t for t, y in zip(texts, labels, strict=True) if y == label]
        rng.shuffle(order)
        parts = []
        for text in order:
            parts.append(text)
            if tokens("\n\n".join(parts)) >= at_least:
                docs.append("\n\n".join(parts))
                doc_labels.append(label)
                parts = []
    return docs, doc_labels


def accuracy(classifier: Classifier, texts: list[str], labels: list[int]) -> dict:
    found = verdicts(classifier, texts)
    truth = np.asarray(labels)
    return {"examples": len(texts), **{name: float((pred == truth).mean()) for name, pred in found.items()},
            "labels_differ": int((found["whole"] != found["head_tail"]).sum())}


def latency(classifier: Classifier, text_of: dict[int, str], repeats: int) -> dict:
    """Seconds of one verdict, whole and by the cut alone, per review length."""
    out = {}
    for n, text in text_of.items():
        whole, cut = [], []
        for _ in range(repeats):
            for times, reading in ((whole, True), (cut, False)):
                start = time.perf_counter()
                classifier.read_texts([text], whole=reading)
                times.append(time.perf_counter() - start)
        out[str(n)] = {name: {"p50_s": statistics.median(t), "p95_s": float(np.percentile(t, 95))}
                       for name, t in (("whole", whole), ("head_tail", cut))}
        out[str(n)]["windows"] = len(source_windows([text], classifier.readers[0].tokenizer,
                                                    classifier.readers[0].reading)[0])
        out[str(n)]["p95_ratio"] = out[str(n)]["whole"]["p95_s"] / out[str(n)]["head_tail"]["p95_s"]
    return out


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("long_reviews", __doc__)
    add_checkpoint(parser)
    add_also(parser)
    add_held_out_arguments(parser)
    parser.add_argument("--join-tokens", type=int, default=2100, help="the least tokens of a joined document")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1023, 1024, 3000],
                        help="review lengths in tokens whose verdict is timed")
    parser.add_argument("--repeats", type=int, default=30)
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)
    _, _, texts, labels = imdb_split(args.data_dir, args.val_size, args.seed, "selection")
    ours = read_classifier([args.checkpoint, *args.also])
    tok, size = ours.readers[0].tokenizer, ours.readers[0].reading.max_src_len - 1
    count = lambda text: len(tok.encode(text))
    long = [i for i, text in enumerate(texts) if count(text) > size]
    docs, doc_labels = joined(texts, labels, count, args.join_tokens, args.seed)
    ids = tok.encode("\n\n".join(texts))
    result = {"checkpoint": str(args.checkpoint), **({"also": args.also} if args.also else {}),
              "window_tokens": size, "selection_reviews": len(texts),
              "long_selection_reviews": accuracy(ours, [texts[i] for i in long], [labels[i] for i in long]),
              "joined_reviews": {"at_least_tokens": args.join_tokens,
                                 "median_tokens": float(np.median([count(d) for d in docs])),
                                 **accuracy(ours, docs, doc_labels)},
              "latency": latency(ours, {n: tok.decode(ids[:n]) for n in args.lengths}, args.repeats)}
    for check in ("long_selection_reviews", "joined_reviews"):
        r = result[check]
        print(f"{check:24} n={r['examples']:4}  head + tail {r['head_tail']:.2%}  whole {r['whole']:.2%}  "
              f"labels differ: {r['labels_differ']}")
    for n, r in result["latency"].items():
        print(f"{n:>5} tokens, {r['windows']} window(s): p95 whole {r['whole']['p95_s'] * 1e3:.0f} ms, "
              f"head + tail {r['head_tail']['p95_s'] * 1e3:.0f} ms ({r['p95_ratio']:.2f}x)")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()

"""The classic strong IMDB baseline, on exactly the held-out rows our sentiment model is scored on.

TF-IDF over word unigrams + bigrams, then logistic regression (scores about 90.6% on the IMDB
test split in the literature). Trained on the 22,500 train reviews that `python -m training.run
--task sentiment` trains on, scored on its fixed-seed held-out reviews: all 2,500 (validation), or
the selection or report part of them (`training.heldout`); `--short-text` scores the first and
last sentences of those reviews instead, labelled with the review's label.

    pip install -r benchmarks/requirements.txt
    python -m benchmarks.sentiment_baseline --data-dir ../shared/data/imdb [--split report] [--short-text]
                                            [--json PATH | --no-json]

`--max-src-len 256 [--keep-tail 191]` scores it on the reviews cut exactly as the sentiment model
reads them (its tokenizer, its length limit with the end token, its head or head + tail), which
shows how much of the gap is the truncation rather than the model.
`benchmarks/sentiment_report.py` puts it side by side with a checkpoint, with intervals.
"""

import argparse
import time

from benchmarks.bootstrap import accuracy_with_interval
from benchmarks.common import benchmark_parser, parse, write_json
from tokenization import BPETokenizer, clean_texts
from training.data import load_splits, validation_split
from training.heldout import HELD_OUT_PARTS, add_held_out_arguments, selection_report_split, short_texts
from training.linear_evidence import fit_linear


def imdb_split(data_dir: str, val_size: int, seed: int, part: str) -> tuple[list, list, list, list]:
    """(train texts, train labels, scored texts, scored labels), cleaned: train minus all held-out
    reviews, and the held-out `part` in its fixed order."""
    train = load_splits(data_dir)["train"]
    texts, labels = clean_texts(train["text"]), list(train["label"])
    tr, va = validation_split(len(texts), val_size, seed)
    if part != "validation":
        va = dict(zip(("selection", "report"), selection_report_split(va), strict=True))[part]
    return [texts[i] for i in tr], [labels[i] for i in tr], [texts[i] for i in va], [labels[i] for i in va]


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("sentiment_baseline", __doc__)
    add_held_out_arguments(parser)
    parser.add_argument("--split", default="validation", choices=HELD_OUT_PARTS, help="which held-out rows to score")
    parser.add_argument("--short-text", action="store_true", help="score their first and last sentences instead")
    parser.add_argument("--C", type=float, default=8.0, help="inverse regularisation strength")
    parser.add_argument("--max-src-len", type=int, help="cut reviews as a model with this max_src_len reads them")
    parser.add_argument("--keep-tail", type=int, default=0, help="as the model's src_keep_tail (with --max-src-len)")
    parser.add_argument("--tokenizer", default="checkpoints/tokenizer.json", help="for --max-src-len")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv, precision=None)  # no neural network: scikit-learn's float64

    train_texts, train_labels, texts, labels = imdb_split(args.data_dir, args.val_size, args.seed, args.split)
    if args.short_text:
        short = short_texts(texts, labels)
        texts, labels = [r.text for r in short], [r.label for r in short]
    if args.max_src_len:
        tok = BPETokenizer.from_file(args.tokenizer)
        cut = lambda rows: [tok.decode(ids) for ids in tok.encode_batch(
            rows, max_length=args.max_src_len, add_eos=True, keep_tail=args.keep_tail, padding=False,
            return_tensors=False).input_ids]
        train_texts, texts = cut(train_texts), cut(texts)
    start = time.perf_counter()
    baseline = fit_linear(train_texts, train_labels, args.C)
    correct = [int(p == y) for p, y in zip(baseline.predict(texts), labels, strict=True)]
    result = {"model": "tfidf-uni+bigram-logreg", "split": args.split, "short_text": args.short_text,
              **accuracy_with_interval(correct), "train_examples": len(train_texts),
              "features": len(baseline[0].vocabulary_), "C": args.C,
              "max_src_len": args.max_src_len, "keep_tail": args.keep_tail if args.max_src_len else None,
              "fit_time_s": round(time.perf_counter() - start, 1)}
    write_json(result, args, echo=True)
    return result


if __name__ == "__main__":
    main()

"""The classic strong IMDB baseline, on exactly the validation split our sentiment model uses.

TF-IDF over word unigrams + bigrams, then logistic regression (scores about 90.6% on the IMDB
test split in the literature). Trained on the same 22,500 reviews, scored on the same fixed-seed
2,500 validation reviews as `python -m training.run --task sentiment`.

    pip install -r benchmarks/requirements.txt
    python benchmarks/sentiment_baseline.py --data-dir ../shared/data/imdb [--json PATH]

`--max-src-len 256 [--keep-tail 191]` scores it on the reviews cut exactly as the sentiment model
reads them (its tokenizer, its length limit with the end token, its head or head + tail), which
shows how much of the gap is the truncation rather than the model.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from tokenization import BPETokenizer, clean_text  # noqa: E402
from training.data import load_splits, validation_split  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data/imdb")
    parser.add_argument("--val-size", type=int, default=2500, help="as training.run --val-size")
    parser.add_argument("--seed", type=int, default=1337, help="as training.run --seed")
    parser.add_argument("--C", type=float, default=8.0, help="inverse regularisation strength")
    parser.add_argument("--max-src-len", type=int, help="cut reviews as a model with this max_src_len reads them")
    parser.add_argument("--keep-tail", type=int, default=0, help="as the model's src_keep_tail (with --max-src-len)")
    parser.add_argument("--tokenizer", default="checkpoints/tokenizer.json", help="for --max-src-len")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    train = load_splits(args.data_dir)["train"]
    texts, labels = [clean_text(t) for t in train["text"]], list(train["label"])
    tr, va = validation_split(len(texts), args.val_size, args.seed)
    if args.max_src_len:
        tok = BPETokenizer.from_file(args.tokenizer)
        ids = tok.encode_batch(texts, max_length=args.max_src_len, add_eos=True, keep_tail=args.keep_tail,
                               padding=False, return_tensors=False).input_ids
        texts = [tok.decode(row) for row in ids]
    start = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    x_train = vectorizer.fit_transform([texts[i] for i in tr])
    classifier = LogisticRegression(C=args.C, max_iter=2000).fit(x_train, [labels[i] for i in tr])
    predictions = classifier.predict(vectorizer.transform([texts[i] for i in va]))
    accuracy = sum(int(p == labels[i]) for p, i in zip(predictions, va, strict=True)) / len(va)
    result = {"model": "tfidf-uni+bigram-logreg", "val_accuracy": accuracy, "val_examples": len(va),
              "train_examples": len(tr), "features": x_train.shape[1], "C": args.C,
              "max_src_len": args.max_src_len, "keep_tail": args.keep_tail if args.max_src_len else None,
              "fit_time_s": round(time.perf_counter() - start, 1)}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

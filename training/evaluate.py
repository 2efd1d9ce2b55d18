"""Evaluate a checkpoint on any file, and the metric functions training itself uses.

    python -m training.evaluate --checkpoint runs/mine   # the rows its run held out, found from its metrics.json
    python -m training.evaluate --checkpoint checkpoints/sentiment --data reviews.parquet
    python -m training.evaluate --checkpoint checkpoints/lm --data some_reviews.txt
    python -m training.evaluate --checkpoint checkpoints/lm --data-dir ../shared/data/imdb  # its validation split
    python -m training.evaluate --checkpoint checkpoints/sentiment --data-dir ../shared/data/imdb --split report
    python -m training.evaluate --checkpoint checkpoints/sentiment --data-dir ../shared/data/imdb --split report \
        --short-text

With no --data or --data-dir, a run folder is scored on the rows its run held out, read again from
the data its metrics.json names (`--data`, `--data-dir`) with the same held-out size, seed and
--max-examples; a file that has changed since is refused rather than scored as if it had not.

`--split` picks a part of the held-out reviews (`training.heldout`): all of them (validation), the
selection rows checkpoints are chosen on (a classifier's default: what its run validated on), or the
report rows nothing is tuned on. `--short-text` scores the first and last sentences of those
reviews instead, labelled with the review's label.

A sentiment checkpoint needs `text` and `label` columns (0 = negative, 1 = positive) and prints
accuracy and a confusion matrix; a language-model checkpoint reads a `text` column or a plain
.txt file and prints loss, perplexity and bits per byte.
"""

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from classifier import ClassifierConfig, Reader, calibrated
from cli import Parser
from model import DecoderOnlyLM
from storage import METRICS_NAME, resolve_checkpoint
from tokenization import clean_texts
from tokenization.batches import length_batches

from .calibration import expected_calibration_error
from .data import (
    DataError,
    PairSet,
    TokenStream,
    held_out_digest,
    held_out_of,
    label_column,
    load_splits,
    load_table,
    require_columns,
    text_column,
)
from .heldout import HELD_OUT_PARTS, add_held_out_arguments, held_out_part, held_out_rows, short_texts
from .open_checkpoint import open_checkpoint
from .own_text import read as read_own_text


@torch.inference_mode()
def evaluate_lm(model: DecoderOnlyLM, stream: TokenStream, limit: int | None = None,
                progress: Callable[[int], object] | None = None, spread: bool = False) -> dict:
    """Loss summed over non-overlapping context-sized windows of the concatenated documents (the
    first `limit` windows, or `limit` spread over the stream: `TokenStream.windows`; `progress(n)`
    after each batch of n).

    Bits per byte = total loss / ln 2 / UTF-8 bytes covered, which compares across tokenizers;
    with a window limit the byte count is scaled by the fraction of tokens covered.
    """
    model.eval()
    device = next(model.parameters()).device
    total, n_tokens = 0.0, 0
    for x, y in stream.windows(model.config.block_size, limit, spread=spread):
        logits = model(x.to(device)).logits  # (b, T, vocab)
        total += torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten().to(device),
                                                   reduction="sum").item()
        n_tokens += y.numel()
        if progress:
            progress(len(x))
    if n_tokens == 0:
        raise DataError("not enough text for one evaluation window")
    n_bytes = stream.n_bytes * n_tokens / (len(stream.ids) - 1)
    loss = total / n_tokens
    return {"loss": loss, "ppl": math.exp(loss), "bpb": total / math.log(2) / n_bytes, "tokens": n_tokens}


@torch.inference_mode()
def classify(reader: Reader, pairs: PairSet, max_tokens: int, limit: int | None = None,
             progress: Callable[[int], object] | None = None) -> torch.Tensor:
    """log P(label words | review) for the first `limit` pairs -> (N, K), in pair order, by the
    reader's model and label words. Reviews go in length-bucketed batches of at most `max_tokens`
    padded source tokens (`bucketing`); `progress(n)` after each batch of n."""
    model, tokenizer, candidates = reader.model, reader.tokenizer, reader.candidates
    model.eval()
    device = next(model.parameters()).device
    n = len(pairs) if limit is None else min(limit, len(pairs))
    scores = torch.empty(n, len(candidates))
    ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    for idx in length_batches([len(s) for s in pairs.sources[:n]], max_tokens):
        batch = pairs.batch(idx, **ids)
        src, mask = batch["src_ids"].to(device), batch["src_mask"].to(device)
        scores[idx] = model.candidate_scores(model.encode(src, mask)[0], candidates, mask)[0].float().cpu()
        if progress:
            progress(len(idx))
    return scores


def evaluate_classifier(reader: Reader, pairs: PairSet, labels: list[int], batch_size: int = 32,
                        limit: int | None = None, max_tokens: int | None = None,
                        progress: Callable[[int], object] | None = None) -> dict:
    """Accuracy of text-to-text classification: each review gets the label whose word sequence the
    decoder finds most likely (`classifier_metrics` of `classify`'s scores). The token budget
    defaults to batch_size full-length reviews."""
    scores = classify(reader, pairs, max_tokens or batch_size * reader.config.max_src_len, limit, progress)
    return classifier_metrics(reader, scores, labels)


def classifier_metrics(reader: Reader, scores: torch.Tensor, labels: list[int]) -> dict:
    """Accuracy, the confusion matrix and the target loss (cross-entropy per target token, label words
    and end token, read off the true label's score, so that the encoder runs once per review) of
    `classify`'s scores (N, K) for the first N `labels`; ECE at the reader's temperature."""
    candidates = reader.candidates
    k, n = len(candidates), len(scores)
    truth = torch.tensor(labels[:n])
    predicted = scores.argmax(-1)
    confusion = torch.zeros(k, k, dtype=torch.long).index_put_((truth, predicted), torch.ones(n, dtype=torch.long),
                                                               accumulate=True)  # rows: true, columns: predicted
    n_tokens = sum(len(candidates[y]) + 1 for y in labels[:n])  # label words + the end token
    nll = -scores.gather(1, truth[:, None]).sum().item()
    probs = calibrated(scores, reader.temperature).exp()  # what a reader is shown (`classifier.Reader`)
    return {"accuracy": (predicted == truth).float().mean().item(), "loss": nll / n_tokens, "examples": n,
            "ece": expected_calibration_error(probs, truth), "confusion": confusion.tolist()}


def _texts(path: Path, column: str = "text") -> list[str]:
    """The texts of a .txt file (its paragraphs), a folder of them (their paragraphs, as `training.run
    --data` reads them, none held out) or of a table's column, as the models read them (`clean_texts`),
    whatever the format."""
    if path.suffix == ".txt" or path.is_dir():
        return clean_texts(read_own_text(str(path), hold_out=False).splits["train"]["text"])
    ds = load_table(path)
    require_columns(ds, [column], str(path))
    return clean_texts(ds[column])


def run_held_out(checkpoint: str, part: str):
    """(the rows of `part` that the run in `checkpoint` held out, what they are), from its metrics.json."""
    try:
        metrics = json.loads((resolve_checkpoint(checkpoint) / METRICS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise DataError(f"--checkpoint {checkpoint}: no metrics.json says what its run held out; pass --data FILE "
                        "or --data-dir DIR") from None
    source, seed = metrics.get("data", {}), metrics.get("split_seed")
    if source.get("kind") not in ("data", "data_dir") or "val_size" not in source or seed is None:
        raise DataError(f"--checkpoint {checkpoint}: its metrics.json does not record held-out rows to read again "
                        "(a run on the Hub's data, or one from before runs recorded them); pass --data-dir and "
                        "--val-size")
    if source["kind"] == "data":
        as_now = source.get("held_out_by") == "size" or source.get("unit") == "rows"
        if not as_now and source.get("unit") != "paragraphs":
            raise DataError(f"--checkpoint {checkpoint}: its run read {source['source']} a document per file, as "
                            "runs before held-out parts were drawn by size did; pass --data FILE to score a file")
        # a run from before then held out a tenth of one file's paragraphs at random: read whole, drawn so again
        splits = read_own_text(source["source"], source.get("encoding", "utf-8"), hold_out=as_now).splits
    else:
        splits = load_splits(source["source"])
    rows = held_out_of(splits, source["val_size"], seed, source.get("max_examples"))
    if "held_out_sha256" in source and held_out_digest(rows) != source["held_out_sha256"]:
        raise DataError(f"{source['source']} has changed since the run: its held-out rows are not the ones the "
                        "run held out")
    if source.get("held_out_by") == "size":  # a text's tails: no selection and report rows to tell apart
        return rows, f"the held-out part of {source['source']}: {source.get('held_out', '')}"
    return held_out_part(rows, part), f"the {part} rows held out of {source['source']}"


def main(argv: list[str] | None = None) -> dict:
    parser = Parser("python -m training.evaluate", __doc__)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json, model.safetensors)")
    data = parser.add_mutually_exclusive_group()
    data.add_argument("--data", help="a .parquet/.csv/.jsonl file (or, for a language model, a .txt file or a "
                                     "folder of them)")
    data.add_argument("--data-dir", help="the validation split that training.run carves out of this folder's "
                                         "train split (with the same --val-size and --seed)")
    add_held_out_arguments(parser, data_dir=None)  # --data-dir is one of the data choices above
    parser.add_argument("--split", choices=HELD_OUT_PARTS,
                        help="with --data-dir: all held-out rows, the selection rows or the report rows (default: "
                             "the rows the run validated on: selection for a classifier, validation for an LM)")
    parser.add_argument("--short-text", action="store_true",
                        help="sentiment: score the first and last sentence of each review instead of the review")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N rows/windows")
    parser.add_argument("--max-tokens", type=int, default=16384,
                        help="sentiment: padded source tokens per batch (reviews are batched by length)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    model, tokenizer = open_checkpoint(parser, args.checkpoint, args.device)
    try:
        split = args.split or ("validation" if isinstance(model, DecoderOnlyLM) else "selection")
        held_out, what = None, args.data
        if args.data_dir:
            held_out = held_out_rows(args.data_dir, args.val_size, args.seed, split)
            what = f"the {split} rows of {args.data_dir}"
        elif not args.data:
            held_out, what = run_held_out(args.checkpoint, split)
            print(f"scoring {what}")
        if isinstance(model, DecoderOnlyLM):
            texts = clean_texts(held_out["text"]) if held_out is not None else _texts(Path(args.data))
            stream = TokenStream.from_texts(texts, tokenizer)
            result = evaluate_lm(model, stream.reversed() if model.config.reverse else stream, args.limit)
        else:
            reader = Reader(model, tokenizer, classifier_config=ClassifierConfig.from_pretrained(
                resolve_checkpoint(args.checkpoint)))  # a checkpoint without labels says so before any row is judged
            ds = held_out if held_out is not None else load_table(args.data)
            require_columns(ds, ["text", "label"], what)
            rows = ds.select(range(min(args.limit, len(ds)))) if args.limit else ds
            name = split if held_out is not None else args.data
            texts = clean_texts(text_column(rows, "text", name))
            labels = label_column(rows, "label", name, reader.labels)
            if args.short_text:
                short = short_texts(texts, labels)
                texts, labels = [r.text for r in short], [r.label for r in short]
            pairs = PairSet.from_texts(texts, [reader.labels[y] for y in labels], tokenizer, model.config,
                                       classifier=reader.classifier_config)
            result = evaluate_classifier(reader, pairs, labels, max_tokens=args.max_tokens)
    except (DataError, FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
    if "confusion" in result:
        names = reader.labels
        print(f"accuracy {result['accuracy']:.4f} on {result['examples']} examples (loss {result['loss']:.4f}, "
              f"ECE {result['ece']:.4f} at temperature {reader.temperature:g})")
        print("confusion matrix (rows: true, columns: predicted)")
        print(" " * 10 + "".join(f"{n:>10}" for n in names))
        for name, row in zip(names, result["confusion"], strict=True):
            print(f"{name:>10}" + "".join(f"{v:>10}" for v in row))
    else:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))
    return result


if __name__ == "__main__":
    main()

"""How long "rank every head by its effect" takes on CPU with one thread: each head of the
classifier knocked out alone on a 200-word review (target <= 2 s), and each head of the LM on the
same review's first 200 tokens (`inspection/ablation.py`).

The review is explain_speed's: the first held-out validation review of at least 200 words, cut to
its first 200 words, read as the app reads it.

    python -m benchmarks.ablation_speed [--repeats 5] [--json PATH | --no-json]

It takes no `--precision`: the app knocks heads out in float32 whatever its precision
(`demo.views.ablation`'s `ablate_heads` and `rank_heads` run outside its bf16 passes), and so does this. Prints one
line per model and mode (median seconds of `--repeats` runs after one warm-up) and writes them as
JSON (`benchmarks/common.py`).
"""

import argparse

import torch

from benchmarks.common import (
    WORDS,
    add_speed_arguments,
    benchmark_parser,
    median_seconds,
    parse,
    speed_review,
    write_json,
)
from classifier import Reader
from inspection import MODES, all_heads, classifier_head_effects, lm_head_effects
from model import load_pretrained
from tokenization import prompt_ids, read_review

TARGET_SECONDS = 2.0  # the classifier's ranking
LM_TOKENS = 200


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("ablation_speed", __doc__)
    add_speed_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    review = speed_review(args.data_dir)
    classifier = Reader.from_pretrained(args.sentiment, "cpu").eval()  # its tokenizer.json, classifier.json
    tokenizer, candidates = classifier.tokenizer, classifier.candidates
    ids = torch.tensor(read_review(review, tokenizer, classifier.reading).ids)
    lm = load_pretrained(args.lm, "cpu").eval()
    prompt = torch.tensor([prompt_ids(review, tokenizer)[:LM_TOKENS]])
    token = int(lm(prompt).logits[0, -1].argmax())

    figures, heads = {}, {"classifier": len(all_heads(classifier.model)), "lm": len(all_heads(lm))}
    for mode in MODES:
        figures[f"classifier_{mode}"] = median_seconds(
            lambda m=mode: classifier_head_effects(classifier, ids[None], candidates, 1, m), args.repeats)
        figures[f"lm_{mode}"] = median_seconds(lambda m=mode: lm_head_effects(lm, prompt, token, m), args.repeats)
    for name, seconds in figures.items():
        model = name.split("_")[0]
        verdict = (f" (target <= {TARGET_SECONDS:g} s: {'met' if seconds <= TARGET_SECONDS else 'MISSED'})"
                   if model == "classifier" else "")
        print(f"rank {heads[model]} heads, {name}: {seconds:.3f} s{verdict}")
    result = {"review_words": WORDS, "review_tokens": ids.numel(), "lm_tokens": prompt.size(1), "heads": heads,
              "repeats": args.repeats, "median_seconds": figures, "target_seconds": TARGET_SECONDS}
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()

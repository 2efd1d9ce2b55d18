"""How long each explanation takes on CPU with one thread, against the targets of the explain issues:
every attribution method on a 200-word review (grad × input and rollout ≤ 0.5 s, integrated
gradients ≤ 1.5 s, occlusion ≤ 1 s), all of them one after the other as "compare all methods" runs
them (≤ 3 s), and the logit lens over a prompt and 64 generated tokens (≤ 0.5 s).

The review is the first held-out validation review of at least 200 words, cut to its first 200
words, read as the app reads it (clean-up, end token); the lens prompt is its first 20 words.

    python -m benchmarks.explain_speed [--repeats 5] [--precision auto|fp32|bf16] [--json PATH | --no-json]

The explanations and the lens run in `--precision`, resolved as the app resolves it (`auto`: bf16
where the CPU multiplies it natively), since the app runs these passes in that precision. Prints the
machine and precision, then one line per measurement (median seconds of `--repeats` runs after one
warm-up), and writes them as JSON (`benchmarks/common.py`).
"""

import argparse

import torch

from benchmarks.common import (
    WORDS,
    add_precision,
    add_speed_arguments,
    benchmark_parser,
    median_seconds,
    parse,
    speed_review,
    write_json,
)
from classifier import Reader
from inspection import METHODS, attribute, attribute_methods, logit_lens
from model import GenerationConfig, autocast, load_pretrained
from tokenization import prompt_ids, read_review

TARGETS = {"attention": None, "rollout": 0.5, "grad_x_input": 0.5, "integrated_gradients": 1.5, "occlusion": 1.0,
           "random": None, "all_methods": 3.0, "logit_lens_64": 0.5}


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("explain_speed", __doc__)
    add_speed_arguments(parser)
    add_precision(parser)
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    review = speed_review(args.data_dir)
    classifier = Reader.from_pretrained(args.sentiment, "cpu").eval()  # its tokenizer.json, classifier.json
    tokenizer, candidates = classifier.tokenizer, classifier.candidates
    read = read_review(review, tokenizer, classifier.reading)
    ids, words = torch.tensor(read.ids), read.word_ids

    figures = {}
    with autocast("cpu", args.precision):  # as `DemoService` runs explanations and the lens
        for method in METHODS:
            figures[method] = median_seconds(
                lambda m=method: attribute(classifier, ids, candidates, m, word_ids=words), args.repeats)
        ig = attribute(classifier, ids, candidates, "integrated_gradients")  # its cost is its passes: say how many
        figures["all_methods"] = median_seconds(
            lambda: attribute_methods(classifier, ids, candidates, METHODS, word_ids=words), args.repeats)

    lm = load_pretrained(args.lm, "cpu").eval()
    prompt = torch.tensor([prompt_ids(" ".join(review.split()[:20]), tokenizer)])
    generated = lm.generate(prompt, GenerationConfig(max_new_tokens=64, temperature=0.8, seed=0))  # fp32, as the chat
    sequence = torch.tensor([*prompt[0].tolist(), *generated])
    with autocast("cpu", args.precision):
        figures["logit_lens_64"] = median_seconds(lambda: logit_lens(lm, sequence, k=5), args.repeats)

    for name, seconds in figures.items():
        target = TARGETS.get(name)  # a newly registered method is timed with no target
        verdict = "" if target is None else f" (target <= {target:g} s: {'met' if seconds <= target else 'MISSED'})"
        print(f"{name}: {seconds:.3f} s{verdict}")
    print(f"integrated_gradients used the {ig.steps}-node rule, {ig.passes} forward/backward passes")
    result = {"review_words": WORDS, "review_tokens": ids.numel(),
              "lens_tokens": sequence.numel(), "generated_tokens": len(generated), "repeats": args.repeats,
              "median_seconds": figures, "targets_seconds": TARGETS,
              "integrated_gradients_quadrature": {"nodes": ig.steps, "passes": ig.passes}}
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()

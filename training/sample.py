"""Continue a prompt with a trained language model, from the command line.

    python -m training.sample --checkpoint runs/mine                 # from its run's first held-out opening
    python -m training.sample --checkpoint runs/mine "Once upon a time"
    python -m training.sample --checkpoint checkpoints/lm --num-samples 5 --temperature 1.0 --top-k 0 "I have to say"

The checkpoint is a run folder, a checkpoint folder or a Hub repo id (`storage.resolve_checkpoint`);
its tokenizer is the tokenizer.json beside the weights. Sample i is drawn with seed --seed + i, so
the same command prints the same text; --temperature 0 is greedy decoding. Every LM run prints three
samples at its end, drawn with `SAMPLE_SETTINGS` from the `openings` of its first held-out documents
(the corpus's own words: an IMDB prompt shows nothing of a model of Shakespeare), and keeps them and
their prompts in metrics.json; without a prompt, this command starts from the run's first one (a
checkpoint that recorded none: a model of IMDB reviews from SAMPLE_PROMPTS[0], a model of another text
from its start token alone, what it writes first).
"""

import json
import re
from dataclasses import replace

import torch

from cli import Parser
from model import DecoderOnlyLM, GenerationConfig
from storage import METRICS_NAME, resolve_checkpoint
from tokenization import BPETokenizer, prompt_ids

from .open_checkpoint import open_checkpoint

SAMPLE_PROMPTS = ("This movie was", "I have to say that", "The acting")  # an IMDB model's, when it recorded none
SAMPLE_SETTINGS = {"max_new_tokens": 60, "temperature": 0.8, "top_k": 50}
OPENING_WORDS = 4


def openings(texts: list[str], n: int = len(SAMPLE_PROMPTS)) -> list[str]:
    """The first OPENING_WORDS words of the first `n` texts, as written (line breaks kept)."""
    found = (re.match(rf"\s*((?:\S+\s+){{0,{OPENING_WORDS - 1}}}\S+)", text) for text in texts)
    return [m.group(1) for m in found if m][:n]


def run_prompt(checkpoint: str) -> str:
    """The first prompt the run sampled from at its end; else, for a model of IMDB reviews (or one whose
    run left no metrics.json), SAMPLE_PROMPTS[0]; for a model of a text of its own (`training.run --data`),
    "": its start token alone, never a movie review's words."""
    try:
        metrics = json.loads((resolve_checkpoint(checkpoint) / METRICS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SAMPLE_PROMPTS[0]
    recorded = metrics.get("sample_prompts") if isinstance(metrics, dict) else None
    if recorded:
        return recorded[0]
    data = metrics.get("data") if isinstance(metrics, dict) else None
    return "" if isinstance(data, dict) and data.get("kind") == "data" else SAMPLE_PROMPTS[0]


def continuation(model: DecoderOnlyLM, tokenizer: BPETokenizer, prompt: str, cfg: GenerationConfig) -> str:
    """What `model` writes after `prompt`, read as the language model reads a prompt (`prompt_ids`: the
    start token, then the cleaned text, as in training), up to its end token."""
    ids = torch.tensor([prompt_ids(prompt, tokenizer)], device=next(model.parameters()).device)
    return tokenizer.decode(model.generate(ids, replace(cfg, eos_token_id=tokenizer.eos_id)))


def build_parser() -> Parser:
    p = Parser("python -m training.sample", __doc__)
    p.add_argument("prompt", nargs="?", help="the start of a text (default: the first prompt the run sampled "
                                             f"from at its end; else, for a model of IMDB reviews, "
                                             f"{SAMPLE_PROMPTS[0]!r}, for one of another text, its start token)")
    p.add_argument("--checkpoint", required=True, help="a language model: run folder, checkpoint folder or Hub id")
    p.add_argument("--num-samples", type=int, default=3, help="continuations to print (default 3)")
    p.add_argument("--max-new-tokens", type=int, default=SAMPLE_SETTINGS["max_new_tokens"],
                   help=f"tokens to write per sample (default {SAMPLE_SETTINGS['max_new_tokens']})")
    p.add_argument("--temperature", type=float, default=SAMPLE_SETTINGS["temperature"],
                   help=f"softmax temperature; 0 = greedy (default {SAMPLE_SETTINGS['temperature']})")
    p.add_argument("--top-k", type=int, default=SAMPLE_SETTINGS["top_k"],
                   help=f"sample among the k most likely tokens; 0 = all (default {SAMPLE_SETTINGS['top_k']})")
    p.add_argument("--seed", type=int, default=0, help="seed of the first sample; sample i uses seed + i")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    return p


def main(argv: list[str] | None = None) -> list[str]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.num_samples < 1:
        parser.error(f"--num-samples must be >= 1, got {args.num_samples}")
    try:
        settings = GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                    top_k=args.top_k or None)
    except ValueError as e:  # "top_k must be >= 1 or None, got -3": the flag's own name
        parser.error("--" + str(e).replace("_", "-"))
    if settings.max_new_tokens < 1:
        parser.error(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    model, tokenizer = open_checkpoint(parser, args.checkpoint, args.device)
    if not isinstance(model, DecoderOnlyLM):
        parser.error(f"--checkpoint {args.checkpoint} holds a {model.model_type!r} model, not a language model")
    if model.config.reverse:
        parser.error(f"--checkpoint {args.checkpoint} is a backward language model (it writes what comes before a "
                     "text, not after): it starts a backward classifier, it does not continue prompts")
    prompt = run_prompt(args.checkpoint) if args.prompt is None else args.prompt
    texts = []
    for i in range(args.num_samples):
        text = prompt + continuation(model, tokenizer, prompt, replace(settings, seed=args.seed + i))
        print(f"--- sample {i + 1} (seed {args.seed + i}) ---\n{text}")
        texts.append(text)
    return texts


if __name__ == "__main__":
    main()

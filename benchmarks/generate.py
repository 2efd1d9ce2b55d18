"""Generation speed: our KV cache against full recomputation, and against Hugging Face `generate`.

    python -m benchmarks.generate [--threads 1] [--tokens 200] [--rounds 5] [--checkpoint DIR]

Run from the repository root. A DecoderOnlyLM of the shipped LM's shape (read from
checkpoints/lm/config.json), randomly initialised unless `--checkpoint` names a saved one,
greedily generates `--tokens` new tokens from a 1-token prompt (BOS), batch 1. The default 200
fits in the 256-token context, so no mode slides the window. Modes:

- `cache`: ours, as the app runs it (`model.generate`, KV cache);
- `no_cache`: ours, recomputing the whole sequence at every step (must give the same tokens);
- `hf`: `transformers.GPT2LMHeadModel.generate` (greedy, its KV cache), run only when
  `transformers` is installed (`pip install -r benchmarks/requirements.txt`). It is built with
  the same shape (layers, heads, width, feed-forward, vocabulary, context; exact GELU, no dropout,
  tied embeddings) and random weights; it has no end-of-text id, so it always makes every token.

The modes alternate over `--rounds` rounds (who goes first rotates), so that a slow spell of a
shared machine hits all of them, and the median new tokens per second are reported, with
`ratio ours/HF X` (cache over hf). Both run under `torch.inference_mode()`, in float32: the app's
chat decodes in float32 whatever its `--precision` (bf16 gains nothing on one-row steps), so this
takes no `--precision`. The same ratio in
process CPU time follows it: on a machine shared with other jobs it varies much less than the
wall-clock one (with --threads 1 it is the run's own work).

On a machine shared with other jobs, prefix the command with OMP_WAIT_POLICY=PASSIVE (or keep
--threads 1): otherwise an OpenMP thread that spins waiting for a descheduled partner can make
every parallel op wait out a time slice, and the run slows down tens of times.
"""

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import torch

from benchmarks.common import add_checkpoint, benchmark_parser, parse, write_json
from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig, read_config

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "lm"


def hf_twin(c: DecoderOnlyConfig) -> torch.nn.Module:
    """A randomly initialised Hugging Face GPT-2 with our model's shape."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.d_model, n_layer=c.n_layer,
                        n_head=c.n_head, n_inner=c.d_ff, activation_function="gelu", resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=c.bos_token_id, eos_token_id=None,
                        pad_token_id=c.pad_token_id, tie_word_embeddings=True)
    model = GPT2LMHeadModel(config).eval()
    model.generation_config.eos_token_id = None  # never stop early: every run makes all its tokens
    return model


def arguments() -> argparse.ArgumentParser:
    parser = benchmark_parser("generate", __doc__)
    parser.add_argument("--tokens", type=int, default=200, help="new tokens per run (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="timed runs per mode (default 5)")
    add_checkpoint(parser, None, "a DecoderOnlyLM saved with save_pretrained (default: random weights, shipped shape)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parse(arguments(), argv)

    torch.manual_seed(0)
    if args.checkpoint:
        model = DecoderOnlyLM.from_pretrained(args.checkpoint)
    else:
        fields = read_config(SHIPPED)
        fields.pop("model_type", None)
        model = DecoderOnlyLM(DecoderOnlyConfig(**fields)).eval()
    c = model.config
    prompt = torch.tensor([[c.bos_token_id]])
    runs = {
        "cache": lambda: model.generate(prompt, GenerationConfig(max_new_tokens=args.tokens, temperature=0)),
        "no_cache": lambda: model.generate(prompt, GenerationConfig(max_new_tokens=args.tokens, temperature=0,
                                                                    use_cache=False)),
    }
    if importlib.util.find_spec("transformers") is not None:
        hf = hf_twin(c)
        runs["hf"] = lambda: hf.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                         max_new_tokens=args.tokens)[0, 1:].tolist()
    else:
        print("transformers is not installed: no Hugging Face comparison (pip install -r benchmarks/requirements.txt)")

    modes = list(runs)
    seconds, cpu_seconds, outputs = {m: [] for m in modes}, {m: [] for m in modes}, {}
    with torch.inference_mode():
        for mode in modes:  # warm-up
            runs[mode]()
        for r in range(args.rounds):
            for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
                t0, c0 = time.perf_counter(), time.process_time()
                outputs[mode] = runs[mode]()
                seconds[mode].append(time.perf_counter() - t0)
                cpu_seconds[mode].append(time.process_time() - c0)
    if outputs["cache"] != outputs["no_cache"]:
        raise SystemExit("the cached and uncached runs generated different tokens")
    if any(len(out) != args.tokens for out in outputs.values()):
        raise SystemExit(f"a mode made other than {args.tokens} tokens: " +
                         ", ".join(f"{m} {len(out)}" for m, out in outputs.items()))

    tps = {m: args.tokens / statistics.median(s) for m, s in seconds.items()}
    result = {
        "config": {**vars(c), "new_tokens": args.tokens, "prompt_tokens": 1, "batch": 1, "greedy": True,
                   "rounds": args.rounds, "checkpoint": args.checkpoint},
        "new_tokens_per_s": tps,
        "seconds_per_round": seconds,
        "cpu_seconds_per_round": cpu_seconds,
        "speedup_cache": tps["cache"] / tps["no_cache"],
    }
    print(f"model: {c.n_layer} layers, {c.n_head} heads, d_model {c.d_model}, d_ff {c.d_ff}, vocab {c.vocab_size}, "
          f"block_size {c.block_size}, {'checkpoint ' + args.checkpoint if args.checkpoint else 'random init'}; "
          f"greedy, batch 1, 1-token prompt, {args.tokens} new tokens, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds")
    for mode in modes:
        print(f"{mode:>8}: {tps[mode]:8.1f} new tokens/s (median of {', '.join(f'{s:.2f}' for s in seconds[mode])} s)")
    print(f"speed-up with cache: {result['speedup_cache']:.1f}x (identical tokens: yes)")
    if "hf" in runs:
        import transformers

        result["ratio_ours_over_hf"] = tps["cache"] / tps["hf"]
        result["cpu_time_ratio_ours_over_hf"] = statistics.median(cpu_seconds["hf"]) / statistics.median(
            cpu_seconds["cache"])
        result["transformers"] = transformers.__version__
        result["hf_attention"] = hf.config._attn_implementation
        print(f"ratio ours/HF {result['ratio_ours_over_hf']:.3f} (in CPU time "
              f"{result['cpu_time_ratio_ours_over_hf']:.3f}; transformers {transformers.__version__}, "
              f"attention {result['hf_attention']})")
    write_json(result, args)
    return result


if __name__ == "__main__":
    main()

"""Generation speed with the KV cache against full recomputation at every step.

    python -m benchmarks.generate [--tokens 256] [--rounds 3] [--threads N] [--checkpoint DIR] [--json out.json]

Run from the repository root. A DecoderOnlyLM with the training benchmark's config (4 layers,
4 heads, d_model 256, d_ff 1024, vocab 8192, block_size 256), randomly initialised unless
`--checkpoint` names a saved one, greedily generates 256 new tokens from a 1-token prompt (BOS).
The last step sees 1 + 255 = 256 tokens, so the whole run fits in block_size 256 and neither
mode ever slides the window (a checkpoint with a smaller block_size slides it, the same way in
both modes). Both modes must produce the same tokens; their new tokens per second are printed
with the speed-up. The two modes alternate over `--rounds` rounds and the medians are reported.

On a machine shared with other jobs, prefix the command with OMP_WAIT_POLICY=PASSIVE (or pass
--threads 1): otherwise an OpenMP thread that spins waiting for a descheduled partner can make
every parallel op wait out a time slice, and the run slows down tens of times.
"""

import argparse
import json
import statistics
import time

import torch

from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig

CONFIG = DecoderOnlyConfig(vocab_size=8192, block_size=256, n_layer=4, n_head=4, d_model=256, d_ff=1024,
                           dropout=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256, help="new tokens per run (default 256)")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs per mode (default 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--checkpoint", metavar="DIR", help="a DecoderOnlyLM saved with save_pretrained")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model = DecoderOnlyLM.from_pretrained(args.checkpoint) if args.checkpoint else DecoderOnlyLM(CONFIG).eval()
    prompt = torch.tensor([[model.config.bos_token_id]])
    modes = {"cache": True, "no_cache": False}
    seconds, outputs = {m: [] for m in modes}, {}
    model.generate(prompt, GenerationConfig(max_new_tokens=8, temperature=0))  # warm-up
    for r in range(args.rounds):
        for mode in list(modes) if r % 2 == 0 else list(modes)[::-1]:
            config = GenerationConfig(max_new_tokens=args.tokens, temperature=0, use_cache=modes[mode])
            t0 = time.perf_counter()
            outputs[mode] = model.generate(prompt, config)
            seconds[mode].append(time.perf_counter() - t0)
    if outputs["cache"] != outputs["no_cache"]:
        raise SystemExit("the cached and uncached runs generated different tokens")

    tps = {m: args.tokens / statistics.median(s) for m, s in seconds.items()}
    result = {
        "config": {**vars(model.config), "new_tokens": args.tokens, "prompt_tokens": 1,
                   "threads": torch.get_num_threads(), "rounds": args.rounds,
                   "checkpoint": args.checkpoint},
        "new_tokens_per_s": tps,
        "speedup_cache": tps["cache"] / tps["no_cache"],
    }
    c = model.config
    print(f"model: {c.n_layer} layers, {c.n_head} heads, d_model {c.d_model}, vocab {c.vocab_size}, "
          f"block_size {c.block_size}, {'checkpoint ' + args.checkpoint if args.checkpoint else 'random init'}; "
          f"greedy, 1-token prompt, {args.tokens} new tokens, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds")
    for mode in modes:
        print(f"{mode:>8}: {tps[mode]:8.1f} new tokens/s (median of {', '.join(f'{s:.2f}' for s in seconds[mode])} s)")
    print(f"speed-up with cache: {result['speedup_cache']:.1f}x (identical tokens: yes)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()

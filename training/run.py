"""Train a model of this repo on IMDB (or any text table) and write a checkpoint directory.

    python -m training.run --task lm --data-dir ../shared/data/imdb --out checkpoints/lm
    python -m training.run --task sentiment --data-dir ../shared/data/imdb --out checkpoints/sentiment
    python -m training.run --task seq2seq --data-dir my_pairs/ --source-column src --target-column tgt

Without --data-dir the data comes from the Hugging Face Hub (stanfordnlp/imdb). The checkpoint
directory gets config.json + model.safetensors (the best model on validation), tokenizer.json,
metrics.json, training_curve.png and trainer_state.pt (for --resume). Multi-GPU / multi-node:
    torchrun --nproc_per_node=N -m training.run ...
"""

import argparse
import json
import shlex
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

import torch

from model import (
    DecoderOnlyConfig,
    DecoderOnlyLM,
    EncoderDecoderConfig,
    load_pretrained,
    read_config,
)
from storage import CONFIG_NAME, CURVE_NAME, METRICS_NAME, STATE_NAME, TOKENIZER_NAME, atomic_write_text
from tokenization import BPETokenizer

from .data import HUB_IMDB, DataError, load_splits
from .plots import plot_curve
from .presets import PRESETS
from .tasks import TASKS
from .trainer import TrainConfig, Trainer, init_distributed, weights_in_sync


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m training.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=sorted(TASKS),
                   help="lm: decoder-only language model; sentiment: encoder-decoder writing "
                        "'positive'/'negative'; seq2seq: encoder-decoder on any (source, target) columns")
    p.add_argument("--preset", default="small",
                   help="model + optimisation settings: tiny (seconds), small (the first, CPU-trained models) "
                        "or base (the shipped models; minutes on a GPU)")
    p.add_argument("--data-dir", help="local folder of <split>.parquet/.csv/.jsonl files (default: the Hub)")
    p.add_argument("--dataset", default=HUB_IMDB, help="Hub dataset name when --data-dir is not given")
    p.add_argument("--source-column", default="source", help="seq2seq: source text column")
    p.add_argument("--target-column", default="target", help="seq2seq: target text column")
    p.add_argument("--out", help="checkpoint directory (default: checkpoints/<task>)")
    p.add_argument("--tokenizer", default="checkpoints/tokenizer.json",
                   help="tokenizer.json to use; trained on the training text and saved there if missing")
    p.add_argument("--vocab-size", type=int, default=8192, help="vocabulary size when training a tokenizer")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto = CUDA when present")
    p.add_argument("--max-steps", type=int, help="optimizer steps (the LR schedule spans them)")
    p.add_argument("--max-minutes", type=float, help="stop (checkpointed, resumable) after this much training time")
    p.add_argument("--batch-size", type=int, help="sequences per step and per process")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--warmup-steps", type=int, help="linear warmup steps")
    p.add_argument("--eval-every", type=int, help="evaluate (and maybe checkpoint) every N steps")
    p.add_argument("--eval-batches", type=int, help="batches/windows used by periodic evaluation")
    p.add_argument("--val-size", type=int, default=2500, help="validation rows carved out of train (fixed seed)")
    p.add_argument("--max-examples", type=int, help="use only N rows of each split (quick runs, tests)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model config field, e.g. --set d_model=384 --set n_layer=6")
    p.add_argument("--save-dtype", choices=["float32", "float16", "bfloat16"], default="float32",
                   help="storage dtype of model.safetensors")
    p.add_argument("--init-from", metavar="LM_DIR",
                   help="sentiment/seq2seq: start the encoder from a trained language-model checkpoint "
                        "(its width, heads and layers are taken over)")
    p.add_argument("--resume", action="store_true", help="continue from <out>/trainer_state.pt")
    p.add_argument("--seed", type=int, default=1337)
    return p.parse_args(argv)


def parse_sets(task: str, pairs: list[str]) -> dict:
    """`--set KEY=VALUE` pairs -> model config fields, typed like the config dataclass."""
    config_class = DecoderOnlyConfig if task == "lm" else EncoderDecoderConfig
    types = {f.name: f.type for f in fields(config_class)}
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in types or key in ("vocab_size", "labels"):
            raise DataError(f"--set {pair}: expected KEY=VALUE with KEY one of "
                            f"{sorted(set(types) - {'vocab_size', 'labels'})}")
        overrides[key] = value.lower() in ("1", "true", "yes") if types[key] in (bool, "bool") else (
            float(value) if types[key] in (float, "float") else int(value))
    return overrides


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise DataError("--device cuda: no CUDA device is available")
    return name


def main(argv: list[str] | None = None) -> dict | None:
    args = parse_args(argv)
    try:
        return run(args, argv if argv is not None else sys.argv[1:])
    except (DataError, ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")


def record_command(commands: list[str], argv: list[str]) -> None:
    """Append this invocation to the commands that trained the state, so `metrics.json` can say how to
    reproduce a run that was continued with other arguments (e.g. a raised --max-steps). A plain
    restart of the last command (with or without --resume) is the same segment and is not repeated."""
    command = "python -m training.run " + shlex.join(argv)
    if not commands or commands[-1].replace(" --resume", "") != command.replace(" --resume", ""):
        commands.append(command)


def run(args: argparse.Namespace, argv: list[str]) -> dict | None:
    start = time.time()
    if args.preset not in PRESETS[args.task]:
        raise DataError(f"--preset {args.preset}: choose one of {sorted(PRESETS[args.task])}")
    preset = PRESETS[args.task][args.preset]
    train_kwargs = {**preset["train"], "seed": args.seed, "max_minutes": args.max_minutes}
    for name in ("max_steps", "batch_size", "lr", "warmup_steps", "eval_every", "eval_batches"):
        if getattr(args, name) is not None:
            train_kwargs[name] = getattr(args, name)
    cfg = TrainConfig(**train_kwargs)
    explicit = parse_sets(args.task, args.overrides)  # parsed now: a bad --set fails before data loading
    if args.val_size < 1:
        raise DataError(f"--val-size must be >= 1, got {args.val_size}")
    if args.vocab_size < 260:
        raise DataError(f"--vocab-size must be >= 260 (256 bytes + 4 special tokens), got {args.vocab_size}")
    out = Path(args.out or f"checkpoints/{args.task}")
    device = resolve_device(args.device)
    info = init_distributed(device)
    if device == "cuda" and info.world_size > 1:
        device = f"cuda:{info.local_rank}"
        torch.cuda.set_device(device)

    task_class = TASKS[args.task]
    resuming = args.resume and (out / STATE_NAME).is_file()
    if args.resume and not resuming:
        raise DataError(f"--resume: no {STATE_NAME} in {out}")
    if (out / CONFIG_NAME).is_file():  # never overwrite a checkpoint of another kind
        found = read_config(out).get("model_type")
        if found != task_class.model_class.model_type:
            raise DataError(f"{out} holds a {found!r} checkpoint; --task {args.task} trains a "
                            f"{task_class.model_class.model_type!r}. Choose another --out")

    splits = load_splits(args.data_dir, args.dataset)
    extra = {"source_column": args.source_column, "target_column": args.target_column} if args.task == "seq2seq" else {}
    task = task_class(splits, args.val_size, args.seed, args.max_examples, **extra)

    tokenizer_path = Path(args.tokenizer)
    if tokenizer_path.is_file():
        tokenizer = BPETokenizer.from_file(tokenizer_path)
    else:
        if info.world_size > 1:
            raise DataError(f"train the tokenizer first (single process): {tokenizer_path} is missing")
        print(f"training a {args.vocab_size}-token BPE tokenizer on {len(task.corpus.train_texts):,} texts ...")
        tokenizer = BPETokenizer.train(task.corpus.train_texts, vocab_size=args.vocab_size)
        tokenizer.save(tokenizer_path)

    lm, lm_shape = None, {}
    if args.init_from:
        if args.task == "lm":
            raise DataError("--init-from applies to the encoder-decoder tasks (sentiment, seq2seq)")
        lm = load_pretrained(args.init_from)
        if not isinstance(lm, DecoderOnlyLM) or lm.config.vocab_size != tokenizer.vocab_size:
            raise DataError(f"--init-from {args.init_from}: needs a language model using {tokenizer_path}")
        shape = ("d_model", "n_head", "d_ff", "norm_first")
        lm_shape = {k: getattr(lm.config, k) for k in shape} | {"n_encoder_layer": lm.config.n_layer}

    torch.manual_seed(args.seed)
    model = task.build(tokenizer, {**preset["model"], **lm_shape, **explicit}, cfg)  # an explicit --set wins
    if lm is not None:
        model.init_encoder_from(lm)
    torch.manual_seed(args.seed + info.rank)  # dropout differs per rank; DDP broadcasts rank 0's weights
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(model, task, cfg, out, device, info, getattr(torch, args.save_dtype),
                      on_save=lambda directory: tokenizer.save(directory / TOKENIZER_NAME))
    if resuming:
        trainer.load_state(out / STATE_NAME)
        print(f"resumed from {out / STATE_NAME} at step {trainer.step}")
    record_command(trainer.commands, argv)
    if info.is_main:
        print(f"{args.task}: {model.num_parameters():,} parameters on {device} x{info.world_size}, "
              f"{task.corpus.description}")
    reason = trainer.train()
    in_sync = weights_in_sync(trainer.model, info)
    if not info.is_main:
        return None

    best = load_pretrained(out, device)  # final figures are those of the checkpoint that ships
    val = task.evaluate(best, full=True)
    test = task.test(best, tokenizer)
    metrics = {
        "task": args.task, "model_type": best.model_type, "preset": args.preset,
        "parameters": best.num_parameters(),
        **{f"val_{k}": v for k, v in val.items()},
        **({f"test_{k}": v for k, v in test.items()} if test else {}),
        "best_step": trainer.best["step"], "steps": trainer.step, "max_steps": cfg.max_steps, "stopped_by": reason,
        "tokens_seen": trainer.tokens_seen, "train_time_s": round(trainer.elapsed, 1),
        "wall_time_s": round(time.time() - start, 1), "device": _device_name(device), "world_size": info.world_size,
        "ddp_weights_in_sync": in_sync,
        "command": " && ".join(trainer.commands),
        "data": {"source": args.data_dir or args.dataset, **task.corpus.description},
        "tokenizer": {"path": str(tokenizer_path), "vocab_size": tokenizer.vocab_size},
        "model_config": asdict(best.config), "train_config": asdict(cfg),
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "history": trainer.history,
    }
    if hasattr(task, "samples"):
        metrics["samples"] = task.samples(best, tokenizer)
    atomic_write_text(out / METRICS_NAME, json.dumps(metrics, indent=2) + "\n")
    plot_curve(trainer.history, out / CURVE_NAME, title=f"{args.task} ({args.preset})")
    summary = {k: v for k, v in metrics.items() if k.startswith(("val_", "test_")) and not isinstance(v, list)}
    print(f"done ({reason}): step {trainer.step}, {trainer.tokens_seen:,} tokens, "
          f"{metrics['train_time_s']:.0f} s -> {out}\n{json.dumps(summary, indent=2)}")
    return metrics


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


if __name__ == "__main__":
    main()

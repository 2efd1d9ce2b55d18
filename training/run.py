"""Train a model of this repo on IMDB, on your own text, or on any text table, and write a checkpoint directory.

    python -m training.run --task lm --preset laptop --data mytext.txt --out runs/mine
    python -m training.run --task lm --data-dir ../shared/data/imdb
    python -m training.run --task sentiment --data-dir ../shared/data/imdb --out runs/my-sentiment
    python -m training.run --task seq2seq --data-dir my_pairs/ --source-column src --target-column tgt

A run writes into a fresh `runs/<task>-<timestamp>/` unless --out names another folder; a folder
that holds another run is refused unless --resume (continue it) or --overwrite (replace it) is given,
so shipping a model is an explicit step: `--out checkpoints/lm --overwrite`. While a run writes,
its folder holds a RUN_IN_PROGRESS marker, removed once metrics.json is written.

Ten minutes on a laptop's CPU, start-up and final evaluation included (docs/experiments/laptop-2026-11-25):
    python -m training.run --task lm --preset laptop --data-dir ../shared/data/imdb --out runs/laptop-lm
    python -m training.run --task sentiment --preset laptop --init-from checkpoints/lm \\
        --data-dir ../shared/data/imdb --out runs/laptop-sentiment

The data is one of: --data PATH (your own text: a .txt file, a folder of .txt files or a table;
training.own_text), with a tokenizer of its own trained on the training part and kept in the run
(training.tokenizer_choice); --data-dir (IMDB-like <split>.parquet/.csv/.jsonl files); else the
Hugging Face Hub (--dataset, stanfordnlp/imdb). What is held out is recorded in metrics.json, so
`python -m training.evaluate --checkpoint RUN` scores exactly those rows. The checkpoint
directory gets config.json + model.safetensors (the best model on validation), tokenizer.json,
metrics.json, training_curve.png, trainer_state.pt (for --resume) and, for a language model,
snapshots/ (float16 weights at a few steps, for the app's "Watch it learn" tab). Multi-GPU / multi-node:
    torchrun --nproc_per_node=N -m training.run ...

Ctrl-C or SIGTERM saves the current step and prints the command that resumes it (status 130). Bad
options exit with status 2, bad data with status 1, each with one line on stderr; a run that fails
before its first checkpoint leaves no folder behind. --print-config prints the resolved settings.
"""

import argparse
import itertools
import json
import os
import shlex
import shutil
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

import torch
import torch.distributed as dist

from classifier import ClassifierConfig
from cli import Parser
from model import PRECISIONS, PreTrainedModel, load_pretrained, read_config, resolve_device
from storage import (
    CONFIG_NAME,
    CURVE_NAME,
    METRICS_NAME,
    STATE_NAME,
    atomic_write_text,
    finish_run,
    interrupt_run,
    lineage,
    run_files,
    run_marker,
    start_run,
)

from . import own_text
from .budget import sizing_words
from .contract import Task, TaskData, TaskOptions
from .data import DATA_SUFFIXES, HUB_IMDB, head_rows, held_out_digest, held_out_of, load_splits
from .distributed import DistInfo, init_distributed, weights_in_sync
from .errors import Interrupted, UsageError
from .memory import available_bytes, memory_warning
from .plots import plot_curve
from .presets import DEFAULT_PRESET, PRESET_HELP, preset_table
from .recipe import Recipe
from .sample import SAMPLE_SETTINGS
from .schedules import SCHEDULES
from .stopping import sigterm_as_interrupt
from .tasks import CLASSIFIER_SETTINGS, TASKS, LMTask, split_settings
from .tokenizer_choice import DEFAULT_TOKENIZER, choose_tokenizer
from .trainer import Trainer, resume_mismatches, training_rows
from .training_args import TrainConfig
from .transfer import STARTS_FROM, init_from, shape_from


def build_parser() -> Parser:
    p = Parser("python -m training.run", __doc__, epilog=preset_table())
    p.add_argument("--task", required=True, choices=sorted(TASKS),
                   help="lm: decoder-only language model; sentiment: encoder-decoder writing "
                        "'positive'/'negative'; seq2seq: encoder-decoder on any (source, target) columns; "
                        "span: T5-style span-corruption pretraining of an encoder-decoder on review text")
    p.add_argument("--preset", default=DEFAULT_PRESET, help=PRESET_HELP)
    p.add_argument("--print-config", action="store_true", help="print the resolved settings and exit")
    data = p.add_argument_group("data (one source)")
    data.add_argument("--data", metavar="PATH",
                      help="your own text: a .txt file (paragraphs split on blank lines), a folder of .txt files "
                           "(one document per file), or a .parquet/.csv/.jsonl table (an LM needs only 'text'); "
                           f"a tenth of the documents is held out (at most {own_text.MAX_HELD_OUT:,}), and a "
                           "tokenizer of its own is trained on the rest and kept in the run")
    data.add_argument("--encoding", default="utf-8", help="--data's text encoding (default utf-8; e.g. latin-1)")
    data.add_argument("--data-dir", help="local folder of IMDB-like <split>.parquet/.csv/.jsonl files")
    data.add_argument("--dataset", help=f"Hub dataset name (default, without --data or --data-dir: {HUB_IMDB})")
    p.add_argument("--source-column", default="source", help="seq2seq: source text column")
    p.add_argument("--target-column", default="target", help="seq2seq: target text column")
    p.add_argument("--out", help="checkpoint directory (default: a new runs/<task>-<timestamp>/)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run in --out (e.g. --out checkpoints/lm --overwrite ships a model)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its trainer_state.pt "
                                                         "(after --max-minutes, Ctrl-C or a crash)")
    p.add_argument("--tokenizer", metavar="PATH",
                   help="reuse this tokenizer.json (trained on the training text and saved there if missing). "
                        "Default: with --data a new one trained on the training part and saved in the run; with "
                        f"--init-from that checkpoint's; else {DEFAULT_TOKENIZER} (IMDB's)")
    p.add_argument("--vocab-size", type=int,
                   help="vocabulary size when training a tokenizer (default: sized to --data's text, 2 x "
                        "sqrt(bytes) from 512 to 8,192; else 8,192)")
    p.add_argument("--device", default="auto",
                   help="auto (CUDA when present), cpu, cuda or cuda:N; under torchrun each process takes its own GPU")
    p.add_argument("--threads", type=int,
                   help=f"CPU threads for torch (default: one per core, here {torch.get_num_threads()})")
    p.add_argument("--max-steps", type=int,
                   help="optimizer steps (the LR schedule spans them). The laptop preset gives none: it times its "
                        "first steps and fits the count to --max-minutes")
    p.add_argument("--max-minutes", type=float,
                   help="bound this invocation, start-up and final evaluation included: training stops in time "
                        "for the final evaluation, which samples the validation rows if the full pass would not "
                        "fit (checkpointed; --resume trains on)")
    p.add_argument("--full-eval", action="store_true",
                   help="final evaluation on every validation row even if it overruns --max-minutes (what a "
                        "shipped checkpoint is measured with; without --max-minutes it always is)")
    p.add_argument("--batch-size", type=int, help="sequences per step and per process")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--warmup-steps", type=int, help="linear warmup steps")
    p.add_argument("--eval-every", type=int, help="evaluate (and maybe checkpoint) every N steps")
    p.add_argument("--eval-batches", type=int, help="batches/windows used by periodic evaluation")
    p.add_argument("--snapshots", type=int,
                   help="float16 copies of the weights kept at log-spaced steps in <out>/snapshots/, for the app's "
                        f"'watch it learn' view (default: {LMTask.snapshots} for lm, 0 for the other tasks)")
    p.add_argument("--val-size", type=int,
                   help="validation rows carved out of train (fixed seed; default: a tenth of --data's documents, "
                        f"at most {own_text.MAX_HELD_OUT:,}; else 2,500)")
    p.add_argument("--max-examples", type=int, help="use only N rows of each split (quick runs, tests)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model config field, e.g. --set d_model=384 --set n_layer=6")
    p.add_argument("--precision", choices=list(PRECISIONS), default="auto",
                   help="matrix products in bfloat16 (autocast; losses, softmax statistics and optimizer state "
                        "stay float32) or float32; auto: bf16 on CUDA and on CPUs with AVX512-BF16/AMX, else fp32")
    p.add_argument("--save-dtype", choices=["float32", "float16", "bfloat16"], default="float32",
                   help="storage dtype of model.safetensors")
    p.add_argument("--init-from", metavar="CHECKPOINT",
                   help="encoder-decoder tasks: start the encoder from a trained language model, or the whole "
                        "model from a span-pretrained encoder-decoder (its width, heads and layers are taken over); "
                        "lm: continue a trained language model's pretraining (its whole shape is taken over; "
                        "keep its tokenizer). The learning rate and schedule are then the preset's fine-tune settings")
    p.add_argument("--max-tokens", type=int,
                   help="encoder-decoder tasks: length-bucketed batches of this many padded tokens (each example "
                        "once per epoch) instead of --batch-size random examples")
    recipe = p.add_argument_group("fine-tuning recipe (training.recipe; off unless the preset or a flag sets them)")
    recipe.add_argument("--layer-decay", type=float, help="lr factor per encoder layer below the top")
    recipe.add_argument("--unfreeze-every", type=int, help="unfreeze one more layer group every N steps")
    recipe.add_argument("--label-smoothing", type=float)
    recipe.add_argument("--adversarial-eps", type=float,
                        help="FGM perturbation of the source embeddings (L2 size per example)")
    recipe.add_argument("--average-last", type=int, help="keep the mean weights of the last N evaluations")
    recipe.add_argument("--crop-prob", type=float,
                        help="sentiment: fraction of training reviews replaced by 1-3 of their sentences")
    recipe.add_argument("--shout-prob", type=float,
                        help="sentiment: fraction of the crops recased (one word or all of it in capitals, or all "
                             "of it in Title Case)")
    recipe.add_argument("--sentence-copies", type=int,
                        help="sentiment: each training review's first and last sentence join the training rows, "
                             "with the review's label, N copies each")
    recipe.add_argument("--pseudo-labels", metavar="PATH",
                        help="sentiment: the unlabeled reviews' verdicts (python -m training.pseudo); the confident "
                             "ones join the training rows")
    recipe.add_argument("--pseudo-confidence", type=float,
                        help="sentiment: the verdict's probability a pseudo-labelled review needs (default 0.9)")
    recipe.add_argument("--lm-weight", type=float,
                        help="auxiliary next-token loss on the source, times this weight "
                             "(needs --set causal_encoder=1)")
    recipe.add_argument("--schedule", choices=SCHEDULES,
                        help="learning-rate schedule: warmup + cosine (default), ULMFiT's slanted triangular "
                             "(stlr), or warmup-stable-decay (wsd: the peak held, a decay over the last "
                             "--decay-fraction of the steps; the laptop LM's)")
    recipe.add_argument("--decay-fraction", type=float,
                        help="wsd: the share of the steps, at the end, over which the rate decays (default 0.2)")
    recipe.add_argument("--repeat-dropout", type=float,
                        help="a run sized to --max-minutes whose steps would read the training tokens more than 16 "
                             "times trains with this dropout (the laptop LM's: 0.1; 0 = off)")
    recipe.add_argument("--evidence", nargs="+", metavar="PATH",
                        help="sentiment: evidence caches (python -m training.evidence) to draw snippets from")
    recipe.add_argument("--evidence-prob", type=float,
                        help="sentiment: fraction of training reviews replaced by an evidence snippet, with its label")
    p.add_argument("--seed", type=int, default=1337,
                   help="initialisation, data order and dropout; also which rows are held out, unless --split-seed")
    p.add_argument("--split-seed", type=int,
                   help="which train rows are held out (default: --seed). Keep 1337 to train another seed of a "
                        "run on the same training rows and compare them on the same selection rows")
    return p


def train_config(args: argparse.Namespace, preset: dict) -> TrainConfig:
    """The optimisation settings: the preset's, then with --init-from its fine-tune settings (a
    fine-tune never runs at a from-scratch learning rate), then every flag given."""
    settings = {**preset["train"], **(preset["finetune"] if args.init_from else {})}
    recipe = {**settings.pop("recipe", {}),
              **{f.name: getattr(args, f.name) for f in fields(Recipe) if getattr(args, f.name) is not None}}
    recipe["evidence"] = tuple(recipe.get("evidence", ()))  # a list from the command line
    flags = ("max_steps", "batch_size", "lr", "warmup_steps", "eval_every", "eval_batches", "max_minutes",
             "max_tokens", "snapshots")
    given = {name: getattr(args, name) for name in flags if getattr(args, name) is not None}
    settings.setdefault("snapshots", TASKS[args.task].snapshots)
    return TrainConfig(**{**settings, **given, "seed": args.seed, "precision": args.precision,
                          "full_eval": args.full_eval, "recipe": Recipe(**recipe)})


def model_settings(preset: dict, given: dict) -> dict:
    """The model settings of a run: the preset's architecture and classifier settings, then `given`
    (the --init-from shape, --set); the task splits them (`training.tasks.split_settings`)."""
    return {**preset["model"], **preset.get("classifier", {}), **given}


def parse_sets(task: str, pairs: list[str]) -> dict:
    """`--set KEY=VALUE` pairs -> model config fields, typed like the config dataclass."""
    types = {f.name: f.type for f in fields(TASKS[task].model_class.config_class)}
    if getattr(TASKS[task], "labels", None):  # a classifier: its own settings too (classifier.json)
        types |= {f.name: f.type for f in fields(ClassifierConfig) if f.name in CLASSIFIER_SETTINGS}
    allowed = sorted(set(types) - {"vocab_size"})
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in allowed:
            raise UsageError(f"--set {pair}: expected KEY=VALUE with KEY one of {allowed}")
        spelled = str(types[key])  # a class, a union such as `int | None`, or a string annotation
        kind = "bool" if "bool" in spelled else "float" if "float" in spelled else "int"
        try:
            overrides[key] = value.lower() in ("1", "true", "yes") if kind == "bool" else (
                float(value) if kind == "float" else int(value))
        except ValueError:
            raise UsageError(f"--set {pair}: {key} takes {'an integer' if kind == 'int' else 'a number'}") from None
    return overrides


def main(argv: list[str] | None = None) -> dict | None:
    started = time.monotonic()  # --max-minutes counts from here: reading the data is part of the run
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():
            return run(args, argv if argv is not None else sys.argv[1:], started)
    except UsageError as e:
        parser.error(str(e))
    except (ValueError, FileNotFoundError) as e:  # DataError, and a config that rejects its values
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except (Interrupted, KeyboardInterrupt) as e:  # KeyboardInterrupt: before the run folder was chosen
        print(str(e) or "interrupted before the first step: nothing was saved", file=sys.stderr)
        sys.exit(130)


def record_command(commands: list[str], argv: list[str]) -> None:
    """Append this invocation to the commands that trained the state, so `metrics.json` can say how to
    reproduce a run that was continued with other arguments (e.g. a raised --max-steps). A plain
    restart of the last command (with or without --resume) is the same segment and is not repeated."""
    command = "python -m training.run " + shlex.join(argv)
    if not commands or commands[-1].replace(" --resume", "") != command.replace(" --resume", ""):
        commands.append(command)


def default_out(task: str, info: DistInfo) -> Path:
    """A new `runs/<task>-<timestamp>[-n]` folder, created here so that no other run can take it;
    under DDP rank 0 creates it and tells the others."""
    name = [None]
    if info.is_main:
        stamp = f"runs/{task}-{time.strftime('%Y%m%d-%H%M%S')}"
        for n in itertools.count(1):
            name[0] = stamp if n == 1 else f"{stamp}-{n}"
            try:
                Path(name[0]).mkdir(parents=True)
                break
            except FileExistsError:
                continue
    if info.world_size > 1:
        dist.broadcast_object_list(name, src=0)
    return Path(name[0])


def check_out(out: Path, task: str, resume: bool, overwrite: bool) -> None:
    """Refuse to touch a folder that holds another run, unless asked to continue or replace it."""
    if resume and overwrite:
        raise UsageError("--resume and --overwrite exclude each other: continue the run in --out, or replace it")
    if resume:
        if not (out / STATE_NAME).is_file():
            raise UsageError(f"--resume: no {STATE_NAME} in {out}")
        found = read_config(out).get("model_type") if (out / CONFIG_NAME).is_file() else None
        expected = TASKS[task].model_class.model_type
        if found not in (None, expected):
            raise UsageError(f"--resume: {out} holds a {found!r} checkpoint; --task {task} trains a {expected!r}")
        return
    held = run_files(out)
    if held and not overwrite:
        raise UsageError(f"--out {out} already holds a run ({', '.join(held)}): pass --resume to continue it, "
                         "--overwrite to replace it, or choose another --out")


def resume_command(argv: list[str], out: Path) -> str:
    """The command that continues the run in `out`: these arguments, with its --out, --resume and
    not --overwrite."""
    kept = [a for a in argv if a not in ("--resume", "--overwrite")]
    if "--out" not in kept and not any(a.startswith("--out=") for a in kept):
        kept += ["--out", str(out)]
    return "python -m training.run " + shlex.join([*kept, "--resume"])


def run(args: argparse.Namespace, argv: list[str], started: float) -> dict | None:
    presets = TASKS[args.task].presets
    if args.preset not in presets:
        raise UsageError(f"--preset {args.preset}: choose one of {sorted(presets)}")
    preset = presets[args.preset]
    cfg = train_config(args, preset)
    explicit = parse_sets(args.task, args.overrides)  # parsed now: a bad --set fails before data loading
    try:  # the shape is checked now too, with the default vocabulary (the tokenizer's comes later)
        architecture, chosen = split_settings(model_settings(preset, explicit))
        config = TASKS[args.task].model_class.config_class(**architecture)
        if chosen:  # a classifier's cut must fit its window
            ClassifierConfig(labels=list(TASKS[args.task].labels), **chosen).check(config)
    except ValueError as e:
        given = " ".join([f"--preset {args.preset}", *(f"--set {pair}" for pair in args.overrides)])
        raise UsageError(f"{given}: {e}") from None
    if args.val_size is not None and args.val_size < 1:
        raise UsageError(f"--val-size must be >= 1, got {args.val_size}")
    if args.vocab_size is not None and args.vocab_size < 260:
        raise UsageError(f"--vocab-size must be >= 260 (256 bytes + 4 special tokens), got {args.vocab_size}")
    check_source(args)
    if args.print_config:
        print_config(args, preset, cfg, explicit)
        return None
    if args.out:
        check_out(Path(args.out), args.task, args.resume, args.overwrite)
    elif args.resume or args.overwrite:
        raise UsageError(f"--{'resume' if args.resume else 'overwrite'} needs --out: the run folder to continue "
                         "or replace")
    if args.threads is not None:
        if args.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    try:
        device = resolve_device(args.device)
    except ValueError as e:
        raise UsageError(f"--{e}") from None  # "--device cuda: no CUDA device is available ..."
    info = init_distributed(device)
    if info.world_size > 1 and (cfg.recipe.adversarial_eps or cfg.recipe.unfreeze_every):
        raise UsageError("--adversarial-eps and --unfreeze-every run on one process only (not under torchrun)")
    try:
        if device.startswith("cuda") and info.world_size > 1:
            device = f"cuda:{info.local_rank}"
            torch.cuda.set_device(device)
        existed = bool(args.out) and Path(args.out).exists()
        out = Path(args.out) if args.out else default_out(args.task, info)
        try:
            try:
                return train(args, argv, cfg, preset, explicit, device, info, started, out)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside the training loop, or a second one in it
                raise Interrupted(_interrupted(argv, out, info, None)) from None
        except BaseException:
            if info.is_main and not existed and not (out / STATE_NAME).exists():
                shutil.rmtree(out, ignore_errors=True)  # failed before its first checkpoint: no empty run folder
            raise
    finally:
        if info.world_size > 1:
            dist.destroy_process_group()


def check_source(args: argparse.Namespace) -> None:
    """One data source, and --data in a form the task reads; before anything is read or created."""
    given = [flag for flag, value in (("--data", args.data), ("--data-dir", args.data_dir),
                                      ("--dataset", args.dataset)) if value]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one data source (--data your text, --data-dir a folder of "
                         "splits, or --dataset a Hub name)")
    own_text.check_encoding(args.encoding)
    if args.data and args.task not in ("lm", "span") and Path(args.data).suffix not in DATA_SUFFIXES:
        raise UsageError(f"--task {args.task} reads --data as a .parquet/.csv/.jsonl table with its columns, "
                         f"not {args.data}")


def print_config(args: argparse.Namespace, preset: dict, cfg: TrainConfig, explicit: dict) -> None:
    """The settings this command would train with, as far as they are known before the data is read."""
    data = ({"data": args.data, "encoding": args.encoding} if args.data else
            {"data_dir": args.data_dir} if args.data_dir else {"dataset": args.dataset or HUB_IMDB})
    held_out = args.val_size or (f"a tenth of the documents, at most {own_text.MAX_HELD_OUT:,}" if args.data else 2500)
    tokenizer = args.tokenizer or (f"{args.init_from}'s" if args.init_from else
                                   "its own, trained on the training part" if args.data else DEFAULT_TOKENIZER)
    vocab = args.vocab_size or ("sized to the text" if args.data and not (args.tokenizer or args.init_from) else None)
    model = model_settings(preset, explicit)
    train = asdict(cfg)
    if cfg.max_steps is None:
        train["max_steps"] = sizing_words(cfg)
    print(json.dumps({"task": args.task, "preset": args.preset, **data, "val_size": held_out,
                      "split_seed": split_seed(args), "max_examples": args.max_examples,
                      "tokenizer": tokenizer, "vocab_size": vocab, "init_from": args.init_from,
                      "model": model, "train": train}, indent=2, default=str))


def read_data(args: argparse.Namespace) -> tuple[dict, dict]:
    """(splits, what metrics.json records of them: enough for `training.evaluate --checkpoint RUN` to
    find the held-out rows again), with the held-out size this data gets."""
    if not args.data:
        splits = load_splits(args.data_dir, args.dataset or HUB_IMDB)
        return splits, {"kind": "data_dir" if args.data_dir else "dataset", "source": args.data_dir or
                        args.dataset or HUB_IMDB, "val_size": args.val_size or 2500}
    own = own_text.read(args.data, args.encoding)
    documents = len(head_rows(own.documents, args.max_examples))
    val_size = args.val_size or own_text.held_out_count(documents)
    return own.splits, {"kind": "data", "source": args.data, "encoding": args.encoding, "unit": own.unit,
                        "documents": own.documents, "empty_dropped": own.dropped, "bytes": own.n_bytes,
                        "val_size": val_size,
                        "held_out": f"{val_size:,} of {documents:,} {own.unit} ({val_size / documents:.0%})"}


def train(args: argparse.Namespace, argv: list[str], cfg: TrainConfig, preset: dict, explicit: dict,
          device: str, info: DistInfo, started: float, out: Path) -> dict | None:
    state = Trainer.read_state(out / STATE_NAME) if args.resume else None
    if state is not None:
        _check_resumable(state, cfg, {}, info, out)  # the cheap checks before the data is read

    splits, source = read_data(args)
    options = TaskOptions(source["val_size"], split_seed(args), args.max_examples, args.source_column,
                          args.target_column)
    task = TASKS[args.task](splits, options)
    if args.data:  # a changed file must not be scored as if it were the run's held-out part
        held_out = held_out_of(splits, source["val_size"], split_seed(args), args.max_examples)
        source["held_out_sha256"] = held_out_digest(held_out)
    choice = choose_tokenizer(args, task.corpus.train_texts, out, info.is_main, info.world_size)
    tokenizer = choice.tokenizer

    lm, lm_shape, started_from = None, {}, None
    if args.init_from:
        lm = load_pretrained(args.init_from)
        started_from = lineage(args.init_from)  # now: `--out` may be the very folder it names
        model_class = TASKS[args.task].model_class
        lm_shape = shape_from(model_class, lm, tokenizer.vocab_size)
        if lm_shape is None:
            raise UsageError(f"--init-from {args.init_from}: needs {STARTS_FROM[model_class]} using {choice.origin}")

    data = task.prepare(tokenizer, model_settings(preset, {**lm_shape, **explicit}), cfg)  # an explicit --set wins
    if cfg.recipe.lm_weight and not getattr(data.config, "causal_encoder", False):
        raise UsageError("--lm-weight needs a causal encoder (--set causal_encoder=1): a bidirectional one sees "
                         "the token it would predict")
    if state is not None:
        _check_resumable(state, cfg, asdict(data.config), info, out, training_rows(task, data))
    torch.manual_seed(args.seed)
    model = task.build(data)
    if lm is not None:
        try:
            init_from(model, lm)
        except ValueError as e:  # a --set that changes the shape the checkpoint gives
            raise UsageError(f"--init-from {args.init_from}: {e}") from None
    torch.manual_seed(args.seed + info.rank)  # dropout differs per rank; DDP broadcasts rank 0's weights
    if info.is_main:
        start_run(out, "python -m training.run " + shlex.join(argv), replace=args.overwrite)  # the app won't serve it
        tokenizer.save(out)  # beside the weights from the start: sample, evaluate and the app read it there
    return train_and_finish(args, argv, cfg, task, data, model, state, out, device, info, started, started_from,
                            source, choice.record())


def split_seed(args: argparse.Namespace) -> int:
    """Which train rows are held out: --split-seed, else --seed."""
    return args.seed if args.split_seed is None else args.split_seed


CHANCE_SIGMAS = 2  # a classifier this close to always answering the commoner label learned nothing


def trained_text(checkpoint: str | None) -> str | None:
    """The file a checkpoint was trained on with `--data` (a text of its own, with that text's own
    tokenizer), from its metrics.json; None for any other checkpoint, or none."""
    try:
        data = json.loads((Path(checkpoint) / METRICS_NAME).read_text(encoding="utf-8")).get("data")
    except (TypeError, OSError, ValueError, AttributeError):
        return None
    own = isinstance(data, dict) and data.get("kind") == "data" and data.get("source")
    return Path(str(data["source"])).name if own else None


def chance_warning(accuracy: float, rows: int, labels: list[int], init: str | None) -> str | None:
    """One line when a classifier's held-out `accuracy` (on `rows` rows) is within CHANCE_SIGMAS standard
    errors of always answering the commoner of the held-out `labels`: it learned nothing. When it started
    from a language model of a text of its own (`init`), that is the likely cause: from the laptop LM of
    tinyshakespeare the laptop sentiment preset stayed at 50.6% (docs/training.md)."""
    majority = max(labels.count(label) for label in set(labels)) / len(labels)
    if accuracy > majority + CHANCE_SIGMAS * (majority * (1 - majority) / max(1, rows)) ** 0.5:
        return None
    cause = trained_text(init)
    why = (f": it started from {init}, a language model of `{cause}` that reads with that text's own tokenizer, "
           "not of reviews (from one of Shakespeare this preset stayed at 50.6%: docs/training.md); start from "
           "checkpoints/lm, the IMDB LM, instead" if cause else "")
    return (f"warning: held-out accuracy {accuracy:.1%} is chance (the commoner label alone scores {majority:.1%}): "
            f"this classifier learned nothing{why}")


def train_and_finish(args: argparse.Namespace, argv: list[str], cfg: TrainConfig, task: Task, data: TaskData,
                     model: PreTrainedModel, state: dict | None, out: Path, device: str, info: DistInfo,
                     started: float, started_from: dict | None, source: dict, tokenizer: dict) -> dict | None:
    """Train, then score the checkpoint kept and write metrics.json, within --max-minutes of `started`.
    `started_from`: the `--init-from` checkpoint's `lineage`; a resumed run keeps the one its state recorded.
    `source` and `tokenizer`: what `read_data` and `choose_tokenizer` record of the data and the tokenizer."""
    trainer = Trainer(model, task, data, out, device, info, getattr(torch, args.save_dtype))
    trainer.init_from = started_from
    if state is not None:
        trainer.load_state(state)
        print(f"resumed from {out / STATE_NAME} at step {trainer.step}")
    del state
    record_command(trainer.commands, argv)
    described = {**task.corpus.description, **data.description}  # with the rows the recipe added
    if info.is_main:
        ready = time.monotonic() - started
        held_out = source.get("held_out", f"{source['val_size']:,} rows")
        print(f"{args.task}: {model.num_parameters():,} parameters on {device} x{info.world_size} in "
              f"{trainer.precision}, {described}; data {source['source']}, held out {held_out}; tokenizer "
              f"{tokenizer['origin']}: {tokenizer['vocab_size']:,} tokens -> {out} (ready after {ready:.0f} s)")
        if device == "cpu":  # on a GPU the fused attention keeps no weights: the estimate is a CPU's
            warning = memory_warning(model.config, cfg.batch_size, cfg.max_tokens, model.num_parameters(),
                                     available_bytes())
            if warning:
                print(f"warning: {warning}", file=sys.stderr, flush=True)
    reason = trainer.train(started + cfg.max_minutes * 60 if cfg.max_minutes is not None else None)
    if reason == "interrupted":
        raise Interrupted(_interrupted(argv, out, info, trainer.step))
    in_sync = weights_in_sync(trainer.model, info)
    if not info.is_main:
        return None

    best = load_pretrained(out, device)  # final figures are those of the checkpoint that ships
    final = trainer.final_metrics(best)
    samples = task.samples(best, data)
    metrics = {
        "task": args.task, "model_type": best.model_type, "preset": args.preset,
        "parameters": best.num_parameters(), **final,
        "best_step": trainer.best["step"], "steps": trainer.step, "max_steps": trainer.cfg.max_steps,
        "stopped_by": reason,  # and how max_steps was fitted to the minutes:
        **({"sized_to_budget": trainer.budget.sized} if trainer.budget.sized else {}),
        "tokens_seen": trainer.tokens_seen, "train_time_s": round(trainer.elapsed, 1),
        "wall_time_s": round(time.monotonic() - started, 1), "device": _device_name(device),
        "precision": trainer.precision, "world_size": info.world_size,
        "ddp_weights_in_sync": in_sync,
        "command": " && ".join(trainer.commands),
        **({"init_from": trainer.init_from} if trainer.init_from else {}),
        "data": {**source, **described, "max_examples": args.max_examples}, "split_seed": split_seed(args),
        "tokenizer": tokenizer,
        **({"sample_prompts": task.sample_prompts()} if samples else {}),
        "model_config": asdict(best.config), "train_config": asdict(trainer.cfg),
        **({"classifier_config": asdict(data.classifier)} if data.classifier is not None else {}),
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "history": trainer.history, **({"samples": samples} if samples else {}),
    }
    atomic_write_text(out / METRICS_NAME, json.dumps(metrics, indent=2) + "\n")
    plot_curve(trainer.history, out / CURVE_NAME, title=f"{args.task} ({args.preset})")
    finish_run(out)
    summary = {k: v for k, v in metrics.items() if k.startswith(("val_", "test_")) and not isinstance(v, list)}
    read = ", ".join(f"{split} {r['rows']:,} of {r['of']:,} rows" for split, r in final["final_eval"].items())
    print(f"done ({reason}): step {trainer.step}, {trainer.tokens_seen:,} tokens, training {trainer.elapsed:.0f} s, "
          f"wall time {_minutes(time.monotonic() - started)} -> {out}\nfinal evaluation: {read}\n"
          + json.dumps(summary, indent=2))
    if samples:
        print(f"samples ({', '.join(f'{k} {v}' for k, v in SAMPLE_SETTINGS.items())}; more: python -m training.sample "
              f"--checkpoint {out}):\n" + "\n".join(f"  {text!r}" for text in samples))
    if "val_bpb" in metrics:
        print(f"held-out bits per byte: {metrics['val_bpb']:.3f} ({source.get('held_out', source['source'])})")
    labels = getattr(data.splits["val"], "labels", None)
    if "val_accuracy" in metrics and labels:
        warning = chance_warning(metrics["val_accuracy"], final["final_eval"]["val"]["rows"], labels, args.init_from)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    print(f"score it again: python -m training.evaluate --checkpoint {out}; serve it: python -m demo "
          f"--{'lm' if isinstance(best, LMTask.model_class) else 'sentiment'} {out}")
    return metrics


def _interrupted(argv: list[str], out: Path, info: DistInfo, step: int | None) -> str:
    """The one line a stopped run ends with, after recording in its in-progress mark where it stopped.
    `step`: where the loop saved; None when it did not (the last save, if any, is on disk)."""
    saved = Trainer.read_state(out / STATE_NAME)["step"] if step is None and (out / STATE_NAME).is_file() else step
    if saved is None:
        if info.is_main and run_marker(out).get("pid") == os.getpid():
            finish_run(out)  # this run marked the folder but trained nothing: there is no run to resume
        return "interrupted before the first step: nothing was saved"
    command = resume_command(argv, out)
    if info.is_main:
        interrupt_run(out, saved, command)
    return f"interrupted: the state at step {saved} is saved in {out}; continue with: {command}"


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d} ({seconds:.0f} s)"


def _check_resumable(state: dict, cfg: TrainConfig, model_config: dict, info: DistInfo, out: Path,
                     train_rows: int | None = None) -> None:
    changed = resume_mismatches(state, cfg, model_config, info.world_size, train_rows)
    if changed:
        raise UsageError(f"--resume: {out} was trained with {'; '.join(changed)}. Resume with the same settings, "
                         "or start a new run (another --out, or --overwrite)")


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


if __name__ == "__main__":
    main()

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

# The docstring above is `python -m training.run --help`; this module is that command line, checked and
# frozen into one `RunSpec` (`run_spec`), which `training.run` runs.
import argparse
import json
import shlex
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from classifier import ClassifierConfig
from cli import Parser
from model import PRECISIONS, read_config
from storage import CONFIG_NAME, STATE_NAME, run_files

from . import own_text
from .budget import sizing_words
from .data import DATA_SUFFIXES, HUB_IMDB
from .errors import UsageError
from .presets import DEFAULT_PRESET, PRESET_HELP, preset_table
from .recipe import SCHEDULES, Recipe
from .tasks import CLASSIFIER_SETTINGS, TASKS, LMTask, split_settings
from .tokenizer_choice import DEFAULT_TOKENIZER
from .training_args import TrainConfig
from .transfer import planned_shape


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
                           "(sub-folders too), or a .parquet/.csv/.jsonl table (an LM needs only 'text'); the last "
                           "tenth of each file is held out (a table: a tenth of its rows), and a "
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
    recipe.add_argument("--evidence-copies", type=int,
                        help="sentiment: each distinct evidence snippet joins the training rows, with its label, "
                             "N copies each")
    p.add_argument("--seed", type=int, default=1337,
                   help="initialisation, data order and dropout; also which rows are held out, unless --split-seed")
    p.add_argument("--split-seed", type=int,
                   help="which train rows are held out (default: --seed). Keep 1337 to train another seed of a "
                        "run on the same training rows and compare them on the same selection rows")
    return p


@dataclass(frozen=True)
class RunSpec:
    """One run as its command line asks for it, checked before anything is read or created; every later
    step reads it and nothing changes it. `train` holds the optimisation settings as given: a count the
    time budget sizes is recorded beside them (`training.budget`), never written into them."""

    argv: tuple[str, ...]  # the arguments as given: the command metrics.json and --resume repeat
    task: str
    preset: str
    train: TrainConfig
    preset_model: dict  # the preset's architecture and classifier settings
    sets: dict  # --set: they win over the preset and over --init-from's shape
    data: str | None
    encoding: str
    data_dir: str | None
    dataset: str | None
    source_column: str
    target_column: str
    out: str | None
    overwrite: bool
    resume: bool
    tokenizer: str | None
    vocab_size: int | None
    device: str
    threads: int | None
    val_size: int | None
    max_examples: int | None
    save_dtype: str
    init_from: str | None
    seed: int
    split_seed: int  # which train rows are held out: --split-seed, else --seed

    @property
    def command(self) -> str:
        return "python -m training.run " + shlex.join(self.argv)

    def model_settings(self, shape: dict | None = None) -> dict:
        """The model settings: the preset's, then `shape` (--init-from's), then --set; the task splits
        them (`training.tasks.split_settings`)."""
        return {**self.preset_model, **(shape or {}), **self.sets}


def run_spec(args: argparse.Namespace, argv: list[str]) -> RunSpec:
    """The run `args` ask for; a UsageError names the first option that cannot be (the shape is checked
    with the default vocabulary: the tokenizer's comes later)."""
    presets = TASKS[args.task].presets
    if args.preset not in presets:
        raise UsageError(f"--preset {args.preset}: choose one of {sorted(presets)}")
    preset = presets[args.preset]
    resolved = {"argv": tuple(argv), "train": train_config(args, preset),
                "preset_model": {**preset["model"], **preset.get("classifier", {})},
                "sets": parse_sets(args.task, args.overrides),  # now: a bad --set fails before data loading
                "split_seed": args.seed if args.split_seed is None else args.split_seed}
    spec = RunSpec(**resolved, **{f.name: getattr(args, f.name) for f in fields(RunSpec) if f.name not in resolved})
    try:
        architecture, chosen = split_settings(spec.model_settings())
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
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be >= 1, got {args.threads}")
    check_source(args)
    return spec


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


def print_config(spec: RunSpec) -> None:
    """The settings this command would train with, as far as they are known before the data is read."""
    data = ({"data": spec.data, "encoding": spec.encoding} if spec.data else
            {"data_dir": spec.data_dir} if spec.data_dir else {"dataset": spec.dataset or HUB_IMDB})
    held_out = spec.val_size or (own_text.printed_held_out(spec.data, spec.task) if spec.data else 2500)
    tokenizer = spec.tokenizer or (f"{spec.init_from}'s" if spec.init_from else
                                   "its own, trained on the training part" if spec.data else DEFAULT_TOKENIZER)
    vocab = spec.vocab_size or ("sized to the text" if spec.data and not (spec.tokenizer or spec.init_from) else None)
    train = asdict(spec.train)
    if spec.train.max_steps is None:
        train["max_steps"] = sizing_words(spec.train)
    print(json.dumps({"task": spec.task, "preset": spec.preset, **data, "val_size": held_out,
                      "split_seed": spec.split_seed, "max_examples": spec.max_examples,
                      "tokenizer": tokenizer, "vocab_size": vocab, "init_from": spec.init_from,
                      "model": spec.model_settings(planned_shape(TASKS[spec.task].model_class, spec.init_from)),
                      "train": train}, indent=2, default=str))

"""Train a model of this repo on IMDB, on your own text, or on any text table, and write a checkpoint directory:
`python -m training.run --help` (the text of `training.run_spec`, which turns the command line into one
frozen `RunSpec`).

    python -m training.run --task lm --preset laptop --data mytext.txt --out runs/mine

`run` sets up the run folder (its lifecycle is `storage.run_folder`'s) and the machine; a `Run` reads the
data, builds the model, trains it (`training.trainer`, its time budget `training.budget`) and reports
(`training.run_report`: metrics.json and the closing lines).
"""

import os
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from model import PreTrainedModel, load_pretrained, resolve_device
from storage import (
    STATE_NAME,
    interrupt_run,
    lineage,
    new_run_folder,
    nothing_saved,
    removed_on_failure,
    start_run,
)

from . import own_text, run_report
from .contract import Task, TaskData, TaskOptions
from .data import HUB_IMDB, held_out_digest, held_out_of, load_splits
from .distributed import DistInfo, init_distributed, weights_in_sync
from .errors import Interrupted, UsageError
from .run_report import Provenance
from .run_spec import RunSpec, build_parser, check_out, print_config, run_spec
from .stopping import sigterm_as_interrupt
from .tasks import TASKS
from .tokenizer_choice import choose_tokenizer
from .trainer import Trainer, resume_mismatches, training_rows
from .transfer import STARTS_FROM, init_from, shape_from


def main(argv: list[str] | None = None) -> dict | None:
    started = time.monotonic()  # --max-minutes counts from here: reading the data is part of the run
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():
            spec = run_spec(args, argv if argv is not None else sys.argv[1:])
            if args.print_config:
                print_config(spec)
                return None
            return run(spec, started)
    except UsageError as e:
        parser.error(str(e))
    except (ValueError, FileNotFoundError) as e:  # DataError, and a config that rejects its values
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except (Interrupted, KeyboardInterrupt) as e:  # KeyboardInterrupt: before the run folder was chosen
        print(str(e) or "interrupted before the first step: nothing was saved", file=sys.stderr)
        sys.exit(130)


def run(spec: RunSpec, started: float) -> dict | None:
    """The run folder and the machine around one `Run`: the folder checked (or a new one made), the device
    and the process group set up, and the folder removed if the run fails before its first save."""
    if spec.out:
        check_out(Path(spec.out), spec.task, spec.resume, spec.overwrite)
    elif spec.resume or spec.overwrite:
        raise UsageError(f"--{'resume' if spec.resume else 'overwrite'} needs --out: the run folder to continue "
                         "or replace")
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    try:
        device = resolve_device(spec.device)
    except ValueError as e:
        raise UsageError(f"--{e}") from None  # "--device cuda: no CUDA device is available ..."
    info = init_distributed(device)
    if info.world_size > 1 and (spec.train.recipe.adversarial_eps or spec.train.recipe.unfreeze_every):
        raise UsageError("--adversarial-eps and --unfreeze-every run on one process only (not under torchrun)")
    try:
        if device.startswith("cuda") and info.world_size > 1:
            device = f"cuda:{info.local_rank}"
            torch.cuda.set_device(device)
        existed = bool(spec.out) and Path(spec.out).exists()
        out = Path(spec.out) if spec.out else default_out(spec.task, info)
        with removed_on_failure(out, keep=existed or not info.is_main):
            try:
                return Run(spec, out, device, info, started).train()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside the training loop, or a second one in it
                raise Interrupted(interrupted(spec, out, info, None)) from None
    finally:
        if info.world_size > 1:
            dist.destroy_process_group()


class Run:
    """One invocation of `spec` in the folder `out` on `device` (under torchrun, one rank's share), whose
    --max-minutes count from `started`: it reads the data, builds the model, trains it and reports."""

    def __init__(self, spec: RunSpec, out: Path, device: str, info: DistInfo, started: float):
        self.spec, self.out, self.device, self.info, self.started = spec, out, device, info, started
        self.task: Task | None = None  # `prepare` reads it ...
        self.data: TaskData | None = None  # ... prepares the tokenized splits and the model config ...
        self.origin: Provenance | None = None  # ... and records where they came from

    def train(self) -> dict | None:
        """Train, then (rank 0) score the checkpoint kept and write metrics.json, within --max-minutes."""
        spec, info = self.spec, self.info
        state = Trainer.read_state(self.out / STATE_NAME) if spec.resume else None
        if state is not None:
            self.check_resumable(state, {})  # the cheap checks before the data is read
        model, started_from = self.prepare(state)
        trainer = Trainer(model, self.task, self.data, self.out, self.device, info, getattr(torch, spec.save_dtype))
        trainer.init_from = started_from
        if state is not None:
            trainer.load_state(state)
            print(f"resumed from {self.out / STATE_NAME} at step {trainer.step}")
        del state
        record_command(trainer.commands, spec.command)
        if info.is_main:
            run_report.print_start(spec, trainer, self.origin)
        reason = trainer.train(self.started + spec.train.max_minutes * 60 if spec.train.max_minutes is not None
                               else None)
        if reason == "interrupted":
            raise Interrupted(interrupted(spec, self.out, info, trainer.step))
        in_sync = weights_in_sync(trainer.model, info)
        return run_report.finish(spec, trainer, self.origin, reason, in_sync) if info.is_main else None

    def prepare(self, state: dict | None) -> tuple[PreTrainedModel, dict | None]:
        """Read the data, choose the tokenizer, build the model (from --init-from's, if given) and mark the
        run folder; returns the model and the `lineage` of what it started from."""
        spec, info = self.spec, self.info
        splits, source = read_data(spec)
        options = TaskOptions(source["val_size"], spec.split_seed, spec.max_examples, spec.source_column,
                              spec.target_column, spec.data)
        self.task = TASKS[spec.task](splits, options)
        if spec.data:  # a changed file must not be scored as if it were the run's held-out part
            held_out = held_out_of(splits, source["val_size"], spec.split_seed, spec.max_examples)
            source["held_out_sha256"] = held_out_digest(held_out)
        choice = choose_tokenizer(spec, self.task.corpus.train_texts, self.out, info.is_main, info.world_size)
        self.origin = Provenance(source, choice.record(), self.started)
        lm, lm_shape, started_from = None, {}, None
        if spec.init_from:
            lm = load_pretrained(spec.init_from)
            started_from = lineage(spec.init_from)  # now: `--out` may be the very folder it names
            model_class = TASKS[spec.task].model_class
            lm_shape = shape_from(model_class, lm, choice.tokenizer.vocab_size)
            if lm_shape is None:
                raise UsageError(f"--init-from {spec.init_from}: needs {STARTS_FROM[model_class]} using "
                                 f"{choice.origin}")
        self.data = self.task.prepare(choice.tokenizer, spec.model_settings(lm_shape), spec.train)
        if spec.train.recipe.lm_weight and not getattr(self.data.config, "causal_encoder", False):
            raise UsageError("--lm-weight needs a causal encoder (--set causal_encoder=1): a bidirectional one sees "
                             "the token it would predict")
        if state is not None:
            self.check_resumable(state, asdict(self.data.config), training_rows(self.task, self.data))
        torch.manual_seed(spec.seed)
        model = self.task.build(self.data)
        if lm is not None:
            try:
                init_from(model, lm)
            except ValueError as e:  # a --set that changes the shape the checkpoint gives
                raise UsageError(f"--init-from {spec.init_from}: {e}") from None
        torch.manual_seed(spec.seed + info.rank)  # dropout differs per rank; DDP broadcasts rank 0's weights
        if info.is_main:
            start_run(self.out, spec.command, replace=spec.overwrite)  # the app won't serve it
            choice.tokenizer.save(self.out)  # beside the weights from the start: sample, evaluate and the app read it
        return model, started_from

    def check_resumable(self, state: dict, model_config: dict, train_rows: int | None = None) -> None:
        changed = resume_mismatches(state, self.spec.train, model_config, self.info.world_size, train_rows)
        if changed:
            raise UsageError(f"--resume: {self.out} was trained with {'; '.join(changed)}. Resume with the same "
                             "settings, or start a new run (another --out, or --overwrite)")


def read_data(spec: RunSpec) -> tuple[dict, dict]:
    """(splits, what metrics.json records of them: enough for `training.evaluate --checkpoint RUN` to
    find the held-out rows again), with the held-out size this data gets."""
    if not spec.data:
        splits = load_splits(spec.data_dir, spec.dataset or HUB_IMDB)
        return splits, {"kind": "data_dir" if spec.data_dir else "dataset", "source": spec.data_dir or
                        spec.dataset or HUB_IMDB, "val_size": spec.val_size or 2500}
    own = own_text.read(spec.data, spec.encoding)
    if own.note and os.environ.get("RANK", "0") == "0":  # what of a folder was not read; once under torchrun
        print(own.note)
    return own.splits, own_text.record(own, spec.data, spec.encoding, spec.val_size, spec.max_examples)


def record_command(commands: list[str], command: str) -> None:
    """Append this invocation's `command` to the commands that trained the state, so `metrics.json` can say
    how to reproduce a run that was continued with other arguments (e.g. a raised --max-steps). A plain
    restart of the last command (with or without --resume) is the same segment and is not repeated."""
    if not commands or commands[-1].replace(" --resume", "") != command.replace(" --resume", ""):
        commands.append(command)


def default_out(task: str, info: DistInfo) -> Path:
    """A new run folder (`storage.new_run_folder`); under DDP rank 0 creates it and tells the others."""
    name = [str(new_run_folder(task)) if info.is_main else None]
    if info.world_size > 1:
        dist.broadcast_object_list(name, src=0)
    return Path(name[0])


def resume_command(argv: tuple[str, ...], out: Path) -> str:
    """The command that continues the run in `out`: these arguments, with its --out, --resume and
    not --overwrite."""
    kept = [a for a in argv if a not in ("--resume", "--overwrite")]
    if "--out" not in kept and not any(a.startswith("--out=") for a in kept):
        kept += ["--out", str(out)]
    return "python -m training.run " + shlex.join([*kept, "--resume"])


def interrupted(spec: RunSpec, out: Path, info: DistInfo, step: int | None) -> str:
    """The one line a stopped run ends with, after recording in its in-progress mark where it stopped.
    `step`: where the loop saved; None when it did not (the last save, if any, is on disk)."""
    saved = Trainer.read_state(out / STATE_NAME)["step"] if step is None and (out / STATE_NAME).is_file() else step
    if saved is None:
        if info.is_main:
            nothing_saved(out)  # this run marked the folder but trained nothing: there is no run to resume
        return "interrupted before the first step: nothing was saved"
    command = resume_command(spec.argv, out)
    if info.is_main:
        interrupt_run(out, saved, command)
    return f"interrupted: the state at step {saved} is saved in {out}; continue with: {command}"


if __name__ == "__main__":
    main()

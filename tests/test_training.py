"""End-to-end tests of `training.run` / `training.evaluate` on a few hundred local reviews."""

import hashlib
import json
import math
import random
import shlex
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from classifier import ClassifierConfig
from model import DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig, MultiHeadAttention, load_pretrained
from publishing import report
from storage import SNAPSHOTS_DIR, STATE_NAME, chain, read_index
from tokenization import BPETokenizer, clean_text
from training import budget, evaluate, run, run_spec
from training.budget import FINAL_OVERHEAD_S, FINAL_SHARE
from training.distributed import DistInfo
from training.recipe import Recipe
from training.schedules import lr_at
from training.tasks import CLASSIFIER_SETTINGS, TASKS
from training.trainer import STOPS, Trainer, snapshot_steps
from training.training_args import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
IMDB = ROOT.parent / "shared" / "data" / "imdb"
pytestmark = pytest.mark.needs_imdb

REQUIRED_METRICS = {"task", "model_type", "parameters", "val_loss", "steps", "tokens_seen", "wall_time_s",
                    "train_time_s", "device", "command", "data", "history", "best_step", "model_config"}


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory) -> Path:
    texts = [clean_text(t) for t in pd.read_parquet(IMDB / "train.parquet")["text"].sample(300, random_state=0)]
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    BPETokenizer.train(texts, vocab_size=1000).save(path)
    return path


def train(task: str, out: Path, tokenizer: Path, *extra: str) -> dict:
    return run.main(["--task", task, "--preset", "tiny", "--data-dir", str(IMDB), "--out", str(out),
                     "--tokenizer", str(tokenizer), "--max-examples", "300", "--val-size", "40", *extra])


def test_lm_end_to_end(tmp_path, tokenizer_path, capsys):
    metrics = train("lm", tmp_path / "lm", tokenizer_path, "--max-steps", "40", "--eval-every", "20")
    assert REQUIRED_METRICS <= set(metrics)
    assert {"val_ppl", "val_bpb", "samples"} <= set(metrics)
    # three samples, printed at the end and kept; the final evaluation read every validation window
    printed = capsys.readouterr().out
    prompts = metrics["sample_prompts"]  # the openings of held-out reviews
    assert len(prompts) == 3 and all(s.startswith(p) for s, p in zip(metrics["samples"], prompts, strict=True))
    assert all(repr(text) in printed for text in metrics["samples"]) and "python -m training.sample" in printed
    windows = metrics["val_tokens"] // 64
    assert metrics["final_eval"] == {"val": {"rows": windows, "of": windows}} and "wall time" in printed
    saved = json.loads((tmp_path / "lm" / "metrics.json").read_text())
    assert saved["val_bpb"] == metrics["val_bpb"] and saved["steps"] == 40
    history = metrics["history"]
    assert [h["step"] for h in history] == [20, 40]
    assert history[-1]["train_loss"] < history[0]["train_loss"] and history[-1]["val_loss"] < 6.9  # ln(1000)=6.9
    model = load_pretrained(tmp_path / "lm")
    assert isinstance(model, DecoderOnlyLM) and model.config.vocab_size == 1000
    rows = report.table(report.load_runs([tmp_path])).splitlines()
    assert f"| `lm` | bits per byte | {metrics['val_bpb']:.3f} |" in rows[2] and metrics["command"] in rows[2]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "training_curve.png", STATE_NAME):
        assert (tmp_path / "lm" / name).is_file(), name
    # bits per byte is the loss re-expressed per UTF-8 byte: check the identity on the saved numbers
    bits = metrics["val_loss"] * metrics["val_tokens"] / math.log(2)
    assert metrics["val_bpb"] == pytest.approx(bits / _val_bytes(metrics, tokenizer_path), rel=1e-6)


def _val_bytes(metrics, tokenizer_path) -> float:
    """UTF-8 bytes of the validation reviews (+1 per review boundary), recomputed independently."""
    from training.data import validation_split
    df = pd.read_parquet(IMDB / "train.parquet")
    rows = sorted(random.Random(0).sample(range(len(df)), 300))
    texts = [clean_text(df["text"][i]) for i in rows]
    _, val_idx = validation_split(len(texts), 40, 1337)
    val = [texts[i] for i in val_idx]
    tok = BPETokenizer.from_file(tokenizer_path)
    n_ids = sum(len(tok.encode(t)) + 2 for t in val)
    return (sum(len(t.encode()) for t in val) + len(val)) * metrics["val_tokens"] / (n_ids - 1)


def test_sentiment_end_to_end_and_evaluate_cli(tmp_path, tokenizer_path, capsys):
    metrics = train("sentiment", tmp_path / "s", tokenizer_path, "--max-steps", "30", "--eval-every", "15",
                    "--set", "src_keep_tail=32")
    assert REQUIRED_METRICS <= set(metrics) and 0.0 <= metrics["val_accuracy"] <= 1.0
    # validated on the selection part of the 40 held-out reviews (training.heldout): 16 of them
    assert metrics["val_examples"] == 16 and sum(map(sum, metrics["val_confusion"])) == 16
    model = load_pretrained(tmp_path / "s")
    # the new layout: config.json the architecture, classifier.json the classifier's settings
    assert isinstance(model, EncoderDecoder)
    moved = set(EncoderDecoderConfig.moved_to_classifier)
    assert not set(json.loads((tmp_path / "s" / "config.json").read_text())) & moved
    settings = ClassifierConfig.from_pretrained(tmp_path / "s")
    assert json.loads((tmp_path / "s" / "classifier.json").read_text()) == metrics["classifier_config"]
    assert settings.labels == ["negative", "positive"]
    assert settings.src_keep_tail == 32  # saved, so evaluation and the app cut reviews the same way
    assert settings.temperature == metrics["temperature"] != 1.0  # fitted at the end and written to classifier.json
    assert metrics["history"][-1]["train_loss"] < metrics["history"][0]["train_loss"] or \
        metrics["history"][0]["train_loss"] < 1.0

    # a file never seen in training: 20 reviews from the unlabeled-free train file, CSV this time
    df = pd.read_parquet(IMDB / "train.parquet").sample(20, random_state=5)
    csv = tmp_path / "few.csv"
    df.to_csv(csv, index=False)
    capsys.readouterr()
    result = evaluate.main(["--checkpoint", str(tmp_path / "s"), "--data", str(csv)])
    printed = capsys.readouterr().out
    assert result["examples"] == 20 and sum(map(sum, result["confusion"])) == 20
    assert f"accuracy {result['accuracy']:.4f} on 20 examples" in printed and "confusion matrix" in printed
    assert sum(result["confusion"][1]) == int(df["label"].sum())  # row 1 = true positives + false negatives


def test_evaluate_cli_on_lm_text_file_and_half_precision_storage(tmp_path, tokenizer_path, capsys):
    train("lm", tmp_path / "lm", tokenizer_path, "--max-steps", "5", "--eval-every", "5", "--save-dtype", "float16")
    from safetensors import safe_open
    with safe_open(tmp_path / "lm" / "model.safetensors", "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    txt = tmp_path / "reviews.txt"
    txt.write_text("A wonderful film with a great cast.\n\nTerrible plot, I walked out. " * 20, encoding="utf-8")
    result = evaluate.main(["--checkpoint", str(tmp_path / "lm"), "--data", str(txt)])
    assert set(result) == {"loss", "ppl", "bpb", "tokens"} and result["tokens"] > 0
    assert result["ppl"] == pytest.approx(torch.tensor(result["loss"]).exp().item(), rel=1e-5)
    assert '"bpb"' in capsys.readouterr().out


def test_evaluate_cli_rescores_a_run_on_its_own_validation_split(tmp_path, tokenizer_path):
    """`--data-dir` gives the reviews training.run held out, in its order: the figures match the run's."""
    data = tmp_path / "data"
    data.mkdir()
    pd.read_parquet(IMDB / "train.parquet").sample(200, random_state=3).to_parquet(data / "train.parquet")
    for task, key in (("lm", "bpb"), ("sentiment", "accuracy")):
        metrics = run.main(["--task", task, "--preset", "tiny", "--data-dir", str(data), "--out", str(tmp_path / task),
                            "--tokenizer", str(tokenizer_path), "--val-size", "30", "--max-steps", "4",
                            "--eval-every", "4",
                            "--precision", "fp32"])  # as training.evaluate scores (auto: bf16 where native)
        result = evaluate.main(["--checkpoint", str(tmp_path / task), "--data-dir", str(data), "--val-size", "30"])
        assert result[key] == pytest.approx(metrics[f"val_{key}"], rel=1e-6)
        assert evaluate.main(["--checkpoint", str(tmp_path / task)])[key] == result[key]  # found from metrics.json
    assert result["confusion"] == metrics["val_confusion"] and result["examples"] == 12  # the selection 40% of 30


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_registers_its_presets_and_card(name):
    """What the contract (`training.contract`) asks of a new task, on the class itself (not inherited)."""
    task = TASKS[name]
    assert task.name == name and {"presets", "card"} <= vars(task).keys()
    assert "tiny" in task.presets
    model_fields = {f.name for f in fields(task.model_class.config_class)}
    for preset in task.presets.values():
        # every task starts from a trained model (--init-from) and says how each preset fine-tunes
        assert {"model", "train", "finetune"} <= preset.keys() <= {"model", "classifier", "train", "finetune"}
        assert preset["model"].keys() <= model_fields
        assert preset.get("classifier", {}).keys() <= set(CLASSIFIER_SETTINGS) and (task.name == "sentiment"
                                                                                    or "classifier" not in preset)
        assert {**preset["train"], **preset["finetune"]}.keys() <= {f.name for f in fields(TrainConfig)}
        assert preset["train"].get("recipe", {}).keys() <= {f.name for f in fields(Recipe)}
    card = task.card
    assert all([card.pipeline_tag, card.task_name, card.tags, card.what, card.intended, card.limitations])


@pytest.mark.parametrize("task", ["lm", "sentiment"])
def test_base_preset_holds_the_settings_the_shipped_checkpoint_was_trained_with(task):
    shipped = json.loads((ROOT / "checkpoints" / task / "metrics.json").read_text())
    preset = TASKS[task].presets["base"]
    chosen = {**preset["model"], **preset.get("classifier", {})}  # the shipped run's config.json held both
    assert {k: shipped["model_config"][k] for k in chosen} == chosen
    train = {k: v for k, v in preset["train"].items() if k != "recipe"}
    first = (chain(shipped) or [None])[-1]
    if task == "lm" and first is not None:  # the shipped LM continues a from-scratch run: the preset's two halves
        words = shlex.split(first["command"])
        given = {k: "--" + k.replace("_", "-") for k in train if "--" + k.replace("_", "-") in words}
        flags = {k: type(train[k])(words[words.index(flag) + 1]) for k, flag in given.items()}
        assert flags == {k: train[k] for k in flags}  # the from-scratch run: the preset's settings, as flags then
        assert flags.keys() >= {"batch_size", "lr", "warmup_steps", "max_steps"}
        assert first["steps"] == train["max_steps"] and "--init-from" not in words
        train = {**train, **preset["finetune"]}  # the continuation: its fine-tune settings, its own length
        del train["max_steps"], train["eval_every"]
    assert {k: shipped["train_config"][k] for k in train} == train
    recipe = preset["train"].get("recipe", {})
    assert {k: shipped["train_config"]["recipe"][k] for k in recipe} == recipe


def test_seq2seq_learns_to_copy(tmp_path):
    rng = random.Random(0)
    rows = []
    for _ in range(600):
        word = " ".join(rng.choice("abcdef") for _ in range(rng.randint(3, 6)))
        rows.append({"src": word, "tgt": word})
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame(rows).to_json(data / "train.jsonl", orient="records", lines=True)
    tok = tmp_path / "tok.json"
    BPETokenizer.train([r["src"] for r in rows], vocab_size=270, min_frequency=1).save(tok)
    metrics = run.main(["--task", "seq2seq", "--preset", "tiny", "--data-dir", str(data), "--out", str(tmp_path / "o"),
                        "--tokenizer", str(tok), "--source-column", "src", "--target-column", "tgt",
                        "--val-size", "50", "--eval-every", "200"])
    assert metrics["val_loss"] < 0.1 and metrics["val_exact_match"] >= 0.9
    assert metrics["history"][0]["val_loss"] > metrics["val_loss"]


def test_resume_with_a_higher_max_steps_trains_an_ended_run_further(tmp_path, tokenizer_path):
    """(Resuming a killed run is tested with a real SIGKILL in test_training_safety.py.)"""
    args = ("--max-steps", "20", "--eval-every", "10")
    ended = train("lm", tmp_path / "b", tokenizer_path, *args)
    again = train("lm", tmp_path / "b", tokenizer_path, *args, "--resume")  # nothing left to train
    assert again["steps"] == 20 and again["command"] == ended["command"]  # a plain restart: the same segment

    extended = train("lm", tmp_path / "b", tokenizer_path, *args, "--max-steps", "30", "--resume")
    first, second = extended["command"].split(" && ")
    assert first == ended["command"] and second.endswith("--max-steps 30 --resume")
    assert [h["step"] for h in extended["history"]] == [10, 20, 30] and extended["steps"] == 30


def test_a_state_saved_before_the_cross_attention_was_renamed_resumes_as_the_run_it_continues(tmp_path,
                                                                                             tokenizer_path):
    """A trainer_state.pt from before 2026-12-04 names the decoder's cross-attention `src_attn` (the weights
    and the --average-last ones): --resume reads them under today's name (`model.current_names`) and
    ends where the uninterrupted run ends, weight for weight."""
    args = ("--max-steps", "4", "--eval-every", "2", "--average-last", "2")
    straight = train("sentiment", tmp_path / "straight", tokenizer_path, *args)
    old = tmp_path / "old"
    train("sentiment", old, tokenizer_path, *args, "--max-steps", "2")
    state = torch.load(old / STATE_NAME, weights_only=True)

    def renamed_back(weights: dict) -> dict:
        return {k.replace(".cross_attn.", ".src_attn."): v for k, v in weights.items()}

    assert any(".src_attn." in k for k in renamed_back(state["model"]))
    torch.save({**state, "model": renamed_back(state["model"]), "snapshots": [renamed_back(w) for w in
                                                                             state["snapshots"]]}, old / STATE_NAME)
    resumed = train("sentiment", old, tokenizer_path, *args, "--resume")
    assert resumed["steps"] == straight["steps"] == 4
    a, b = (torch.load(d / STATE_NAME, weights_only=True)["model"] for d in (tmp_path / "straight", old))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_an_lm_run_continues_a_trained_lms_pretraining_in_its_shape_and_direction(tmp_path, tokenizer_path, capsys):
    """`--task lm --init-from`: the trained LM's whole shape (and direction) is taken over whatever the
    preset says, the preset's fine-tune learning rate applies, and step 0 is the trained model: at a
    learning rate too small to move it, the continued run scores what the trained one scored."""
    fp32 = ("--precision", "fp32", "--max-steps", "20", "--eval-every", "20")
    first = train("lm", tmp_path / "lm", tokenizer_path, "--set", "reverse=1", *fp32)
    still = run.main(["--task", "lm", "--preset", "small", "--init-from", str(tmp_path / "lm"), "--data-dir", str(IMDB),
                      "--out", str(tmp_path / "still"), "--tokenizer", str(tokenizer_path), "--max-examples", "300",
                      "--val-size", "40", "--lr", "1e-12", "--precision", "fp32", "--max-steps", "2",
                      "--eval-every", "2", "--batch-size", "2"])
    assert still["model_config"] == first["model_config"]  # 2 x 64 and backwards, not small's 4 x 256
    assert still["val_loss"] == pytest.approx(first["val_loss"], rel=1e-5)
    ten = ("--precision", "fp32", "--max-steps", "10", "--eval-every", "10")
    train("lm", tmp_path / "more", tokenizer_path, "--init-from", str(tmp_path / "lm"), *ten)
    ancestor = json.loads((tmp_path / "lm" / "metrics.json").read_text())
    (tmp_path / "lm" / "metrics.json").write_text(json.dumps({**ancestor, "command": "retrained since"}))
    more = train("lm", tmp_path / "more", tokenizer_path, "--init-from", str(tmp_path / "lm"), *fp32, "--resume")
    assert more["train_config"]["lr"] == TASKS["lm"].presets["tiny"]["finetune"]["lr"]
    assert more["val_loss"] < first["val_loss"]  # 20 more steps on the same text
    # what it started from, as it was when the run began (the resumed stretch saw the folder changed)
    sha = hashlib.sha256((tmp_path / "lm" / "model.safetensors").read_bytes()).hexdigest()
    assert more["init_from"] == {"checkpoint": str(tmp_path / "lm"), "weights_sha256": sha,
                                 **{k: first[k] for k in ("command", "steps", "tokens_seen", "train_time_s",
                                                          "device", "date")}}
    card = report.model_card("more", more, more["model_config"])
    assert (f"It started from `{tmp_path / 'lm'}` as it was then (weights SHA-256 `{sha[:16]}`), trained for "
            f"{report.trained(first)} by `{first['command']}`: "
            f"{(more['tokens_seen'] + first['tokens_seen']) / 1e6:.1f} M tokens in all") in card
    capsys.readouterr()
    other_tokenizer = str(ROOT / "checkpoints" / "tokenizer.json")
    for extra, message in [(["--set", "n_layer=3"], "n_layer is 2 there, 3 here"),
                           (["--tokenizer", other_tokenizer], "needs a language model using")]:
        with pytest.raises(SystemExit) as exc:
            train("lm", tmp_path / "bad", tokenizer_path, "--init-from", str(tmp_path / "lm"), *fp32, *extra)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1
        assert not (tmp_path / "bad").exists()


def test_a_crash_while_saving_leaves_the_last_checkpoint_loadable(tmp_path, tokenizer_path, monkeypatch):
    train("lm", tmp_path / "lm", tokenizer_path, "--max-steps", "5", "--eval-every", "5")
    model = load_pretrained(tmp_path / "lm")
    before = (tmp_path / "lm" / "model.safetensors").read_bytes()

    import model.pretrained as pretrained

    def dies_halfway(state, path, metadata=None):
        Path(path).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(pretrained, "save_file", dies_halfway)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    with pytest.raises(OSError, match="disk full"):
        model.save_pretrained(tmp_path / "lm")
    assert (tmp_path / "lm" / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "lm").iterdir() if "tmp" in p.name) == []
    load_pretrained(tmp_path / "lm")


@pytest.mark.parametrize("extra, status, message", [
    (["--data-dir", "/nonexistent/imdb"], 1, "--data-dir /nonexistent/imdb: no such directory"),
    (["--max-steps", "0"], 2, "--max-steps must be >= 1"),
    (["--lr", "-1"], 2, "--lr must be > 0"),
    (["--max-minutes", "nan"], 2, "--max-minutes must be > 0"),
    (["--preset", "huge"], 2, "--preset huge: choose one of"),
    (["--set", "colour=blue"], 2, "--set colour=blue: expected KEY=VALUE"),
    (["--set", "n_layer=two"], 2, "--set n_layer=two: n_layer takes an integer"),
    (["--resume", "--overwrite"], 2, "--resume and --overwrite exclude each other"),
    (["--device", "tpu"], 2, "--device must be auto, cpu, cuda or cuda:N, not 'tpu'"),
    *([] if torch.cuda.is_available() else [(["--device", "cuda:0"], 2, "--device cuda:0: no CUDA device")]),
])
def test_bad_options_fail_early_with_one_line(tmp_path, tokenizer_path, capsys, extra, status, message):
    """Usage errors exit with status 2 (as argparse's own), data errors with 1: one line each."""
    base = ["--task", "lm", "--preset", "tiny", "--data-dir", str(IMDB), "--out", str(tmp_path / "o"),
            "--tokenizer", str(tokenizer_path)]
    with pytest.raises(SystemExit) as exc:
        run.main(base + extra)
    err = capsys.readouterr().err
    assert exc.value.code == status
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()  # nothing was written


def test_bad_data_fails_early(tmp_path, tokenizer_path, capsys):
    empty, wrong = tmp_path / "empty", tmp_path / "wrong"
    empty.mkdir()
    wrong.mkdir()
    no_rows = {"text": pd.Series([], dtype=str), "label": pd.Series([], dtype=int)}
    pd.DataFrame(no_rows).to_parquet(empty / "train.parquet")
    pd.DataFrame({"review": ["good", "bad"], "y": [1, 0]}).to_parquet(wrong / "train.parquet")
    cases = [(["--data-dir", str(empty)], "train.parquet is empty"),
             (["--data-dir", str(wrong)], "has no column(s) ['text', 'label']"),
             (["--data-dir", str(tmp_path)], "no .parquet/.csv/.jsonl files")]
    for extra, message in cases:
        with pytest.raises(SystemExit) as exc:
            run.main(["--task", "sentiment", "--preset", "tiny", "--out", str(tmp_path / "o"),
                      "--tokenizer", str(tokenizer_path), *extra])
        assert exc.value.code == 1 and message in capsys.readouterr().err


def test_unknown_task_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        run.main(["--task", "translate"])
    assert exc.value.code == 2 and "invalid choice: 'translate'" in capsys.readouterr().err


def test_checkpoint_of_another_model_type_is_not_resumed(tmp_path, tokenizer_path, capsys):
    train("lm", tmp_path / "ckpt", tokenizer_path, "--max-steps", "2", "--eval-every", "2")
    with pytest.raises(SystemExit) as exc:
        train("sentiment", tmp_path / "ckpt", tokenizer_path, "--max-steps", "2", "--resume")
    assert exc.value.code == 2 and "holds a 'decoder_only_lm' checkpoint" in capsys.readouterr().err


def test_hub_default_fails_fast_without_network(tmp_path, tokenizer_path, capsys):
    import training.data as data
    if data._hub_reachable(timeout=2):
        pytest.skip("the Hub is reachable from here")
    start = time.monotonic()
    with pytest.raises(SystemExit) as exc:
        run.main(["--task", "lm", "--preset", "tiny", "--out", str(tmp_path / "o"), "--tokenizer", str(tokenizer_path)])
    assert time.monotonic() - start < 10
    assert exc.value.code == 1 and "--data-dir" in capsys.readouterr().err


def test_validation_prefix_is_a_random_sample_of_both_classes():
    """IMDB's train file is sorted by label; periodic evaluation reads a prefix of the validation
    split, which must therefore hold both classes in about equal shares."""
    from training.data import validation_split

    labels = [0] * 12_500 + [1] * 12_500
    train_idx, val_idx = validation_split(len(labels), 2500, 1337)
    assert len(set(train_idx) | set(val_idx)) == 25_000 and not set(train_idx) & set(val_idx)
    prefix = [labels[i] for i in val_idx[:512]]
    assert 0.4 < sum(prefix) / len(prefix) < 0.6
    again = validation_split(len(labels), 2500, 1337)[1]
    assert list(again) == list(val_idx)  # fixed seed: the same split every time


def test_weight_decay_falls_on_every_matrix_and_nothing_else():
    """Decided by shape (p.dim() >= 2); checked here by module type: the embedding table and every
    linear weight are decayed, biases and norm gains are not."""
    from model import DecoderOnlyConfig
    from training.trainer import make_optimizer

    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=300, block_size=8, n_layer=2, n_head=2, d_model=16, d_ff=32))
    optimizer = make_optimizer(model, TrainConfig(weight_decay=0.1))
    decay = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    matrices = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear | torch.nn.Embedding)}
    embedding = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    assert len(decay) == len(list(model.parameters())) and len(embedding) == 1 and embedding < matrices
    assert {i for i, wd in decay.items() if wd == 0.1} == matrices  # the embedding table too (it was exempt)
    assert {i for i, wd in decay.items() if wd == 0.0} == {id(p) for p in model.parameters()} - matrices


# --- presets: a fine-tune's settings, the laptop recipe -----------------------------------------------
def settings(*argv: str) -> TrainConfig:
    args = run_spec.build_parser().parse_args(list(argv))
    return run_spec.train_config(args, TASKS[args.task].presets[args.preset])


def test_a_fine_tune_takes_the_presets_fine_tune_settings_and_a_flag_wins():
    """--init-from never runs at a from-scratch learning rate (a 3-minute fine-tune of the shipped LM
    once climbed to the small preset's 1e-3); every flag given still wins, 0 included."""
    scratch, tuned = settings("--task", "sentiment"), settings("--task", "sentiment", "--init-from", "checkpoints/lm")
    small = TASKS["sentiment"].presets["small"]
    assert (scratch.lr, scratch.warmup_steps) == (small["train"]["lr"], small["train"]["warmup_steps"])
    assert (tuned.lr, tuned.warmup_steps) == (small["finetune"]["lr"], small["finetune"]["warmup_steps"])
    assert tuned.lr < scratch.lr and tuned.max_steps == scratch.max_steps
    assert settings("--task", "sentiment", "--init-from", "x", "--lr", "1e-5").lr == 1e-5
    laptop = settings("--task", "sentiment", "--preset", "laptop", "--init-from", "checkpoints/lm")
    preset = TASKS["sentiment"].presets["laptop"]
    assert laptop.lr == preset["finetune"]["lr"] and laptop.max_tokens == preset["train"]["max_tokens"]
    assert laptop.recipe == Recipe(**preset["train"]["recipe"])  # the recipe travels with the preset ...
    off = settings("--task", "sentiment", "--preset", "laptop", "--init-from", "x", "--lm-weight", "0")
    assert off.recipe.lm_weight == 0  # ... and a flag wins over it
    assert off.recipe.crop_prob == preset["train"]["recipe"]["crop_prob"]
    assert settings("--task", "lm", "--preset", "laptop").snapshots == TASKS["lm"].snapshots > 0
    assert settings("--task", "sentiment").snapshots == 0
    assert settings("--task", "lm", "--snapshots", "0").snapshots == 0


def test_help_names_the_default_preset_and_the_laptop_figures(capsys):
    with pytest.raises(SystemExit):
        run.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: small)" in text and "laptop (at most 10 min" in text and "fine-tune settings" in text
    assert "lm 1.80 bits/byte (IMDB) in 8:54" in text  # the table's figures


# --- what a run keeps: snapshots --------------------------------------------------------------------
def test_snapshot_steps_start_at_zero_and_are_spaced_in_log_steps():
    assert snapshot_steps(1200, 8) == [0, 10, 22, 49, 110, 243, 540, 1200]
    assert snapshot_steps(40, 8) == [0, 10, 13, 16, 20, 25, 32, 40]
    assert snapshot_steps(5, 8) == [0, 5] and snapshot_steps(100, 1) == [0, 100] and snapshot_steps(100, 0) == []


def test_an_lm_run_keeps_float16_snapshots_with_their_loss_and_the_curve(tmp_path, tokenizer_path):
    metrics = train("lm", tmp_path / "lm", tokenizer_path, "--max-steps", "40", "--eval-every", "20",
                    "--snapshots", "4")
    folder = tmp_path / "lm" / SNAPSHOTS_DIR
    index = read_index(folder)
    assert [e["step"] for e in index["snapshots"]] == snapshot_steps(40, 4) == [0, 10, 20, 40]
    assert [e["tokens"] for e in index["snapshots"]] == [step * 8 * 64 for step in (0, 10, 20, 40)]
    assert index["history"] == metrics["history"] and index["commands"] == [metrics["command"]]
    losses = [e["val_loss"] for e in index["snapshots"]]
    assert losses[0] > losses[-1] and losses[-1] == pytest.approx(metrics["history"][-1]["val_loss"], rel=1e-6)
    final = torch.load(tmp_path / "lm" / STATE_NAME, weights_only=True)["model"]  # the weights at step 40
    kept = load_file(folder / "step-000040" / "model.safetensors")
    assert {t.dtype for t in kept.values()} == {torch.float16}
    assert all(torch.equal(kept[k], final[k].half()) for k in kept)
    assert BPETokenizer.from_file(folder).vocab_size == 1000  # the folder is self-contained
    assert isinstance(load_pretrained(folder / "step-000000"), DecoderOnlyLM)


# --- the final evaluation fits --max-minutes ----------------------------------------------------------
def test_the_final_evaluation_reads_as_many_rows_as_fit_the_time_left(tmp_path, tokenizer_path):
    """Rows are context windows here; the clock is a number the test sets."""
    from training.contract import TaskOptions
    from training.data import load_splits

    task = TASKS["lm"](load_splits(str(IMDB)), TaskOptions(40, 1337, 300))
    cfg = TrainConfig(batch_size=4, eval_batches=3, max_minutes=10)
    data = task.prepare(BPETokenizer.from_file(tokenizer_path), TASKS["lm"].presets["tiny"]["model"], cfg)
    now = [0.0]
    trainer = Trainer(task.build(data), task, data, tmp_path, "cpu", DistInfo(), clock=lambda: now[0])
    total = task.rows(data, "val")
    assert trainer.budget.final_rows("val") is None  # no deadline: every row
    trainer.budget.deadline, trainer.budget.row_seconds = 600.0, 0.01
    now[0] = 600 - trainer.budget.overhead_seconds() - 0.2  # 0.2 s left: 20 rows
    assert trainer.budget.overhead_seconds() == FINAL_OVERHEAD_S and 20 < total
    assert trainer.budget.final_rows("val") == 20
    now[0] = 600  # no time left: still the periodic sample, never nothing
    assert trainer.budget.final_rows("val") == 3
    now[0] = 0  # plenty: every row
    assert trainer.budget.final_rows("val") is None
    now[0] = 600 - trainer.budget.overhead_seconds() - 0.2
    metrics = trainer.final_metrics(trainer.model)
    assert metrics["final_eval"] == {"val": {"rows": 20, "of": total}} and metrics["val_tokens"] == 20 * 64
    # what training leaves for the end: every row at the measured rate, at most a tenth of the budget
    assert trainer.budget.final_seconds() == pytest.approx(total * 0.01 + FINAL_OVERHEAD_S)
    trainer.budget.row_seconds = 10.0
    assert trainer.budget.final_seconds() == pytest.approx(FINAL_SHARE * 600 + FINAL_OVERHEAD_S)
    trainer.budget.row_seconds = 30.0  # the periodic sample (3 rows, 90 s) outgrows the tenth: it is still read
    assert list(data.splits) == ["train", "val"]
    assert trainer.budget.final_seconds() == pytest.approx(3 * 30 + FINAL_OVERHEAD_S)
    trainer.budget.cfg = replace(cfg, full_eval=True)  # --full-eval: every row, whatever the time
    assert trainer.budget.final_rows("val") is None
    assert trainer.budget.final_seconds() == pytest.approx(total * 30 + FINAL_OVERHEAD_S)


def test_a_limited_lm_evaluation_reads_windows_spread_over_the_held_out_text(tokenizer_path):
    """A held-out tail's first windows need not read like the rest of it, so a periodic (or a cut final)
    evaluation of an LM reads `limit` windows spaced evenly over the whole stream; without `spread`
    (the CLI's `--limit`) the first `limit`."""
    from training.contract import TaskOptions
    from training.data import TokenStream, load_splits

    stream = TokenStream(np.arange(41, dtype=np.int32), n_bytes=41)  # 10 windows of 4 (+ the next token)
    firsts = [x[:, 0].tolist() for x, _ in stream.windows(4, 3)]
    spread = [(x[:, 0].tolist(), y[:, -1].tolist()) for x, y in stream.windows(4, 3, spread=True)]
    every = [x[:, 0].tolist() for x, _ in stream.windows(4, 20, batch_size=4, spread=True)]
    assert firsts == [[0, 4, 8]] and spread == [([0, 12, 24], [4, 16, 28])]
    assert every == [[0, 4, 8, 12], [16, 20, 24, 28], [32, 36]]  # a limit past the end: every window once

    task = TASKS["lm"](load_splits(str(IMDB)), TaskOptions(40, 1337, 300))
    data = task.prepare(BPETokenizer.from_file(tokenizer_path), TASKS["lm"].presets["tiny"]["model"],
                        TrainConfig(batch_size=4, eval_batches=3))
    torch.manual_seed(0)
    model = task.build(data).eval()
    ids, block = data.splits["val"].ids, data.config.block_size
    n = data.splits["val"].n_windows(block)
    starts = [i * n // 3 * block for i in range(3)]
    assert starts[-1] > 2 * block  # not the first three
    with torch.no_grad():  # by hand: the three windows' mean next-token loss
        rows = torch.tensor(np.stack([ids[s : s + block + 1] for s in starts])).long()
        logits = model(rows[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), rows[:, 1:].flatten())
    scored = task.evaluate(model, data, "val", task.periodic_rows(data))
    assert scored["tokens"] == 3 * block and scored["loss"] == pytest.approx(loss.item(), rel=1e-5)


def test_a_resumed_stretch_plans_with_the_last_evaluation_rate_until_it_measures_its_own(tmp_path, tokenizer_path):
    """A stretch that ends before its first evaluation must still leave time for the evaluations after
    training: the rate saved with the state stands in, on the same device and threads only."""
    from training.contract import TaskOptions
    from training.data import load_splits

    task = TASKS["lm"](load_splits(str(IMDB)), TaskOptions(40, 1337, 300))
    cfg = TrainConfig(batch_size=4, eval_batches=3, max_minutes=10)
    data = task.prepare(BPETokenizer.from_file(tokenizer_path), TASKS["lm"].presets["tiny"]["model"], cfg)
    first = Trainer(task.build(data), task, data, tmp_path, "cpu", DistInfo())
    first.evaluate()
    state = first.state_dict()
    assert state["timing"] == {"where": f"cpu x1, {torch.get_num_threads()} threads",
                               "row_seconds": first.budget.row_seconds} and first.budget.row_seconds > 0
    state["timing"]["row_seconds"] = 20.0  # as if evaluating had been slow: 3 rows, 60 s

    def resumed(where: str) -> Trainer:
        trainer = Trainer(task.build(data), task, data, tmp_path, "cpu", DistInfo(), clock=lambda: 300.0)
        trainer.load_state({**state, "timing": {**state["timing"], "where": where}})
        # a step, the evaluation it stops at, the final
        trainer.budget.deadline = 300.0 + 60 + 60 + 60 + FINAL_OVERHEAD_S + 1
        return trainer

    same = resumed(state["timing"]["where"])
    assert (same.budget.row_seconds, same.budget.eval_seconds) == (20.0, 60.0)
    assert same.budget.final_seconds() == pytest.approx(60 + FINAL_OVERHEAD_S)
    assert same.step == 0 and cfg.eval_every > 1  # no periodic evaluation is due after the next step
    assert same.stop_reason([], 300.0, 59.0) == 0
    assert same.stop_reason([], 300.0, 62.0) == STOPS.index("max_minutes")  # 300 + 62 + 60 + 65 >= 486
    other = resumed("cuda:0 x1, 1 threads")  # another machine's rate is not used
    assert (other.budget.row_seconds, other.budget.eval_seconds) == (None, 0.0)
    assert other.stop_reason([], 300.0, 62.0) == 0


# --- a run sized to its time budget (the laptop preset) --------------------------------------------------
class StepClock:
    """A clock that moves only when a batch is drawn: `per_batch` seconds each (the test's step time),
    or from the n-th batch drawn on (0-based) `then[n]` seconds each, the last such n counting."""

    def __init__(self, per_batch: float, then: dict[int, float] | None = None):
        self.now, self.per_batch, self.batches, self.then = 0.0, per_batch, 0, then or {}

    def __call__(self) -> float:
        return self.now

    def timing(self, task):
        """`task` with each batch drawn advancing the clock."""
        drawn = task.batch

        def batch(*args):
            self.now += max(((n, t) for n, t in self.then.items() if n <= self.batches),
                            default=(0, self.per_batch))[1]
            self.batches += 1
            return drawn(*args)

        task.batch = batch
        return task


def budgeted(tmp_path: Path, tokenizer_path: Path, clock: StepClock, max_steps: int | None, name: str,
             schedule: str = "cosine", eval_every: int = 1000, repeat_dropout: float = 0.0, warmup: int = 5) -> Trainer:
    """A tiny LM's trainer with 1 minute to train (eval_every past the end: one evaluation, where it
    stops), evaluations planned at 0.5 s a row, and the same initial weights every time."""
    from training.contract import TaskOptions
    from training.data import load_splits

    task = clock.timing(TASKS["lm"](load_splits(str(IMDB)), TaskOptions(40, 1337, 300)))
    cfg = TrainConfig(batch_size=4, max_steps=max_steps, max_minutes=1, warmup_steps=warmup, eval_every=eval_every,
                      eval_batches=3, recipe=Recipe(schedule=schedule, repeat_dropout=repeat_dropout))
    data = task.prepare(BPETokenizer.from_file(tokenizer_path), TASKS["lm"].presets["tiny"]["model"], cfg)
    torch.manual_seed(0)
    trainer = Trainer(task.build(data), task, data, tmp_path / name, "cpu", DistInfo(), clock=clock)
    trainer.budget.row_seconds = 0.5
    return trainer


@pytest.fixture
def one_evaluation(monkeypatch):
    """No evaluation floor for a sized run (one evaluation, its last step's): the budget tests below count
    their steps with the evaluations their `eval_every` asks for, as sized runs did before `MIN_EVALUATIONS`."""
    monkeypatch.setattr(budget, "MIN_EVALUATIONS", 0)


def test_a_run_without_max_steps_fits_its_schedule_to_the_time_budget(tmp_path, tokenizer_path):
    """The schedule's end is fixed from 10 timed steps (after 2 untimed) so that training, its evaluations
    and what follows end by the deadline; the timing steps leave no trace: the run is the fixed-step run
    of the count it chose, weight for weight. It evaluates at least `MIN_EVALUATIONS` times (a curve, not
    a dot), though eval_every asks for 1,000 steps."""
    clock = StepClock(per_batch=1.0)
    sized = budgeted(tmp_path, tokenizer_path, clock, None, "sized")
    assert sized.train() == "max_steps"
    # 60 s: 12 s of timing steps; the final evaluation 6 s (a tenth of the budget) + 5 s; 2 evaluations
    # of 3 rows x 0.5 s (the one stop_reason keeps in hand, the last step's); 5 periodic ones; 1 s a step
    assert budget.MIN_EVALUATIONS == 5
    assert sized.plan.sized == {"step_seconds": 1.0, "eval_seconds": 1.5, "budget_s": 48.0, "max_steps": 26}
    assert sized.cfg.max_steps == sized.step == 26 and clock.batches == 12 + 26
    assert 26 <= 60 - 12 - 11 - 2 * 1.5 - 5 * 1.5 < 27  # one step more would not fit
    evaluated = [h["step"] for h in sized.history if "val_loss" in h]
    assert sized.cfg.eval_every == 5 and evaluated == [5, 10, 15, 20, 25, 26]
    assert sized.history[-1]["lr"] == pytest.approx(lr_at(25, sized.cfg)) and lr_at(26, sized.cfg) == pytest.approx(
        sized.cfg.lr * sized.cfg.min_lr_ratio)  # the decay ends at the last step
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), 26, "fixed")
    assert fixed.train() == "max_steps" and fixed.plan.sized is None
    assert all(torch.equal(v, fixed.model.state_dict()[k]) for k, v in sized.model.state_dict().items())
    state = torch.load(tmp_path / "sized" / STATE_NAME, weights_only=True)
    assert state["train_config"]["max_steps"] == 26 and state["sized"] == sized.plan.sized
    resumed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), None, "sized")
    resumed.load_state(Trainer.read_state(tmp_path / "sized" / STATE_NAME))
    assert (resumed.cfg.max_steps, resumed.cfg.eval_every) == (26, 5)  # the interval chosen, kept on resume


def test_a_sized_run_warms_up_for_at_most_a_quarter_of_its_steps(tmp_path, tokenizer_path, one_evaluation):
    """50 warmup steps asked, 33 steps fit the minute: 8 warm up (a quarter), the run is the fixed run of
    33 steps with 8, weight for weight, and a resumed run keeps the 8."""
    sized = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), None, "sized", warmup=50)
    assert sized.train() == "max_steps" and sized.cfg.max_steps == 33 and sized.cfg.warmup_steps == 8
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), 33, "fixed", warmup=8)
    assert fixed.train() == "max_steps" and same_weights(sized, fixed)
    resumed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), None, "sized", warmup=50)
    resumed.load_state(Trainer.read_state(tmp_path / "sized" / STATE_NAME))
    assert resumed.cfg.warmup_steps == 8 and resumed.cfg.max_steps == 33


def test_a_sized_run_resumes_with_the_count_it_chose(tmp_path, tokenizer_path, one_evaluation):
    """Steps slower than the timed ones: the deadline stops it mid-schedule; --resume (another minute)
    keeps the count its state recorded, times nothing, and ends where the uninterrupted run ends."""
    clock = StepClock(per_batch=1.0)
    first = budgeted(tmp_path, tokenizer_path, clock, None, "run")
    real_batch = first.task.batch

    def slower(*args):
        clock.now += 1.0 if clock.batches >= 12 else 0.0  # 2 s a step after the timing steps
        return real_batch(*args)

    first.task.batch = slower
    assert first.train() == "max_minutes" and first.step < first.cfg.max_steps == 33
    again_clock = StepClock(per_batch=1.0)
    resumed = budgeted(tmp_path, tokenizer_path, again_clock, None, "run")
    resumed.load_state(Trainer.read_state(tmp_path / "run" / STATE_NAME))
    assert resumed.cfg.max_steps == 33 and resumed.plan.sized == first.plan.sized
    assert resumed.train() == "max_steps" and resumed.step == 33
    assert again_clock.batches == 33 - first.step  # no timing steps this time
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), 33, "fixed")
    fixed.train()
    assert all(torch.equal(v, fixed.model.state_dict()[k]) for k, v in resumed.model.state_dict().items())


def same_weights(a: Trainer, b: Trainer) -> bool:
    return all(torch.equal(v, b.model.state_dict()[k]) for k, v in a.model.state_dict().items())


def test_a_wsd_run_refits_its_count_to_its_warm_steps_before_the_decay_starts(tmp_path, tokenizer_path, one_evaluation):
    """The sizing steps take 1 s, the run's own 0.5 s (a CPU's first steps are slower): every 10 steps
    while the rate holds its peak the count is re-fitted to the steps taken, and the run is the
    fixed-step wsd run of the count it ends with, weight for weight. A cosine run keeps its first count."""
    fast = {12: 0.5}  # the 13th batch drawn on: after the sizing steps
    clock = StepClock(per_batch=1.0, then=fast)
    sized = budgeted(tmp_path, tokenizer_path, clock, None, "sized", "wsd")
    assert sized.train() == "max_steps"
    # sized at 1 s a step: 33 (as the cosine run). At step 10 (clock 12 + 5 s, 8 warm steps timed):
    # 60 - 17 - 11 (final evaluation) - 2 x 1.5 = 29 s left: 57 steps of 0.5 s (+1.5 s / 1000), 67 in all;
    # later refits find the same; the decay starts at 67 - 13 = step 54, after the refit
    assert sized.plan.sized == {"step_seconds": 1.0, "eval_seconds": 1.5, "budget_s": 48.0, "max_steps": 67,
                           "first_max_steps": 33, "refit_step": 10, "refit_step_seconds": 0.5}
    assert sized.step == 67 and clock.batches == 12 + 67 and sized.budget.decay_start(sized.plan) == 54
    assert 57 * (0.5 + 1.5 / 1000) <= 60 - 17 - 11 - 2 * 1.5 < 58 * (0.5 + 1.5 / 1000)
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=0.5), 67, "fixed", "wsd")
    assert fixed.train() == "max_steps" and fixed.plan.sized is None and same_weights(sized, fixed)
    state = torch.load(tmp_path / "sized" / STATE_NAME, weights_only=True)
    assert state["train_config"]["max_steps"] == 67 and state["sized"] == sized.plan.sized
    cosine = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0, then=fast), None, "cosine")
    assert cosine.train() == "max_steps" and cosine.step == 33 and "first_max_steps" not in cosine.plan.sized


def test_a_wsd_refit_never_moves_the_decay_before_the_next_step(tmp_path, tokenizer_path, one_evaluation):
    """Warm steps slower than the sizing ones: fewer steps. At 2 s a step, at step 10: 60 - 32 - 11 - 3 =
    14 s, 6 steps more: 16. At 3 s: 4 s, one step more: 11, but the decay of 11 would have started at
    step 9, already taken at the peak rate: the fewest steps whose decay starts at step 10, 12."""
    slower = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0, then={12: 2.0}), None, "slower", "wsd")
    assert slower.train() == "max_steps" and slower.step == 16 and slower.plan.sized["refit_step"] == 10
    assert slower.budget.decay_start(slower.plan) == 13
    slowest = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0, then={12: 3.0}), None, "slowest", "wsd")
    slowest.train()
    assert slowest.cfg.max_steps == 12
    assert slowest.budget.decay_start(slowest.plan) == 10 == slowest.plan.sized["refit_step"]
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), 12, "fixed", "wsd")
    assert fixed.train() == "max_steps" and slowest.step == 12 and same_weights(slowest, fixed)


def test_a_wsd_run_decays_from_where_the_held_out_loss_stops_improving(tmp_path, tokenizer_path, one_evaluation):
    """Evaluated every 10 steps, the held-out loss falls, then rises at step 30 while the rate holds its
    peak: the decay starts at step 30 (the fewest steps whose decay starts there: 37, 37 - 7 = 30) and
    the run ends at 37, before its minute is up, as the fixed 37-step wsd run, keeping step 20's weights."""
    losses = iter([5.0, 4.0, 4.5, 4.2])
    cooled = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0, then={12: 0.5}), None, "cooled", "wsd", 10)
    cooled.task.evaluate = lambda *args, **kwargs: {"loss": next(losses)}
    assert cooled.train() == "max_steps" and cooled.step == cooled.cfg.max_steps == 37
    assert cooled.plan.sized["cooled_down_at"] == 30 == cooled.budget.decay_start(cooled.plan)
    assert "refit_step" in cooled.plan.sized
    assert [p["val_loss"] for p in cooled.history] == [5.0, 4.0, 4.5, 4.2] and cooled.best["step"] == 20
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), 37, "fixed", "wsd", 10)
    assert fixed.train() == "max_steps" and same_weights(cooled, fixed)
    losses = iter([5.0, 4.0, 4.5] + [4.2] * 20)  # the same losses under cosine: no refit, no cool-down, and
    # the sizing's count, 29 (evaluations every 10 steps planned at 1.5 s)
    cosine = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0, then={12: 0.5}), None, "cos", "cosine", 10)
    cosine.task.evaluate = lambda *args, **kwargs: {"loss": next(losses)}
    assert cosine.train() == "max_steps" and cosine.step == cosine.plan.sized["max_steps"] == 29  # its first count
    assert "cooled_down_at" not in cosine.plan.sized and "first_max_steps" not in cosine.plan.sized


def test_a_refitted_run_resumes_with_the_count_its_state_recorded(tmp_path, tokenizer_path, one_evaluation):
    """Re-fitted to 67 at step 10, the steps then slow down during the decay (3 s from step 40): the
    deadline stops it; --resume times nothing, re-fits nothing, and ends as the fixed 67-step run."""
    clock = StepClock(per_batch=1.0, then={12: 0.5, 12 + 40: 3.0})
    first = budgeted(tmp_path, tokenizer_path, clock, None, "run", "wsd")
    assert first.train() == "max_minutes" and 40 < first.step < first.cfg.max_steps == 67
    again_clock = StepClock(per_batch=1.0)
    resumed = budgeted(tmp_path, tokenizer_path, again_clock, None, "run", "wsd")
    resumed.load_state(Trainer.read_state(tmp_path / "run" / STATE_NAME))
    assert resumed.cfg.max_steps == 67 and resumed.plan.sized == first.plan.sized
    assert resumed.train() == "max_steps" and resumed.step == 67 and again_clock.batches == 67 - first.step
    assert resumed.plan.sized == first.plan.sized  # nothing re-fitted
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=0.5), 67, "fixed", "wsd")
    assert fixed.train() == "max_steps" and same_weights(resumed, fixed)


def test_a_sized_run_that_would_read_its_text_too_often_trains_with_dropout(tmp_path, tokenizer_path, monkeypatch,
                                                                            one_evaluation):
    """With `repeat_dropout`, a count that would read the training tokens more than `REPEAT_PASSES`
    times turns that dropout on before the first step (the attention weights keeping none) and times
    the steps again: here 2 s instead of 1, so 4 steps fit instead of 33. The run is the fixed 4-step
    run with that dropout from the start, weight for weight; config.json says what it trained with, and
    --resume trains with it again. Under the passes, nothing changes."""
    import training.budget as budget_module
    from training.budget import set_dropout
    from training.trainer import resume_mismatches

    clock = StepClock(per_batch=1.0, then={12: 2.0})  # the second timing's steps, and the run's, take 2 s
    sized = budgeted(tmp_path, tokenizer_path, clock, None, "sized", repeat_dropout=0.1)
    passes = 33 * 4 * 64 / sized.data.description["train_tokens"]  # 33 steps of 4 x 64 tokens (sized at 1 s)
    monkeypatch.setattr(budget_module, "REPEAT_PASSES", passes - 0.01)  # this tiny run's passes: just over
    assert sized.train() == "max_steps"
    # the first timing's 12 steps at 1 s and the second's at 2 s leave 60 - 36 - 11 (final evaluation) - 2 x 1.5
    # (evaluations) = 10 s: 4 steps of 2 s (+1.5 s / 1000)
    assert sized.plan.sized == {"step_seconds": 2.0, "eval_seconds": 1.5, "budget_s": 24.0, "max_steps": 4,
                           "passes_without_dropout": round(passes, 1), "step_seconds_without_dropout": 1.0,
                           "dropout": 0.1}
    assert sized.step == 4 and clock.batches == 12 + 12 + 4
    assert {m.p for m in sized.model.modules() if isinstance(m, torch.nn.Dropout)} == {0.1}
    attentions = [m for m in sized.model.modules() if isinstance(m, MultiHeadAttention)]
    assert attentions and all(m.attention_weight_dropout == 0.0 for m in attentions)  # attention weights
    saved = json.loads((tmp_path / "sized" / "config.json").read_text())
    assert saved["dropout"] == 0.1 and saved["attention_dropout"] == 0.0
    fixed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=2.0), 4, "fixed", warmup=1)  # a quarter of 4
    set_dropout(fixed.model, 0.1)  # --set dropout=0.1 --set attention_dropout=0
    assert fixed.train() == "max_steps" and same_weights(sized, fixed)
    state = Trainer.read_state(tmp_path / "sized" / STATE_NAME)
    resumed = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=2.0), None, "sized", repeat_dropout=0.1)
    assert not resume_mismatches(state, resumed.cfg, asdict(resumed.model.config), 1)  # the preset's 0.0: no mismatch
    resumed.load_state(state)
    assert resumed.model.config.dropout == 0.1 and {m.p for m in resumed.model.modules()
                                                    if isinstance(m, torch.nn.Dropout)} == {0.1}
    monkeypatch.setattr(budget_module, "REPEAT_PASSES", passes + 0.01)  # just under: no dropout
    under = budgeted(tmp_path, tokenizer_path, StepClock(per_batch=1.0), None, "under", repeat_dropout=0.1)
    assert under.train() == "max_steps" and under.step == 33 and "dropout" not in under.plan.sized
    assert under.model.config.dropout == 0.0


def test_the_laptop_preset_fits_its_steps_to_its_minutes_unless_max_steps_is_given(tmp_path, tokenizer_path):
    assert settings("--task", "lm", "--preset", "laptop").max_steps is None
    assert settings("--task", "lm", "--preset", "laptop").recipe.schedule == "wsd"
    assert settings("--task", "lm", "--preset", "laptop").recipe.repeat_dropout == 0.1
    assert settings("--task", "lm", "--preset", "laptop", "--repeat-dropout", "0").recipe.repeat_dropout == 0.0
    with pytest.raises(run.UsageError, match="--repeat-dropout"):
        settings("--task", "lm", "--preset", "laptop", "--repeat-dropout", "1")
    assert settings("--task", "lm", "--preset", "laptop", "--schedule", "cosine").recipe.schedule == "cosine"
    assert settings("--task", "lm", "--preset", "laptop", "--max-steps", "300").max_steps == 300  # a flag wins
    assert settings("--task", "lm", "--preset", "laptop", "--init-from", "checkpoints/lm").max_steps is None
    with pytest.raises(run.UsageError, match="--max-minutes"):
        TrainConfig(max_steps=None)
    clock = StepClock(per_batch=1.0)
    fixed = budgeted(tmp_path, tokenizer_path, clock, 20, "fixed")  # a budget, and a count: the count
    assert fixed.train() == "max_steps" and fixed.step == 20 and clock.batches == 20 and fixed.plan.sized is None
    clock = StepClock(per_batch=1.0, then={0: 0.1})  # wsd, and steps that would fit many more: still the count
    fixed = budgeted(tmp_path, tokenizer_path, clock, 20, "wsd", "wsd")
    assert fixed.train() == "max_steps" and fixed.step == 20 and clock.batches == 20 and fixed.plan.sized is None


# --- the token cache -----------------------------------------------------------------------------------
def test_tokenized_splits_are_read_back_from_the_cache(tokenizer_path, monkeypatch):
    from training.data import PairSet, TokenStream
    from training.token_cache import cache_key

    tokenizer = BPETokenizer.from_file(tokenizer_path)
    texts = [clean_text(t) for t in pd.read_parquet(IMDB / "train.parquet")["text"][:50]]
    config = TASKS["sentiment"].presets["tiny"]["model"]
    config = EncoderDecoderConfig(vocab_size=tokenizer.vocab_size, **config)
    labels = ["negative", "positive"] * 25
    stream, pairs = TokenStream.from_texts(texts, tokenizer), PairSet.from_texts(texts, labels, tokenizer, config)

    def tokenize(*args, **kwargs):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(BPETokenizer, "encode_batch", tokenize)
    again = TokenStream.from_texts(texts, tokenizer)
    assert np.array_equal(again.ids, stream.ids) and again.n_bytes == stream.n_bytes
    cached = PairSet.from_texts(texts, labels, tokenizer, config)
    assert cached.sources == pairs.sources and cached.targets == pairs.targets
    # another text, another tokenizer or another cut of a review: another entry
    key = cache_key("stream", tokenizer, texts, {})
    assert key != cache_key("stream", tokenizer, [*texts[:-1], texts[-1] + "!"], {})
    assert key != cache_key("stream", tokenizer, texts[:-1], {})
    assert key != cache_key("stream", BPETokenizer.train(texts, vocab_size=300), texts, {})
    with pytest.raises(AssertionError, match="tokenized again"):
        PairSet.from_texts(texts, labels, tokenizer, replace(config, max_src_len=64))
    with pytest.raises(AssertionError, match="tokenized again"):
        PairSet.from_texts(texts, labels, tokenizer, config,
                           classifier=ClassifierConfig(labels=["negative", "positive"], src_keep_tail=8))

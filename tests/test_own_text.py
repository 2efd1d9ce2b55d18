"""`training.run --data`: your own text in (a .txt file, a folder of them, a table), a model of it out, with a
tokenizer of its own that `training.sample`, `training.evaluate` and the app read; bad input is one line."""

import json
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from huggingface_hub import ModelCard

from demo.serving import DemoError, DemoService
from demo.serving.checkpoint import LM
from demo.tiny import shared_tiny_checkpoints
from publishing import report
from tokenization import BPETokenizer, prompt_ids, visible
from training import evaluate, own_text, run, run_report, sample

WORDS = ("the king said that a ship of gold came over the sea at night and no one knew her name "
         "while old men sang of rain wind stone bread fire and the long road home").split()


def write_text(path: Path, paragraphs: int = 200, seed: int = 0) -> Path:
    """A made-up play: speakers' names, then a few lines of words, paragraphs separated by blank lines."""
    rng = random.Random(seed)
    speeches = []
    for _ in range(paragraphs):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 9))).capitalize() + "."
                 for _ in range(rng.randint(1, 3))]
        speeches.append(f"{rng.choice(['ANNA', 'BORIS', 'CLARA'])}:\n" + "\n".join(lines))
    path.write_text("\n\n".join(speeches) + "\n", encoding="utf-8")
    return path


def tiny(data: Path, out: Path | None, *extra: str) -> dict:
    return run.main(["--task", "lm", "--preset", "tiny", "--data", str(data),
                     *(["--out", str(out)] if out else []), "--max-steps", "20", "--eval-every", "10", *extra])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_text_file_trains_with_its_own_tokenizer_then_samples_evaluates_and_serves(tmp_path, capsys):
    text, out = write_text(tmp_path / "play.txt"), tmp_path / "run"
    metrics = tiny(text, out, "--precision", "fp32")  # as training.evaluate scores
    printed = capsys.readouterr().out
    # the held-out part: a tenth of the 200 paragraphs, said in the start line and recorded
    assert metrics["data"]["kind"] == "data" and metrics["data"]["val_size"] == 20
    assert "held out 20 of 200 paragraphs (10%)" in printed and "tokenizer its own" in printed
    # its own tokenizer, trained on the training part and kept in the run: not the shipped IMDB one
    own = BPETokenizer.from_file(out)
    assert metrics["tokenizer"]["trained"] and metrics["tokenizer"]["vocab_size"] == own.vocab_size < 8192
    assert own.tokenizer.to_str() != BPETokenizer.from_file("checkpoints/tokenizer.json").tokenizer.to_str()
    # samples start from the held-out paragraphs' openings; the end names bits per byte, evaluate and the app
    assert all(s.startswith(p) for s, p in zip(metrics["samples"], metrics["sample_prompts"], strict=True))
    assert re.match(r"(ANNA|BORIS|CLARA):\n\w+", metrics["sample_prompts"][0])
    assert f"held-out bits per byte: {metrics['val_bpb']:.3f}" in printed
    assert f"python -m training.evaluate --checkpoint {out}" in printed and f"python -m demo --lm {out}" in printed

    written = sample.main(["--checkpoint", str(out), "--num-samples", "1", "--max-new-tokens", "5"])
    assert written[0].startswith(metrics["sample_prompts"][0])  # the run's own prompt by default

    scored = evaluate.main(["--checkpoint", str(out)])  # no other flag: the rows the run held out
    assert scored["bpb"] == pytest.approx(metrics["val_bpb"], rel=1e-5)
    assert scored["tokens"] == metrics["val_tokens"] // 64 * 64

    gradio_client = pytest.importorskip("gradio_client")
    from demo.app import build_app, launch
    from demo.tabs import about
    from demo.views.chat import continue_text

    service = DemoService(shared_tiny_checkpoints(), device="cpu", models={LM: str(out)})
    assert service.lm.tokenizer.tokenizer.to_str() == own.tokenizer.to_str() == service.tokenizer.tokenizer.to_str()
    assert about._data_line(service.lm).startswith("Its own text, `play.txt`")  # not "IMDB reviews"
    app = build_app(service)
    # the app starts this model from its own text: the held-out openings the run recorded, not a movie review
    shown = {block.elem_id: block for block in app.blocks.values() if getattr(block, "elem_id", None)}
    opening = metrics["sample_prompts"][0]
    assert shown["tour-input"].value == shown["chat-input"].placeholder == opening
    assert shown["learn-prompt"].value == opening  # its own snapshots, its own text
    assert shown["chatbot"].label == "Text writer" and any(
        "Start a text like `play.txt`" in str(getattr(block, "value", "")) for block in app.blocks.values())
    _, url, _ = launch(app, "127.0.0.1", free_port(), prevent_thread_lock=True, quiet=True)
    try:
        client = gradio_client.Client(url, verbose=False)
        prompt = metrics["sample_prompts"][0]
        history, _, tokens, table, _ = client.predict(prompt, [], 6, 0.0, 40, 0.95, 1, 0, api_name="/chat")
        expected = continue_text(service, prompt, max_new_tokens=6, temperature=0.0, top_k=40, top_p=0.95, seed=1)
        read = prompt_ids(prompt, own)  # the prompt in the run's own tokens, and the answer too
        assert list(expected.token_ids[: len(read)]) == read
        assert own.decode(expected.token_ids[len(read):]) == expected.text and len(expected.steps) > 0
        assert [row[1] for row in table["data"]] == [visible(step.token, show_spaces=True) for step in expected.steps]
        with pytest.raises(DemoError, match="a text like `play.txt`"):  # an empty message: no movie review
            continue_text(service, " ")
        _, *rest = client.predict("", [], 6, 0.0, 40, 0.95, 1, 0, api_name="/chat")
        assert "a text like `play.txt`" in str(rest) and "movie" not in str(rest)
        _, summary = client.predict("ANNA:\nThe king said", api_name="/tokenize")
        assert f"**{len(own.encode('ANNA:' + chr(10) + 'The king said'))} tokens**" in summary
    finally:
        app.close()


def test_the_model_card_of_an_own_text_run_names_its_file_not_imdb(tmp_path):
    text, out = write_text(tmp_path / "play.txt"), tmp_path / "run"
    metrics = tiny(text, out, "--max-steps", "2", "--eval-every", "2")
    card = report.model_card("mine", metrics, json.loads((out / "config.json").read_text()))
    assert "imdb" not in card.lower() and "movie" not in card.lower()
    assert "trained from scratch on one text, `play.txt`" in card and "in the style of `play.txt`" in card
    assert f"Data: its own text, `play.txt` ({metrics['data']['bytes']:,} bytes, 200 paragraphs" in card
    assert "| bits per byte | " in card and "(20 held-out paragraphs of `play.txt`) |" in card
    assert "validation = 20 of the 200 paragraphs of `play.txt`, held out (fixed seed 1337)" in card
    assert "python -m training.evaluate --checkpoint checkpoints/mine\n" in card  # no --data-dir: the run knows
    results = ModelCard(card).data.eval_results  # parsed as the Hub parses it
    assert [(r.dataset_name, r.dataset_split) for r in results] == [("play.txt", "held-out")] * 3
    assert ModelCard(card).data.datasets is None


def test_a_model_of_imdb_keeps_the_review_openings():
    from demo.text import CHAT_EXAMPLES, chat_intro, lm_openings

    imdb = {"data": {"kind": "data_dir", "source": "../shared/data/imdb"}, "sample_prompts": ["I rented this"]}
    assert lm_openings(imdb) == CHAT_EXAMPLES and lm_openings({}) == CHAT_EXAMPLES
    assert "movie review" in chat_intro(imdb)
    own = {"data": {"kind": "data", "source": "/x/notes.txt"}, "sample_prompts": ["Dear diary,", ""]}
    assert lm_openings(own) == ["Dear diary,"] and "`notes.txt`" in chat_intro(own)
    assert lm_openings({"data": {"kind": "data", "source": "n.txt"}}) == CHAT_EXAMPLES  # none recorded


def test_an_empty_chat_message_asks_for_the_kind_of_text_the_model_was_trained_on():
    from demo.views.chat import empty_prompt

    imdb = {"data": {"kind": "data_dir", "source": "../shared/data/imdb"}, "sample_prompts": ["I rented this"]}
    assert "movie review" in empty_prompt(imdb) and "movie review" in empty_prompt({})
    own = {"data": {"kind": "data", "source": "/x/play.txt"}, "sample_prompts": ["ANGELO:\nCharges she more"]}
    assert empty_prompt(own) == "Type the opening of a text like `play.txt` first, e.g. *“ANGELO: Charges she more”*."
    none = {"data": {"kind": "data", "source": "n.txt"}}  # no opening recorded: no example, not a movie one
    assert empty_prompt(none) == "Type the opening of a text like `n.txt` first."


def test_evaluate_refuses_a_file_changed_since_the_run(tmp_path):
    text = write_text(tmp_path / "play.txt")
    tiny(text, tmp_path / "run", "--max-steps", "2", "--eval-every", "2")
    write_text(text, seed=1)
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--checkpoint", str(tmp_path / "run")])
    assert str(exc.value.code).startswith("error: ") and "has changed since the run" in str(exc.value.code)


def test_a_folder_of_files_is_a_document_each_and_a_table_needs_only_text(tmp_path):
    folder = tmp_path / "letters"
    folder.mkdir()
    for i in range(30):
        write_text(folder / f"{i:02d}.txt", paragraphs=8, seed=i)
    (folder / "empty.txt").write_text("   \n")
    read = own_text.read(str(folder))
    assert (read.unit, read.documents, read.dropped) == ("files", 30, 1)
    texts = list(own_text.read(str(write_text(tmp_path / "play.txt"))).splits["train"]["text"])
    pd.DataFrame({"text": texts + ["", None]}).to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    table = own_text.read(str(tmp_path / "t.jsonl"))
    assert (table.unit, table.documents, table.dropped) == ("rows", 200, 2)
    metrics = tiny(tmp_path / "t.jsonl", tmp_path / "run", "--max-steps", "2", "--eval-every", "2")
    assert metrics["data"]["held_out"] == "20 of 200 rows (10%)"


def test_the_held_out_part_and_the_vocabulary_suit_the_corpus_size():
    assert [own_text.held_out_count(n) for n in (5, 14, 200, 7_222, 100_000)] == [1, 1, 20, 722, 2500]
    assert [own_text.vocab_size_for(n) for n in (1_000, 1_100_000, 130_000_000)] == [512, 2048, 8192]


BAD = [  # (what the file holds, extra flags, exit status, the one line's words)
    ("empty.txt", b"", [], 1, "empty.txt is empty"),
    ("blank.txt", b"\n\n   \n\n", [], 1, "every one of its 3 paragraphs is empty"),
    ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", [], 1, "is not text: a NUL byte at offset 8"),
    ("old.txt", "Caf\xe9 cr\xe8me.\n\n".encode("latin-1") * 9, [], 1,
     "old.txt is not utf-8: byte 0xe9 at offset 3; pass --encoding latin-1"),
    ("table.csv", b"body\nhello\nworld\n", [], 1, "has no column(s) ['text']; it has ['body']"),
    ("rows.jsonl", b'{"text": ""}\n' * 300, [], 1, "every one of its 300 rows is empty"),
    ("short.txt", b"One.\n\nTwo.\n\nThree.\n", [], 1, "holds 3 non-empty paragraphs: too few to hold any out; "
                                                    "at least 5 are needed"),
    ("few.txt", b"A b.\n\nC d.\n\nE f.\n\nG h.\n\nI j.\n", [], 1,
     "the held-out text has 6 tokens: fewer than one context of 64"),
    ("two.txt", b"x", ["--data-dir", "."], 2, "--data and --data-dir: give one data source"),
    ("enc.txt", b"x", ["--encoding", "klingon"], 2, "--encoding klingon: unknown encoding"),
]


@pytest.mark.parametrize("name, content, extra, status, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_leaves_no_run_folder(tmp_path, monkeypatch, capsys, name, content, extra, status,
                                                        message):
    monkeypatch.chdir(tmp_path)  # without --out a run would go to runs/lm-<timestamp>/ here
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SystemExit) as exc:
        tiny(tmp_path / name, None, *extra)
    err = capsys.readouterr().err
    assert exc.value.code == status and err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not list(tmp_path.glob("runs/*"))


def test_latin1_text_reads_with_its_encoding(tmp_path):
    (tmp_path / "old.txt").write_bytes("Caf\xe9 cr\xe8me.\n\n".encode("latin-1") * 9)
    assert own_text.read(str(tmp_path / "old.txt"), "latin-1").splits["train"]["text"][0] == "Café crème."


def test_print_config_prints_the_resolved_settings_and_creates_nothing(tmp_path, capsys):
    assert run.main(["--task", "lm", "--preset", "laptop", "--data", "x.txt", "--out", str(tmp_path / "o"),
                     "--print-config"]) is None
    config = json.loads(capsys.readouterr().out)
    assert config["model"]["n_layer"] == 4 and config["train"]["max_minutes"] == 9.0
    assert config["tokenizer"] == "its own, trained on the training part"
    assert config["vocab_size"] == "sized to the text" and config["model"]["dropout"] == 0.0
    assert not (tmp_path / "o").exists()


def test_help_shows_the_presets_in_a_table(capsys):
    with pytest.raises(SystemExit):
        run.main(["--help"])
    text = capsys.readouterr().out
    rows = text[text.index("presets (--preset"):].splitlines()
    assert rows[1].split()[:2] == ["preset", "lm:"] and [r.split()[0] for r in rows[2:6]] == [
        "tiny", "small", "base", "laptop"]


IMDB = Path(__file__).resolve().parents[2] / "shared" / "data" / "imdb"


@pytest.mark.needs_imdb
def test_a_classifier_from_your_lm_reads_with_the_lm_s_own_tokenizer(tmp_path, capsys):
    tiny(write_text(tmp_path / "play.txt"), tmp_path / "lm", "--max-steps", "2", "--eval-every", "2")
    capsys.readouterr()
    metrics = run.main(["--task", "sentiment", "--preset", "tiny", "--init-from", str(tmp_path / "lm"),
                        "--data-dir", str(IMDB), "--max-examples", "100", "--val-size", "20", "--max-steps", "2",
                        "--eval-every", "2", "--out", str(tmp_path / "s")])
    assert metrics["tokenizer"]["path"] == str(tmp_path / "lm") and not metrics["tokenizer"]["trained"]
    assert (tmp_path / "s" / "tokenizer.json").read_text() == (tmp_path / "lm" / "tokenizer.json").read_text()
    # two steps learn nothing: one line says so, and names the LM of play.txt as the likely cause
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: held-out accuracy")]
    assert len(warned) == 1 and "is chance" in warned[0] and "a language model of `play.txt`" in warned[0]


def test_a_classifier_at_chance_is_one_line_and_says_why_when_it_started_from_your_text(tmp_path):
    labels = [0] * 488 + [1] * 512  # the commoner label alone: 51.2%; two standard errors on 1,000 rows: 3.2 points
    assert run_report.chance_warning(0.56, 1000, labels, None) is None
    line = run_report.chance_warning(0.506, 1000, labels, "checkpoints/lm")
    assert line == ("warning: held-out accuracy 50.6% is chance (the commoner label alone scores 51.2%): this "
                    "classifier learned nothing")  # checkpoints/lm learned reviews: no cause to name
    lm = tmp_path / "lm"
    lm.mkdir()
    (lm / "metrics.json").write_text(json.dumps({"data": {"kind": "data", "source": "/x/input.txt"}}))
    assert "a language model of `input.txt`" in run_report.chance_warning(0.506, 1000, labels, str(lm))
    assert run_report.trained_text(str(tmp_path / "missing")) is None and run_report.trained_text(None) is None


def test_torchrun_trains_the_text_s_own_tokenizer_once_and_every_rank_reads_it(tmp_path):
    """No tokenizer exists before the run: rank 0 trains it and sends it to rank 1 (no single-process step first)."""
    text, out = write_text(tmp_path / "play.txt"), tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}",
           "-m", "training.run", "--task", "lm", "--preset", "tiny", "--data", str(text), "--out", str(out),
           "--max-steps", "2", "--eval-every", "2", "--device", "cpu"]
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[1], env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["ddp_weights_in_sync"] is True and metrics["tokenizer"]["trained"]
    assert proc.stdout.count("training a 512-token BPE tokenizer") == 1

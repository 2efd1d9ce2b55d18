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
    # the held-out part: the text's last tenth (its last 21 of 200 paragraphs), said with its true share of the
    # tokens in the start line and recorded
    data = metrics["data"]
    assert data["kind"] == "data" and data["held_out_by"] == "size" and data["val_size"] == 21
    share = data["val_tokens"] / (data["train_tokens"] + data["val_tokens"])
    assert 0.08 < share < 0.12 and "tokenizer its own" in printed
    assert (f"held out the last 10% of the text: 21 of 200 paragraphs; {data['val_tokens']:,} of "
            f"{data['train_tokens'] + data['val_tokens']:,} tokens ({share:.1%})") in printed
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
    assert "| bits per byte | " in card and "(21 held-out paragraphs of `play.txt`) |" in card
    assert "validation = the last 10% of the text: 21 of 200 paragraphs of `play.txt`, held out, never" in card
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


def held_out_share(metrics: dict) -> float:
    data = metrics["data"]
    return data["val_tokens"] / (data["train_tokens"] + data["val_tokens"])


def test_a_folder_of_two_files_holds_out_the_end_of_each_and_says_what_it_skipped(tmp_path, capsys):
    folder = tmp_path / "books"
    (folder / "sub").mkdir(parents=True)
    first, second = write_text(folder / "one.txt", paragraphs=150), write_text(folder / "sub" / "two.txt", 60, seed=1)
    (folder / "notes.md").write_text("# notes\n")
    (folder / "empty.txt").write_bytes(b"")
    (folder / ".hidden.txt").write_text("not read\n")
    read = own_text.read(str(folder))
    assert (read.unit, read.files, read.skipped) == ("paragraphs", 2, ["empty.txt (empty)", "notes.md"])
    assert read.note == "note: read 2 .txt file(s); skipped 2: empty.txt (empty), notes.md"
    held, train = ([t.strip() for t in read.splits[split]["text"]] for split in (own_text.HELD_OUT, "train"))
    for file in (first, second):  # the end of every file is held out, its start trained on
        paragraphs = file.read_text().strip().split("\n\n")
        assert paragraphs[-1] in held and paragraphs[-1] not in train and paragraphs[0] in train
    assert 0.08 < read.held_out_chars / read.chars < 0.12

    metrics = tiny(folder, tmp_path / "run", "--max-steps", "2", "--eval-every", "2", "--precision", "fp32")
    printed = capsys.readouterr().out
    assert printed.startswith("note: read 2 .txt file(s); skipped 2: empty.txt (empty), notes.md\n")
    share = held_out_share(metrics)
    assert 0.05 < share < 0.25 and (f"held out the last {read.held_out_chars / read.chars:.0%} of each of its 2 files: "
                                       f"{read.held_out} of {read.documents} paragraphs;") in printed
    assert f"tokens ({share:.1%}); tokenizer" in printed
    scored = evaluate.main(["--checkpoint", str(tmp_path / "run")])  # the same held-out tails, read again
    assert scored["bpb"] == pytest.approx(metrics["val_bpb"], rel=1e-5)


def test_a_folder_of_one_file_trains_and_of_none_is_one_line(tmp_path):
    folder = tmp_path / "one"
    folder.mkdir()
    write_text(folder / "only.txt")
    assert own_text.read(str(folder)).files == 1 and own_text.read(str(folder)).note is None
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "a.md").write_text("text\n")
    with pytest.raises(own_text.DataError, match="no non-empty .txt files in this folder or its sub-folders "
                                                 r"\(it holds 1 other file\(s\): a.md\)"):
        own_text.read(str(tmp_path / "none"))


def test_a_text_of_one_long_line_trains_on_its_start_and_holds_out_its_end(tmp_path, capsys):
    rng = random.Random(0)
    line = " ".join(rng.choice(WORDS) for _ in range(6000))  # no line break, no paragraph
    (tmp_path / "line.txt").write_text(line)
    read = own_text.read(str(tmp_path / "line.txt"))
    (held,), (train,) = read.splits[own_text.HELD_OUT]["text"], read.splits["train"]["text"]
    assert train + " " + held == line and 0.09 < len(held) / len(line) < 0.11  # cut at a space
    metrics = tiny(tmp_path / "line.txt", tmp_path / "run", "--max-steps", "2", "--eval-every", "2")
    assert 0.05 < held_out_share(metrics) < 0.25 and metrics["data"]["held_out"].startswith("the last 10% of the text")


def test_the_held_out_tail_starts_at_a_paragraph_then_a_line_then_a_space():
    paragraphs = "\n\n".join(f"Speech {i} is here." for i in range(20))
    cut = own_text.cut_point(paragraphs, 0.1)
    assert paragraphs[cut:].startswith("Speech 18") and paragraphs[cut - 2:cut] == "\n\n"
    lines = "\n".join(f"Line {i} is here." for i in range(20))
    assert lines[own_text.cut_point(lines, 0.1):].startswith("Line 18")
    words = "word " * 100
    assert own_text.cut_point(words, 0.1) == 450
    assert own_text.cut_point("x" * 100, 0.1) == 90 and own_text.cut_point("x", 0.1) == 1  # nothing to hold out


def test_a_table_needs_only_text_and_holds_out_a_tenth_of_its_rows(tmp_path):
    texts = list(own_text.read(str(write_text(tmp_path / "play.txt")), hold_out=False).splits["train"]["text"])
    pd.DataFrame({"text": texts + ["", None]}).to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    table = own_text.read(str(tmp_path / "t.jsonl"))
    assert (table.unit, table.documents, table.dropped) == ("rows", 200, 2)
    metrics = tiny(tmp_path / "t.jsonl", tmp_path / "run", "--max-steps", "2", "--eval-every", "2")
    assert metrics["data"]["held_out"] == "20 of 200 rows (10%)"


def test_val_size_is_a_table_s_rows_not_a_text_s(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        tiny(write_text(tmp_path / "play.txt"), tmp_path / "run", "--val-size", "30")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--val-size 30: a text's held-out part is drawn by size" in err
    assert not (tmp_path / "run").exists()


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
    ("short.txt", b"Hi.\n", [], 1, "short.txt: too little text to hold a tenth of it out and train on the rest"),
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


def test_sample_and_evaluate_on_an_interrupted_run_say_so_and_how_to_resume(tmp_path, capsys):
    from storage import STATE_NAME, interrupt_run, start_run

    stopped = tmp_path / "mine"
    start_run(stopped, "python -m training.run --task lm --data emma.txt --out runs/mine", replace=False)
    (stopped / STATE_NAME).write_bytes(b"state")  # stopped before its first evaluation: no config.json
    resume = "python -m training.run --task lm --data emma.txt --out runs/mine --resume"
    interrupt_run(stopped, 28, resume)
    for main in (sample.main, evaluate.main):
        with pytest.raises(SystemExit) as exc:
            main(["--checkpoint", str(stopped)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "no config.json" not in err
        assert f"--checkpoint {stopped}: interrupted at step 28: resume with: {resume}" in err
    (stopped / "RUN_IN_PROGRESS").write_text('{"command": "python -m training.run --task lm --data e.txt"}')
    with pytest.raises(SystemExit):  # killed without a word: the state it saved, and the command that resumes it
        sample.main(["--checkpoint", str(stopped)])
    assert (f"its saved state (trainer_state.pt) resumes with: python -m training.run --task lm --data e.txt --out "
            f"{stopped} --resume") in capsys.readouterr().err


IMDB_WORDS = re.compile(r"imdb|movie|review|film", re.IGNORECASE)


def _page_text(block) -> str:
    return " ".join(str(getattr(block, attr)) for attr in ("value", "label", "placeholder", "info", "choices")
                    if getattr(block, attr, None) is not None)


def _tab_of(block) -> str | None:
    parent = getattr(block, "parent", None)
    while parent is not None and type(parent).__name__ != "Tab":
        parent = getattr(parent, "parent", None)
    return getattr(parent, "label", None)


def test_served_with_an_own_text_lm_no_language_model_text_speaks_of_imdb_movies_or_reviews(tmp_path):
    pytest.importorskip("gradio")
    from demo.app import build_app
    from demo.tabs import about
    from demo.text import end_notice

    out = tmp_path / "run"
    metrics = tiny(write_text(tmp_path / "play.txt"), out, "--max-steps", "4", "--eval-every", "2")
    service = DemoService(shared_tiny_checkpoints(), device="cpu", models={LM: str(out)})
    app = build_app(service)
    shown = {b.elem_id: b for b in app.blocks.values() if getattr(b, "elem_id", None)}
    # the header: the run's text and its bits per byte first; the classifier after it, labelled as apart from it
    lm_part, apart = shown["header"].value.split("\n\n", 1)
    assert "trained on your own text, `play.txt`" in lm_part and f"{metrics['val_bpb']:.2f} bits per byte" in lm_part
    assert not IMDB_WORDS.search(lm_part) and apart.startswith("*Apart from it:* the **Sentiment** tab")
    # About: the language model's card in bits per byte, of its own text; the classifiers' labelled as IMDb's
    cards = shown["about"].value.split("## ")
    lm_card = next(c for c in cards if c.startswith("Language model"))
    assert not IMDB_WORDS.search(lm_card) and "Continues a text like `play.txt`" in lm_card
    assert f"held out of its training it needs {metrics['val_bpb']:.3f} bits per byte" in lm_card
    assert "tokens of `play.txt` while it learned" in lm_card and "perplexity" not in lm_card
    assert all("\n\n*Apart from the language model of `play.txt`: the app's IMDb classifier, not trained on your "
               "text.*\n\n" in c for c in cards if c.startswith(("Sentiment", "Backward")))
    assert sum(c.startswith("Sentiment") for c in cards) >= 1
    caption = shown["about-curve-caption-lm"].value
    assert "on held-out text of `play.txt`" in caption and not IMDB_WORDS.search(caption)
    # every other text outside the Sentiment tab (whose model is the IMDb classifier): none of IMDb, movies, reviews
    others = [(b.elem_id, _tab_of(b), _page_text(b)) for b in app.blocks.values()
              if getattr(b, "visible", True) is not False and _tab_of(b) != "Sentiment"
              and getattr(b, "elem_id", None) not in ("header", "about", "about-reliability")]
    assert [o for o in others if IMDB_WORDS.search(o[2])] == []
    assert shown["att-input"].value == metrics["sample_prompts"][0]  # the Attention tab starts from its text
    assert shown["chat-rate"].visible is False and shown["chat-rating"].visible is False  # no review verdict
    assert end_notice(metrics) == "The model ended the text (it produced the end-of-text token)."
    assert "The model ended the review" in end_notice({})
    lesson = (Path(__file__).resolve().parents[1] / "demo/views/tour/lessons/tokens.md").read_text()
    assert "merges it learned from\nits training text" in lesson  # the tour's first step
    assert "*Train your own*" in about.developers_markdown(service)  # a README section that exists
    assert "## Train your own" in (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_sample_without_a_recorded_prompt_starts_an_own_text_model_from_its_start_token(tmp_path):
    assert "This movie was" not in sample.__doc__.split("checkpoints/lm")[0]
    lm = tmp_path / "lm"
    lm.mkdir()
    (lm / "metrics.json").write_text(json.dumps({"data": {"kind": "data", "source": "play.txt"}}))
    assert sample.run_prompt(str(lm)) == ""
    (lm / "metrics.json").write_text(json.dumps({"data": {"kind": "data_dir", "source": "imdb"}}))
    assert sample.run_prompt(str(lm)) == "This movie was"
    (lm / "metrics.json").write_text(json.dumps({"sample_prompts": ["ANNA:\nThe king"]}))
    assert sample.run_prompt(str(lm)) == "ANNA:\nThe king"


def write_table(path: Path, rows: int = 200, labels=(0, 1), blank: int | None = None) -> Path:
    """A labelled table of made-up lines: a line with "gold" is label 1 (its second label), else label 0."""
    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(rows)]
    frame = pd.DataFrame({"text": texts, "label": [labels[int("gold" in t)] for t in texts]})
    if blank is not None:
        frame.loc[blank, "text"] = ""
    frame.to_csv(path, index=False)
    return path


def test_a_classifier_of_your_own_table_says_what_it_used_and_gives_advice_that_fits(tmp_path, capsys):
    table = write_table(tmp_path / "mine.csv")
    metrics = run.main(["--task", "sentiment", "--preset", "tiny", "--data", str(table), "--out", str(tmp_path / "s"),
                        "--max-steps", "2", "--eval-every", "2"])
    printed = capsys.readouterr()
    assert metrics["data"]["train_pairs"] == 180 and metrics["data"]["val_pairs"] == 8
    assert ("held out 20 of 200 rows (10%): 8 selection rows it validates on (they choose the checkpoint kept and its "
            "temperature) and 12 report rows no choice is made on (training.evaluate --checkpoint RUN --split report "
            "scores them); 180 rows to train on (few: a classifier learns from thousands") in printed.out
    # at chance (two steps learn nothing): the rows are the cause it names, and no IMDB LM is offered
    line = run_report.chance_warning(0.5, 8, [0] * 4 + [1] * 4, None, str(table), 180)
    assert "it trained on 180 rows of `mine.csv` and was judged on 8: too few" in line
    assert "checkpoints/lm" not in line and f"python -m training.run --task lm --data {table}" in line
    lm = tmp_path / "lm"
    lm.mkdir()
    (lm / "metrics.json").write_text(json.dumps({"data": {"kind": "data", "source": "/x/input.txt"}}))
    line = run_report.chance_warning(0.5, 8, [0] * 4 + [1] * 4, str(lm), str(table), 180)
    assert "started from a language model of `input.txt`" in line and "IMDB" not in line
    imdb = run_report.chance_warning(0.5, 1000, [0] * 500 + [1] * 500, str(lm))
    assert "checkpoints/lm" in imdb  # IMDB: it fits there
    report = evaluate.main(["--checkpoint", str(tmp_path / "s"), "--split", "report"])
    assert report["examples"] == 12


def test_a_bad_label_names_the_file_and_its_line(tmp_path, capsys):
    table = write_table(tmp_path / "mine.csv", labels=("no", "yes"))
    with pytest.raises(SystemExit) as exc:
        run.main(["--task", "sentiment", "--preset", "tiny", "--data", str(table), "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and err.count("\n") == 1 and "the train split" not in err
    assert (f"error: {table}, line 2 (row 0, 0-based): label 'no' (a str); expected 0 (negative), 1 (positive), as a "
            "number or the word (and 199 more bad rows)") in err
    assert not (tmp_path / "s").exists()
    frame = pd.read_csv(write_table(table, blank=3))  # a blank text is left out; a later bad label keeps its line
    frame["label"] = frame["label"].astype(object)
    frame.loc[7, "label"] = "maybe"
    frame.to_csv(table, index=False)
    with pytest.raises(SystemExit):
        run.main(["--task", "sentiment", "--preset", "tiny", "--data", str(table), "--out", str(tmp_path / "s")])
    assert f"{table}, line 9 (row 7, 0-based): label 'maybe' (a str)" in capsys.readouterr().err
    words = write_table(tmp_path / "words.csv", labels=("negative", "positive"))  # the label words read as labels
    metrics = run.main(["--task", "sentiment", "--preset", "tiny", "--data", str(words), "--out", str(tmp_path / "w"),
                        "--max-steps", "1", "--eval-every", "1"])
    assert metrics["data"]["train_pairs"] == 180


def test_print_config_shows_the_shape_a_run_from_a_language_model_takes(tmp_path, capsys):
    tiny(write_text(tmp_path / "play.txt"), tmp_path / "lm", "--max-steps", "1", "--eval-every", "1",
         "--set", "d_model=48", "--set", "d_ff=96")
    capsys.readouterr()
    run.main(["--task", "sentiment", "--preset", "laptop", "--init-from", str(tmp_path / "lm"), "--data",
              str(write_table(tmp_path / "mine.csv")), "--print-config"])
    config = json.loads(capsys.readouterr().out)
    lm = json.loads((tmp_path / "lm" / "config.json").read_text())
    assert (config["model"]["d_model"], config["model"]["d_ff"], config["model"]["n_encoder_layer"]) == (
        48, 96, lm["n_layer"])
    assert config["val_size"].startswith("a tenth of its rows, at most 2,500: the first 40% of them the selection")


def _code_block_after(text: str, heading: str) -> list[str]:
    section = text[text.index(heading):]
    block = section[section.index("```bash\n") + len("```bash\n"):]
    return [line for line in block[:block.index("```")].splitlines() if line.strip()]


def test_the_readme_sets_up_a_cpu_laptop_in_two_commands_and_ends_your_text_s_quick_start_on_your_model():
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    setup = _code_block_after(readme, "## Two commands")
    assert len(setup) == 2 and setup[0].startswith("python3.11 -m venv .venv && . .venv/bin/activate && pip install")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt" in setup[0]
    # the tests' line is the one CI runs (.ci/run): the torch the first line installed satisfies the pin
    assert setup[1] == "pip install -r requirements-dev.txt && python -m pytest -q"
    assert setup[1] in (root / ".ci" / "run").read_text()
    assert setup[0].endswith("python -m demo") and setup[1].endswith("python -m pytest -q")
    assert 'python_version: "3.11"' in readme and "Python 3.11" in readme
    assert "torch==2.13.0\n" in (root / "requirements.txt").read_text()  # the CPU index's 2.13.0+cpu matches it
    quick = _code_block_after(readme, "## Train your own")
    assert quick[0].startswith("python -m training.run --task lm --preset laptop --data FILE_OR_FOLDER")
    assert quick[-1].startswith("python -m demo --lm runs/mine") and not any("sentiment" in line for line in quick)


def test_a_run_from_before_the_held_out_tail_is_scored_on_the_paragraphs_it_held_out(tmp_path, capsys):
    """A run that held out a tenth of one file's paragraphs at random (no `held_out_by`) finds them again;
    one of a folder read a document per file says so in one line."""
    from training.data import held_out_digest, held_out_of

    text, out = write_text(tmp_path / "play.txt"), tmp_path / "run"
    tiny(text, out, "--max-steps", "2", "--eval-every", "2")
    metrics = json.loads((out / "metrics.json").read_text())
    old = held_out_of(own_text.read(str(text), hold_out=False).splits, 20, 1337)
    metrics["data"] = {"kind": "data", "source": str(text), "encoding": "utf-8", "unit": "paragraphs",
                       "val_size": 20, "held_out_sha256": held_out_digest(old)}
    (out / "metrics.json").write_text(json.dumps(metrics))
    assert evaluate.main(["--checkpoint", str(out)])["bpb"] > 0
    metrics["data"]["unit"] = "files"
    (out / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--checkpoint", str(out)])
    assert "a document per file, as runs before held-out parts were drawn by size did" in str(exc.value.code)


def test_the_last_figure_says_when_it_read_a_sample_of_the_held_out_windows():
    whole = run_report.bpb_line(1.9712, "held out 10%", {"rows": 98, "of": 98}, "runs/mine")
    assert whole == "held-out bits per byte: 1.971 (held out 10%)"
    part = run_report.bpb_line(2.7051, "held out 10%", {"rows": 40, "of": 98}, "runs/mine")
    assert part == ("held-out bits per byte: 2.705 (held out 10%; measured on 40 of its 98 windows, a sample the time "
                    "left allowed: `python -m training.evaluate --checkpoint runs/mine` reads them all)")

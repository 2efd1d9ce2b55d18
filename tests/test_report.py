"""The generated model cards and results page: their figures are metrics.json's, and the committed
files are what the generator writes today (so they cannot go stale)."""

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from model import read_config
from publishing import report
from storage import CARD_NAME, CLASSIFIER_NAME, CONFIG_NAME, METRICS_NAME

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["lm", "sentiment"]


def generated_card(name: str) -> str:
    folder = ROOT / "checkpoints" / name
    classifier = folder / CLASSIFIER_NAME  # a classifier's labels, cut and temperatures
    return report.model_card(name, json.loads((folder / METRICS_NAME).read_text()),
                             read_config(folder),  # as `write_card` reads it: under today's field names
                             json.loads(classifier.read_text()) if classifier.is_file() else None)


@pytest.mark.parametrize("name", SHIPPED)
def test_card_metadata_holds_the_metrics_json_figures(name):
    metrics = json.loads((ROOT / "checkpoints" / name / METRICS_NAME).read_text())
    card = ModelCard(generated_card(name))  # parsed by huggingface_hub, as the Hub parses it
    data = card.data
    assert (data.license, data.library_name, data.datasets, data.language) == ("mit", "pytorch",
                                                                                  ["stanfordnlp/imdb"], "en")
    expected = {"lm": {"val_bpb": "bits_per_byte", "val_ppl": "perplexity", "val_loss": "loss"},
                "sentiment": {"val_accuracy": "accuracy"}}[name]
    assert [(r.metric_type, r.metric_value, r.dataset_type, r.dataset_split) for r in data.eval_results] == [
        (kind, metrics[key], "stanfordnlp/imdb", "train") for key, kind in expected.items()]
    assert metrics["command"] in card.text
    assert f"{metrics['parameters']:,} parameters" in card.text
    for key, label, split, fmt in report.ROWS:
        if key in expected:
            held_out = metrics["data"].get("val_texts") or metrics["data"]["val_pairs"]
            # the LM validated on all 2,500 held-out reviews; the classifier on their 1,000 selection rows
            assert held_out == {"lm": 2500, "sentiment": 1000}[name]
            assert f"| {label} | {fmt.format(metrics[key])} | {split.format(n=held_out)} |" in card.text


def test_sentiment_card_states_its_confusion_matrix_and_truncation():
    text = generated_card("sentiment")
    metrics = json.loads((ROOT / "checkpoints/sentiment" / METRICS_NAME).read_text())
    (tn, fp), (fn, tp) = metrics["val_confusion"]
    assert f"| true negative | {tn:,} | {fp:,} |" in text and f"| true positive | {fn:,} | {tp:,} |" in text
    assert "first 639 and its last 384 tokens" in text  # 1,024 = 639 + 384 + the end token
    assert "(it wrote to `runs/ulmfit-full`; this folder holds a copy)" in text
    assert "the *selection* rows" in text and "the *report* rows, served no choice" in text
    assert "selection" not in generated_card("lm")  # a language model validates on all its held-out reviews


@pytest.mark.parametrize("name", [*SHIPPED, "sentiment-backward"])
def test_committed_cards_are_up_to_date(name):
    committed = (ROOT / "checkpoints" / name / CARD_NAME).read_text(encoding="utf-8")
    assert committed == generated_card(name), "regenerate with: python -m publishing.report --cards"


def test_cards_cli_writes_one_card_per_run_folder(tmp_path):
    for name in SHIPPED:
        (tmp_path / name).mkdir()
        for file in (CONFIG_NAME, CLASSIFIER_NAME, METRICS_NAME):
            if (ROOT / "checkpoints" / name / file).is_file():
                shutil.copy(ROOT / "checkpoints" / name / file, tmp_path / name / file)
    report.main([str(tmp_path), "--cards"])
    for name in SHIPPED:
        assert (tmp_path / name / CARD_NAME).read_text(encoding="utf-8") == generated_card(name)


def test_committed_results_page_is_up_to_date():
    expected = report.results_markdown(report.load_runs([ROOT / "checkpoints"]),
                                       report.load_runs([ROOT / "docs" / "experiments"]))
    assert (ROOT / "docs" / "results.md").read_text(encoding="utf-8") == expected, (
        "regenerate with: python -m publishing.report --results docs/results.md")
    assert expected.count("](experiments/") == len(list((ROOT / "docs" / "experiments").glob(f"*/{METRICS_NAME}")))


SCHEDULE = "python -m training.run --task sentiment --max-steps 1900 --data-dir 'my data' --out runs/x"


def test_stretches_of_one_schedule_are_shown_as_the_command_that_trains_it():
    stretches = [SCHEDULE + " --threads 1 --max-minutes 92",
                 SCHEDULE + " --threads 1 --max-minutes 145 --resume",
                 SCHEDULE.replace("--task sentiment", "--task sentiment --threads 2") + " --max-minutes 10 --resume"]
    assert report.as_one_command(" && ".join(stretches)) == (SCHEDULE, 3)  # quoting kept: 'my data'
    note, shown = report._command_note(" && ".join(stretches))
    assert note.startswith("It ran in 3 stretches (on 1, then 2 CPU threads), each ended by `--max-minutes`")
    assert shown == SCHEDULE


def test_a_changed_schedule_and_a_single_command_are_shown_as_recorded():
    raised = SCHEDULE + " --max-minutes 5 && " + SCHEDULE.replace("1900", "2500") + " --resume"
    assert report.as_one_command(raised) == (raised, 1)  # a raised --max-steps trains something else
    alone = SCHEDULE + " --max-minutes 4.5"  # stopped by its clock and never resumed: that is how it trained
    assert report.as_one_command(alone) == (alone, 1)
    assert report._command_note(alone) == ("The command, as the run recorded it in `metrics.json`", alone)


def test_the_backward_reader_card_shows_its_twelve_stretches_as_one_schedule():
    metrics = json.loads((ROOT / "checkpoints/sentiment-backward" / METRICS_NAME).read_text())
    one, stretches = report.as_one_command(metrics["command"])
    assert stretches == len(metrics["command"].split(" && ")) > 1
    assert "--max-minutes" not in one and "--resume" not in one and "--threads" not in one
    card = generated_card("sentiment-backward")
    assert f"```bash\n{one}\n```" in card and f"It ran in {stretches} stretches" in card


def test_a_card_names_the_seed_that_held_its_rows_out_not_the_seed_of_its_batches():
    lm = json.loads((ROOT / "checkpoints" / "lm" / METRICS_NAME).read_text())
    config = json.loads((ROOT / "checkpoints" / "lm" / CONFIG_NAME).read_text())
    run = {**lm, "command": "python -m training.run --task lm --seed 2 --split-seed 1337",
           "train_config": {**lm["train_config"], "seed": 2}}
    run.pop("split_seed", None)  # a run from before it was recorded: the command says
    assert "(fixed seed 1337;" in report.model_card("lm", run, config)
    assert "(fixed seed 7;" in report.model_card("lm", {**run, "split_seed": 7}, config)  # recorded: it wins
    plain = {**run, "command": "python -m training.run --task lm --seed 2"}
    assert "(fixed seed 2;" in report.model_card("lm", plain, config)  # no --split-seed: --seed held them out


def test_the_shipped_lm_card_names_the_run_it_continued_and_the_tokens_of_both():
    lm = json.loads((ROOT / "checkpoints" / "lm" / METRICS_NAME).read_text())
    first = lm["init_from"]
    card = generated_card("lm")
    assert f"It started from `checkpoints/lm` as it was then (weights SHA-256 `{first['weights_sha256'][:16]}`)" in card
    assert f"by `{first['command']}`" in card and "--init-from checkpoints/lm" in lm["command"]
    assert f"{(lm['tokens_seen'] + first['tokens_seen']) / 1e6:.1f} M tokens in all" in card

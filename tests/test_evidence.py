"""The evidence builder (`training.evidence`): sentence sums, what is kept, held-out rows never read,
the cache resuming; and its snippets in training (`--evidence`, `--evidence-prob`)."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from classifier import Reader
from demo.tiny import shared_tiny_checkpoints
from inspection import attribute
from storage import STATE_NAME
from tokenization import BPETokenizer, sentence_spans, sentences, source_ids
from training import evidence, run
from training.contract import TaskOptions
from training.data import load_splits, validation_split
from training.errors import UsageError
from training.recipe import Recipe
from training.tasks import SENTIMENT_LABELS, TASKS
from training.trainer import STOPS, Trainer

VAL_SIZE, SEED = 10, 3


@pytest.fixture(scope="module")
def teacher() -> Path:
    return shared_tiny_checkpoints() / "sentiment"


def core(text: str, piece) -> tuple[int, int]:
    """A token's characters without the white space byte-level BPE glues to it."""
    chunk = text[piece.start : piece.end]
    return piece.start + len(chunk) - len(chunk.lstrip()), piece.start + len(chunk.rstrip())


def test_sentence_spans_are_where_the_sentences_are():
    review = ' What a film! I "loved" every minute of it. Ok.\nThe acting was superb...  Worth it? Yes.\n\n'
    spans = sentence_spans(review, min_words=1)
    assert [review[a:b] for a, b in spans] == sentences(review, min_words=1) == [
        "What a film!", 'I "loved" every minute of it.', "Ok.", "The acting was superb...", "Worth it?", "Yes."]
    assert [review[a:b] for a, b in sentence_spans(review)] == sentences(review)


def test_sentence_sums_are_the_sums_of_their_tokens_integrated_gradients(teacher):
    model = Reader.from_pretrained(teacher).eval()
    tokenizer = model.tokenizer
    text = "The acting was wonderful. But the plot made no sense at all!\nI left early."
    pieces, scores = evidence.read_scores(model, tokenizer, model.candidates, text, 1)
    # the scores are the project's integrated gradients of the review as the reader reads it
    ids = torch.tensor(source_ids([text], tokenizer, model.reading)[0])
    direct = attribute(model, ids, model.candidates, "integrated_gradients", label=1,
                       steps=evidence.IG_STEPS, max_steps=evidence.IG_STEPS)
    torch.testing.assert_close(torch.tensor(scores), direct.scores[:-1])
    found = evidence.sentence_sums(text, pieces, scores)
    assert [text[s.start : s.end] for s in found] == ["The acting was wonderful.",
                                                       "But the plot made no sense at all!", "I left early."]
    for s in found:  # independently: the tokens, white space aside, whose characters lie inside the sentence
        inside = [score for p, score in zip(pieces, scores, strict=True)
                  if text[p.start : p.end].strip() and s.start <= core(text, p)[0] and core(text, p)[1] <= s.end]
        assert s.total == pytest.approx(sum(inside), rel=1e-5, abs=1e-12)
    # white space between sentences (the newline; more tokens with a tokenizer trained on a few sentences) is in none
    between = sum(score for p, score in zip(pieces, scores, strict=True) if not text[p.start : p.end].strip())
    assert sum(s.total for s in found) + between == pytest.approx(sum(scores), rel=1e-5, abs=1e-12)


def scored(text: str, tokenizer: BPETokenizer, weights: dict[str, float]):
    """The review's pieces, and scores: `weights[word]` for each occurrence of `word`, split evenly
    over its tokens; 0 elsewhere (white space, a token of its own with a tokenizer trained on a few
    sentences, belongs to no word)."""
    pieces = tokenizer.pieces(text)
    owners = [next(((w, m) for w in weights for m in range(len(text)) if text.startswith(w, m)
                    and m <= core(text, p)[0] < m + len(w)), None) if text[p.start : p.end].strip() else None
              for p in pieces]
    return pieces, [weights[o[0]] / owners.count(o) if o else 0.0 for o in owners]


def test_supporting_sentences_are_kept_with_their_words_and_phrases_and_the_rest_skipped(teacher):
    tokenizer = BPETokenizer.from_file(teacher)
    text = "The acting was wonderful and moving. The plot was a total mess. It runs two hours."
    pieces, scores = scored(text, tokenizer, {"wonderful": 2.0, "moving": 1.0, "mess": -1.5, "hours": 0.05})
    mass = 3.0 + 1.5 + 0.05
    kept = {(s.kind, s.text): s.score for s in evidence.review_evidence(text, pieces, scores)}
    assert kept == pytest.approx({("sentence", "The acting was wonderful and moving."): 3.0 / mass,
                                  ("word", "wonderful"): 2.0 / mass, ("word", "moving"): 1.0 / mass,
                                  ("phrase", "wonderful and moving"): 3.0 / mass})
    # against the label: "The plot was a total mess." (-0.33) is not kept, nor any word of it;
    # neutral: "It runs two hours." (+0.011, under SENTENCE_SHARE) is skipped
    assert evidence.review_evidence(text, pieces, [-s for s in scores]) == [
        evidence.Snippet("The plot was a total mess.", "sentence", 1.5 / mass),
        evidence.Snippet("mess", "word", 1.5 / mass)]  # no phrase: only one of its words supports the label


def test_a_sentence_the_model_did_not_read_is_neither_kept_nor_counted(teacher):
    tokenizer = BPETokenizer.from_file(teacher)
    text = "A wonderful film. The middle part was wonderful too."
    pieces, scores = scored(text, tokenizer, {"wonderful": 1.0})
    second = evidence.sentence_sums(text, pieces, scores)[1].tokens
    unread = [math.nan if i in second[:2] else s for i, s in enumerate(scores)]
    kept = evidence.review_evidence(text, pieces, unread)
    assert [(s.kind, s.text) for s in kept] == [("sentence", "A wonderful film."), ("word", "wonderful")]
    assert kept[0].score == 1.0  # the unread sentence's evidence is not part of the mass


# --- the builder, on a small data folder -------------------------------------------------------------
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """30 training reviews (10 held out, seed 3) and 6 unlabeled ones; one training and one unlabeled
    review repeat a held-out review's text, as IMDB does."""
    folder = tmp_path_factory.mktemp("imdb")
    texts = [f"Review {i} was a good film. The cast did fine work. I liked it a lot!" for i in range(30)]
    _, held_out = validation_split(30, VAL_SIZE, SEED)
    for i in held_out:
        texts[i] = f"HELDOUT {i} was a fine film. The cast did well here."
    kept_rows = sorted(set(range(30)) - set(held_out.tolist()))
    texts[kept_rows[4]] = texts[held_out[0]]
    pd.DataFrame({"text": texts, "label": [i % 2 for i in range(30)]}).to_parquet(folder / "train.parquet")
    unlabeled = [f"Unlabeled {i}: a good film with a fine cast. I liked it." for i in range(5)] + [texts[held_out[1]]]
    pd.DataFrame({"text": unlabeled, "label": [-1] * 6}).to_parquet(folder / "unsupervised.parquet")
    return folder


def build(teacher: Path, data: Path, out: Path, split: str, *extra: str) -> list[dict]:
    evidence.main(["--teacher", str(teacher), "--data-dir", str(data), "--split", split, "--out", str(out),
                   "--val-size", str(VAL_SIZE), "--seed", str(SEED), "--precision", "fp32", *extra])
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_held_out_reviews_are_never_read(teacher, data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(evidence, "CONFIDENCE", 0.0)  # the random tiny teacher is never confident
    train_rows, held_out = validation_split(30, VAL_SIZE, SEED)
    lines = build(teacher, data_dir, tmp_path / "train.jsonl", "train")
    header, reviews = lines[0], lines[1:]
    assert header["split"] == "train" and (header["val_size"], header["seed"]) == (VAL_SIZE, SEED)
    assert [r["review"] for r in reviews] == [r for r in train_rows.tolist() if r != train_rows[4]]  # nor its copy
    labels = pd.read_parquet(data_dir / "train.parquet")["label"]
    assert all(r["label"] == labels[r["review"]] and r["p"] is None for r in reviews)  # gold labels
    unlabeled = build(teacher, data_dir, tmp_path / "unsup.jsonl", "unsupervised")[1:]
    assert [r["review"] for r in unlabeled] == [0, 1, 2, 3, 4]  # not row 5, a held-out review's text
    assert all(r["label"] in (0, 1) and r["p"] >= 0.5 for r in unlabeled)  # the teacher's own label
    snippets = [s["text"] for r in reviews + unlabeled for s in r["snippets"]]
    assert snippets and not any("HELDOUT" in s for s in snippets)


def test_the_cache_resumes_and_refuses_other_settings(teacher, data_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "train.jsonl"
    first = build(teacher, data_dir, out, "train", "--limit", "3")
    assert len(first) == 4
    before = out.read_bytes()
    build(teacher, data_dir, out, "train", "--limit", "3")  # the same call again: nothing to do
    assert out.read_bytes() == before
    more = build(teacher, data_dir, out, "train", "--start", "2", "--limit", "3")  # overlaps: continues
    train_rows = validation_split(30, VAL_SIZE, SEED)[0].tolist()
    usable = train_rows[:4] + train_rows[5:]  # train_rows[4] repeats a held-out review (data_dir)
    assert more[:4] == first and [r["review"] for r in more[1:]] == usable[:5]
    with open(out, "a", encoding="utf-8") as f:
        f.write('{"review": 99, "lab')  # a build killed while writing
    again = build(teacher, data_dir, out, "train", "--start", "5", "--limit", "1")
    assert again[:6] == more and len(again) == 7
    monkeypatch.setattr(evidence, "SENTENCE_SHARE", 0.5)
    with pytest.raises(SystemExit) as exc:
        build(teacher, data_dir, out, "train", "--limit", "1")
    assert exc.value.code == 2 and "sentence_share 0.2 (now 0.5)" in capsys.readouterr().err


def test_training_refuses_a_cache_of_other_held_out_rows(teacher, data_dir, tmp_path):
    out = tmp_path / "train.jsonl"
    build(teacher, data_dir, out, "train", "--limit", "2")
    texts, labels, counts = evidence.load_evidence([str(out)], VAL_SIZE, SEED)
    assert len(texts) == len(labels) == sum(counts.values())
    with pytest.raises(evidence.UsageError, match="--val-size 10 --seed 3, this run 10 and 4"):
        evidence.load_evidence([str(out)], VAL_SIZE, 4)


def test_training_with_evidence_resumes_exactly_and_records_it(teacher, data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(evidence, "CONFIDENCE", 0.0)
    cache = tmp_path / "unsup.jsonl"
    build(teacher, data_dir, cache, "unsupervised")  # the teacher's labels: not the training rows' own
    texts, labels, counts = evidence.load_evidence([str(cache)], VAL_SIZE, SEED)
    assert texts
    args = ["--task", "sentiment", "--preset", "tiny", "--data-dir", str(data_dir), "--val-size", str(VAL_SIZE),
            "--seed", str(SEED), "--tokenizer", str(teacher.parent / "tokenizer.json"), "--evidence", str(cache),
            "--evidence-prob", "0.5", "--max-steps", "6", "--eval-every", "3", "--set", "dropout=0.2"]
    straight = run.main([*args, "--out", str(tmp_path / "straight")])
    recipe = straight["train_config"]["recipe"]
    assert list(recipe["evidence"]) == [str(cache)] and recipe["evidence_prob"] == 0.5
    assert straight["data"]["evidence_snippets"] == counts
    with monkeypatch.context() as m:  # the first invocation runs out of time after 3 steps
        m.setattr(Trainer, "stop_reason", lambda self, received, now, step_seconds:
                  STOPS.index("max_minutes") if self.step >= 3 else 0)
        stopped = run.main([*args, "--out", str(tmp_path / "resumed")])
    assert stopped["steps"] == 3 and stopped["stopped_by"] == "max_minutes"
    run.main([*args, "--out", str(tmp_path / "resumed"), "--resume"])
    a, b = (torch.load(tmp_path / d / STATE_NAME, weights_only=True) for d in ("straight", "resumed"))
    assert a["step"] == b["step"] == 6 and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_evidence_copies_add_each_distinct_snippet_as_a_row_of_its_own_with_its_label(teacher, data_dir, tmp_path):
    """--evidence-copies N: every distinct (snippet, label) of the caches joins the training rows N times,
    however many reviews gave it; the reviews and the validation rows stay as they were."""
    cache = tmp_path / "train.jsonl"
    build(teacher, data_dir, cache, "train", "--limit", "4")
    texts, labels, _ = evidence.load_evidence([str(cache)], VAL_SIZE, SEED)
    distinct = list(dict.fromkeys(zip(texts, labels, strict=True)))
    assert distinct and len(distinct) <= len(texts)
    task = TASKS["sentiment"](load_splits(str(data_dir)), TaskOptions(VAL_SIZE, SEED, None))
    recipe = Recipe(evidence=(str(cache),), evidence_copies=2)
    (rows, targets), added = task.with_added_rows(recipe, task.read_evidence(recipe))
    reviews = len(task.train_rows[0])
    assert rows[:reviews] == task.train_rows[0] and added == {"evidence_rows": 2 * len(distinct)}
    assert list(zip(rows[reviews:], targets[reviews:], strict=True)) == [
        (t, SENTIMENT_LABELS[y]) for t, y in distinct] * 2
    with pytest.raises(UsageError, match="--evidence-copies"):
        Recipe(evidence_copies=2)  # without a cache


def test_evidence_needs_the_sentiment_run_s_own_held_out_rows(teacher, data_dir, tmp_path, capsys):
    cache = tmp_path / "train.jsonl"
    build(teacher, data_dir, cache, "train", "--limit", "2")
    base = ["--task", "sentiment", "--preset", "tiny", "--data-dir", str(data_dir), "--val-size", str(VAL_SIZE),
            "--tokenizer", str(teacher.parent / "tokenizer.json"), "--evidence", str(cache), "--evidence-prob", "0.5",
            "--max-steps", "2", "--out", str(tmp_path / "run")]
    for extra, message in [(["--seed", "4"], "holds out --val-size 10 --seed 3, this run 10 and 4"),
                           (["--seed", str(SEED), "--max-examples", "25"], "does not combine with --max-examples")]:
        with pytest.raises(SystemExit) as exc:
            run.main([*base, *extra, "--overwrite"])
        assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_word_is_what_spaces_part_without_its_punctuation(teacher):
    tokenizer = BPETokenizer.from_file(teacher)
    text = "It (honestly) doesn't disappoint, at all."
    pieces, scores = scored(text, tokenizer, {"doesn't": 1.0, "disappoint": 1.0})
    kept = evidence.review_evidence(text, pieces, scores)
    assert [(s.kind, s.text) for s in kept] == [("sentence", text), ("word", "doesn't"), ("word", "disappoint"),
                                                ("phrase", "doesn't disappoint")]
    assert [s.score for s in kept] == pytest.approx([1.0, 0.5, 0.5, 1.0])


def test_training_uses_a_word_or_phrase_only_with_the_label_it_carries_across_reviews(tmp_path):
    cache = tmp_path / "e.jsonl"
    header = {"format": evidence.FORMAT, "val_size": VAL_SIZE, "seed": SEED}
    reviews = ([{"review": i, "label": 1, "snippets": [{"text": "Great", "kind": "word", "score": 0.2},
                                                       {"text": "the", "kind": "word", "score": 0.1}]}
                for i in range(10)]
               + [{"review": 10 + i, "label": 0, "snippets": [{"text": "great", "kind": "word", "score": 0.2},
                                                              {"text": "the", "kind": "word", "score": 0.1},
                                                              {"text": "Great fun? No.", "kind": "sentence",
                                                               "score": 0.3}]}
                  for i in range(10)] + [{"review": 30, "label": 1, "snippets": [
                      {"text": "great", "kind": "word", "score": 0.2}]}])  # "great": 11 positive, 10 negative
    cache.write_text("\n".join(json.dumps(line) for line in [header, *reviews]) + "\n", encoding="utf-8")
    texts, labels, counts = evidence.load_evidence([str(cache)], VAL_SIZE, SEED)
    assert counts == {"sentence": 10, "phrase": 0, "word": 0}
    assert set(zip(texts, labels, strict=True)) == {("Great fun? No.", 0)}  # sentences are kept as they are
    cache.write_text("\n".join(json.dumps(line) for line in [header, *reviews[:10], reviews[-1]]) + "\n")
    texts, labels, _ = evidence.load_evidence([str(cache)], VAL_SIZE, SEED)
    assert sorted(set(zip(texts, labels, strict=True))) == [("Great", 1), ("great", 1), ("the", 1)]  # one label


def test_a_cache_whose_snippets_hold_unicode_line_separators_reads_back_whole(tmp_path):
    """Reviews contain U+2028 and U+0085, which `json.dumps(ensure_ascii=False)` writes as they are
    and `str.splitlines()` would split at: the cache must still read back one review a line."""
    cache = tmp_path / "e.jsonl"
    header = {"format": evidence.FORMAT, "val_size": VAL_SIZE, "seed": SEED}
    reviews = [{"review": i, "label": i % 2, "snippets": [
        {"text": f"Line one.\u2028Line\x85 two {i}.", "kind": "sentence", "score": 0.3}]} for i in range(3)]
    cache.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in [header, *reviews]),
                     encoding="utf-8")
    found, done = evidence.read_cache(cache)
    assert found == header and done == {0, 1, 2}
    texts, labels, counts = evidence.load_evidence([str(cache)], VAL_SIZE, SEED)
    assert texts == [f"Line one.\u2028Line\x85 two {i}." for i in range(3)] and labels == [0, 1, 0]
    assert counts == {"sentence": 3, "phrase": 0, "word": 0}

"""The "Watch it learn" view (`demo.views.learning`) on the tiny checkpoint's three snapshots, checked
against each snapshot model run directly; where the app finds snapshots; and shipping a run's
snapshots within a size budget (`publishing.snapshots`)."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from demo.serving import DemoError, DemoService
from demo.tabs import learning as learning_tab
from demo.tiny import TINY_SNAPSHOT_STEPS, make_tiny_checkpoints, shared_tiny_checkpoints
from demo.views.learning import MAX_NEW_TOKENS, NO_SNAPSHOTS, SAMPLED, learning_view
from model import GenerationConfig, load_pretrained
from publishing import snapshots as ship_snapshots
from storage import IN_PROGRESS_NAME, SHIPPED_SNAPSHOTS, SNAPSHOTS_DIR, read_index
from tokenization import clean_text, token_label

PROMPT = "This movie was"


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu", precision="fp32")  # exact agreement: float32


def snapshot_model(i: int):
    folder = shared_tiny_checkpoints() / "lm" / SNAPSHOTS_DIR / f"step-{TINY_SNAPSHOT_STEPS[i]:06d}"
    return load_pretrained(folder)


def test_the_served_lms_snapshots_are_found_in_step_order(service: DemoService):
    assert [e["step"] for e in service.snapshots.entries] == list(TINY_SNAPSHOT_STEPS)
    assert service.snapshots.location == f"lm/{SNAPSHOTS_DIR}" and len(service.snapshots.history) == 3


@pytest.mark.parametrize("i", range(len(TINY_SNAPSHOT_STEPS)))
def test_each_snapshot_continues_predicts_and_attends_as_its_own_weights_do(service: DemoService, i: int):
    view = learning_view(service, i, PROMPT)
    model, tok = snapshot_model(i), service.snapshots.tokenizer
    ids = [tok.bos_id, *tok.encode(PROMPT)]
    greedy = model.generate(torch.tensor([ids]), GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, temperature=0,
                                                                   eos_token_id=tok.eos_id))
    assert view.continuation == tok.decode([t for t in greedy if t != tok.eos_id])
    assert (view.index, view.step, view.tokens) == (i, TINY_SNAPSHOT_STEPS[i], TINY_SNAPSHOT_STEPS[i] * 512)
    assert view.val_loss == pytest.approx(6.0 - TINY_SNAPSHOT_STEPS[i] / 25)
    with torch.no_grad():
        probs = model(torch.tensor([ids])).logits[0, -1].softmax(-1)
    top = probs.topk(len(view.next_token))
    assert [p for _, p in view.next_token] == pytest.approx(top.values.tolist(), abs=1e-6)
    assert [t for t, _ in view.next_token] == [token_label(tok, j) for j in top.indices.tolist()]
    weights = view.attention.all_weights  # (layers, heads, T, T) over the prompt and what it wrote
    assert view.attention.layer == model.config.n_layer - 1 and weights.shape[:2] == (2, 2)
    assert weights.sum(-1) == pytest.approx(1.0, abs=1e-5)
    text = clean_text(tok.decode([*ids, *greedy]))  # the text written, read as the Attention tab reads any text
    with torch.no_grad():
        maps = model(torch.tensor([[tok.bos_id, *tok.encode(text)]]), output_attentions=True).attentions
    assert weights[-1] == pytest.approx(maps[-1].weights[0].numpy(), abs=1e-6)


def test_the_snapshots_differ_and_a_sampled_draw_is_the_same_at_every_call(service: DemoService):
    first, last = learning_view(service, 0, PROMPT), learning_view(service, len(TINY_SNAPSHOT_STEPS) - 1, PROMPT)
    assert first.next_token != last.next_token  # other weights, other predictions
    drawn = learning_view(service, 1, PROMPT, sampled=True)
    assert drawn.continuation == learning_view(service, 1, PROMPT, sampled=True).continuation
    model, tok = snapshot_model(1), service.snapshots.tokenizer
    cfg = GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, eos_token_id=tok.eos_id, num_alternatives=5, **SAMPLED)
    out = model.generate(torch.tensor([[tok.bos_id, *tok.encode(PROMPT)]]), cfg)
    assert drawn.continuation == tok.decode([t for t in out if t != tok.eos_id])


def test_out_of_range_settings_are_clamped_and_explained(service: DemoService):
    view = learning_view(service, 99, PROMPT, layer=7)
    assert view.index == len(TINY_SNAPSHOT_STEPS) - 1 and view.attention.layer == 1
    assert any("showing the nearest" in n and "snapshots" in n for n in view.notices)
    assert any("Layer 7 does not exist" in n for n in view.notices)
    assert not any("greedy" in n for n in view.notices)  # the decoding radio says so already
    with pytest.raises(DemoError, match="Type the opening"):
        learning_view(service, 0, "   ")


def test_the_tab_handler_draws_every_view_and_says_what_the_step_is(service: DemoService):
    step, text, probabilities, heatmap, curve, notice = learning_tab.learning(service, 1, PROMPT, "greedy", 0)
    assert step.startswith(f"**Step {TINY_SNAPSHOT_STEPS[1]}** (snapshot 2 of 3)") and "validation loss" in step
    assert text and len(probabilities) >= 5 and heatmap is not None and notice == ""
    marked = [trace for trace in curve.data if trace.name == f"step {TINY_SNAPSHOT_STEPS[1]}"]
    assert len(marked) == 1 and list(marked[0].x) == [TINY_SNAPSHOT_STEPS[1]]  # the current point, marked


def test_without_snapshots_the_view_says_so(tmp_path: Path):
    folder = make_tiny_checkpoints(tmp_path / "ckpt")
    shutil.rmtree(folder / "lm" / SNAPSHOTS_DIR)
    service = DemoService(folder, device="cpu")
    assert service.snapshots is None
    with pytest.raises(DemoError) as exc:
        learning_view(service, 0, PROMPT)
    assert str(exc.value) == NO_SNAPSHOTS


def test_shipped_snapshots_are_shown_when_the_lm_has_none(tmp_path: Path):
    """The Space serves a GPU-trained LM without snapshots; the laptop run's ship beside it."""
    folder = make_tiny_checkpoints(tmp_path / "ckpt")
    shipped = ship_snapshots.ship(folder / "lm", folder / SHIPPED_SNAPSHOTS / SNAPSHOTS_DIR, max_mb=30)
    shutil.rmtree(folder / "lm" / SNAPSHOTS_DIR)
    service = DemoService(folder, device="cpu")
    assert [e["step"] for e in service.snapshots.entries] == [e["step"] for e in shipped] == list(TINY_SNAPSHOT_STEPS)
    assert service.snapshots.location == f"{SHIPPED_SNAPSHOTS}/{SNAPSHOTS_DIR}"


def test_shipping_keeps_the_first_and_last_snapshots_that_fit_the_budget(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(shared_tiny_checkpoints() / "lm", run)
    one = sum(f.stat().st_size for f in (run / SNAPSHOTS_DIR / "step-000000").rglob("*") if f.is_file())
    out = tmp_path / "shipped"
    shipped = ship_snapshots.main([str(run), "--out", str(out), "--max-mb", str(2.5 * one / 1e6)])
    assert [e["step"] for e in shipped] == [TINY_SNAPSHOT_STEPS[0], TINY_SNAPSHOT_STEPS[-1]]
    index = read_index(out)
    assert index["snapshots"] == shipped and index["history"] == read_index(run / SNAPSHOTS_DIR)["history"]
    assert sorted(p.name for p in out.iterdir()) == ["index.json", "step-000000", "step-000100", "tokenizer.json"]
    (run / IN_PROGRESS_NAME).write_text(json.dumps({"command": "python -m training.run ..."}))
    with pytest.raises(ValueError, match="still being written"):
        ship_snapshots.ship(run, out, 30)


def test_across_the_run_every_snapshot_is_scored_as_its_own_weights_say(service: DemoService):
    """The "across the whole run" table: one row per snapshot, its loss on the prompt recomputed from the
    snapshot's own model, its head scores those of `inspection.head_kinds` on the page's examples."""
    from demo.text import CHAT_EXAMPLES, SENTIMENT_EXAMPLES
    from demo.views.learning import across_run
    from inspection.head_kinds import copy_loss, repeated_random, score_heads

    rows = across_run(service, PROMPT)
    assert [r.step for r in rows] == list(TINY_SNAPSHOT_STEPS)
    for i, row in enumerate(rows):
        model, tok = snapshot_model(i), service.snapshots.tokenizer
        ids = torch.tensor([[tok.bos_id, *tok.encode(PROMPT)]])
        loss = torch.nn.functional.cross_entropy(model(ids).logits[0, :-1], ids[0, 1:])
        assert row.prompt_loss == pytest.approx(float(loss), abs=1e-4)
        previous = max((s for s in score_heads(model, tok, [*CHAT_EXAMPLES, *SENTIMENT_EXAMPLES], length=30)
                        if s.kind == "previous"), key=lambda s: s.score)
        assert row.previous == previous
        first, second = copy_loss(model, repeated_random(model, 30))
        assert row.copy_gain == pytest.approx(first - second, abs=1e-5)
    table, summary = learning_tab.whole_run(service, PROMPT)
    assert len(table) == len(rows) and len(table[0]) == len(learning_tab.RUN_HEADERS)
    assert f"{rows[0].prompt_loss:.2f} to {rows[-1].prompt_loss:.2f} nats" in summary
    assert table[-1][4:6] == [f"L{rows[-1].previous.layer + 1} H{rows[-1].previous.head + 1}",
                              round(rows[-1].previous.score, 3)]


@pytest.mark.parametrize("head", [None, 3])
def test_one_head_across_the_run_is_each_snapshots_own_attention(service: DemoService, head) -> None:
    """Issue 50: a named head's attention pattern at the first, middle and last snapshots, on the prompt; by
    default the last snapshot's strongest previous-token head (scored as the whole-run table scores it), its
    shares on the previous and the start token counted here position by position."""
    from demo.text import CHAT_EXAMPLES, SENTIMENT_EXAMPLES
    from demo.views.learning import head_across_run
    from inspection.head_kinds import score_heads

    view = head_across_run(service, PROMPT, head)
    assert view.steps == list(TINY_SNAPSHOT_STEPS)  # three snapshots: all of them
    last = snapshot_model(len(TINY_SNAPSHOT_STEPS) - 1)
    if head is None:
        best = max((s for s in score_heads(last, service.snapshots.tokenizer, [*CHAT_EXAMPLES, *SENTIMENT_EXAMPLES],
                                           length=30) if s.kind == "previous"), key=lambda s: s.score)
        assert (view.layer, view.head) == (best.layer, best.head) and view.named == best
    else:  # layer × heads + head: layer 2, head 2 of the tiny model's 2 × 2
        assert (view.layer, view.head, view.named) == (1, 1, None)
    tok = service.snapshots.tokenizer
    ids = torch.tensor([[tok.bos_id, *tok.encode(PROMPT)]])
    for i, shown in enumerate(view.maps):
        with torch.no_grad():
            w = snapshot_model(i)(ids, output_attentions=True).attentions[view.layer].weights[0, view.head]
        assert shown.weights[view.head] == pytest.approx(w.numpy(), abs=1e-6) and shown.title == \
            f"Step {TINY_SNAPSHOT_STEPS[i]:,}"
        T = w.size(0)
        assert view.previous[i] == pytest.approx(sum(float(w[t, t - 1]) for t in range(2, T)) / (T - 2), abs=1e-6)
        assert view.start[i] == pytest.approx(sum(float(w[t, 0]) for t in range(1, T)) / (T - 1), abs=1e-6)
    *figures, summary = learning_tab.head_maps(service, PROMPT, -1 if head is None else head)
    assert len(figures) == learning_tab.HEAD_MAPS and all(f is not None for f in figures)
    assert " → ".join(f"{v:.2f}" for v in view.previous) + " of its attention on the previous token" in summary
    assert f"L{view.layer + 1} H{view.head + 1}" in summary and ("strongest previous-token" in summary) == (
        head is None)
    with pytest.raises(DemoError, match="longer prompt"):
        head_across_run(service, "a", head)  # one token after the start token: no previous token to read

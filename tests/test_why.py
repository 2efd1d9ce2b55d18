"""`python -m training.why`: each switch of `model.config.PARTS` removes exactly its part (checked
against an independent computation), the verdict follows its numbers, a tiny run writes the file
the tour reads, and the shipped results keep their promises (curves, verdicts, the induction head)."""

import json
import math
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

import training.why as why
from demo.views.tour.code import CodeRef, source_lines
from inspection.head_kinds import induction_scores
from inspection.trained_without import NO_CHANGE
from model import DecoderOnlyConfig, DecoderOnlyLM
from model.config import PARTS
from model.layers import FeedForward, SublayerConnection
from training import induction
from training.why_data import load_why_data

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "why"
TINY = dict(vocab_size=40, block_size=12, n_layer=2, n_head=2, d_model=16, d_ff=32, dropout=0.0)


def lm(**switches) -> DecoderOnlyLM:
    """A random tiny LM whose weights are large enough (N(0, 0.3)) for every path to move the logits."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(DecoderOnlyConfig(**TINY, **switches)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def test_without_the_causal_mask_an_early_position_reads_a_later_token():
    ids, changed = [1, 5, 7, 9, 11], [1, 5, 7, 9, 30]
    masked, unmasked = lm(), lm(causal=False)
    torch.testing.assert_close(logits(masked, ids)[0], logits(masked, changed)[0])  # the mask blocks it
    assert (logits(unmasked, ids)[0] - logits(unmasked, changed)[0]).abs().max() > 1e-3


def test_without_positions_and_mask_the_model_cannot_tell_order():
    """No positions and no mask: attention over a set, so permuting the input permutes the output."""
    model, ids = lm(positions=False, causal=False), [3, 5, 7, 9, 11, 13]
    perm = [4, 0, 5, 2, 1, 3]
    torch.testing.assert_close(logits(model, ids)[perm], logits(model, [ids[i] for i in perm]))
    assert not model.pos.pe.any()
    with_positions = lm(causal=False)
    assert not torch.allclose(logits(with_positions, ids)[perm], logits(with_positions, [ids[i] for i in perm]))


def test_without_the_scaling_the_scores_are_raw_dot_products():
    for switches, divisor in (({}, math.sqrt(8)), ({"scale_scores": False}, 1.0)):
        model = lm(**switches)
        q, k, scores = (f"decoder.layers.0.self_attn.hook_{p}" for p in ("q", "k", "scores"))
        with torch.no_grad(), model.hooks(read=[q, k, scores]) as s:
            model(torch.tensor([[1, 4, 6, 8]]))
        expected = s[q] @ s[k].transpose(-2, -1) / divisor  # d_k = 16 / 2
        torch.testing.assert_close(s[scores], expected)


def test_without_the_residual_the_sublayer_output_is_all_that_is_left():
    x = torch.randn(2, 3, 16)
    for residual, expected in ((True, x), (False, torch.zeros_like(x))):  # a sublayer that writes nothing
        config = DecoderOnlyConfig(**TINY, residual=residual)
        torch.testing.assert_close(SublayerConnection(config)(x, torch.zeros_like), expected)


def test_without_layer_norm_or_feed_forward_the_modules_are_gone():
    full, no_norm, no_ffn = lm(), lm(layer_norm=False), lm(feed_forward=False)
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in full.modules()) == 2 * 2 + 1
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in no_norm.modules())
    assert not any(isinstance(m, FeedForward) for m in no_ffn.modules())
    d, ff = 16, 32
    per_layer = (d * ff + ff) + (ff * d + d) + 2 * d  # w_1, w_2, and the norm of the ffn sublayer
    assert full.num_parameters() - no_ffn.num_parameters() == 2 * per_layer


def test_without_the_embedding_scale_tokens_are_the_raw_table():
    model, ids = lm(embed_scale=False), torch.tensor([[3, 4]])
    torch.testing.assert_close(model.embed(ids), model.embed.lut.weight[ids])
    torch.testing.assert_close(lm().embed(ids), lm().embed.lut.weight[ids] * 4.0)  # √16


def test_parts_off_names_what_a_config_lacks():
    assert DecoderOnlyConfig(**TINY).parts_off == ()
    assert DecoderOnlyConfig(**TINY, residual=False, causal=False).parts_off == ("causal", "residual")
    assert set(PARTS) <= {f for part in why.PARTS.values() for f in part.without} | {"embed_scale", "positions"}


@pytest.mark.parametrize("final,spread,expected", [
    ({"with": 5.0, "without": 5.2}, {"with": 0.05, "without": 0.1}, "worse"),
    ({"with": 5.0, "without": 5.1}, {"with": 0.05, "without": 0.1}, "within the seeds' spread"),
    ({"with": 5.0, "without": 4.8}, {"with": 0.05, "without": 0.1}, "better"),
    ({"with": 5.0, "without": 5.008}, {"with": 0.0, "without": 0.0}, "within the seeds' spread"),
    ({"with": 5.0, "without": 5.02}, {"with": 0.0, "without": 0.0}, "worse"),
])
def test_the_verdict_needs_a_difference_beyond_both_spreads(final, spread, expected):
    assert why.verdict(final, spread) == expected


# what the line each part shows must hold: the switch, or the computation it removes
SHOWS = {"positions": "config.positions", "embed_scale": "config.embed_scale", "scale_scores": "1 / math.sqrt",
         "causal": "is_causal=self.causal", "heads": "self.n_head", "residual": "if self.residual",
         "layer_norm": "if config.layer_norm", "feed_forward": "if self.feed_forward is not None",
         "depth": "for i, layer in enumerate(self.layers)"}


@pytest.mark.parametrize("name", list(why.PARTS))
def test_each_part_names_the_line_its_switch_changes(name):
    part = why.PARTS[name]
    lines = source_lines(CodeRef(part.code["target"], part.code["start"], part.code.get("end")))
    assert lines.path.startswith("model/") and SHOWS[name] in "\n".join(lines.lines)


def test_an_unknown_part_is_one_line_that_lists_the_parts():
    r = subprocess.run([sys.executable, "-m", "training.why", "--part", "attention"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert all(name in r.stderr for name in why.PARTS)


@pytest.fixture
def small_data(monkeypatch):
    """A tiny run: 60 training reviews, 40 held out, a 2-layer 16-wide model on 16-token windows."""
    monkeypatch.setattr(why, "load_why_data", partial(load_why_data, n_train=60, n_val=40))
    monkeypatch.setattr(why, "BASE", {**why.BASE, "block_size": 16, "n_layer": 2, "d_model": 16, "d_ff": 32})
    monkeypatch.setattr(why, "BATCH", 4)


@pytest.mark.needs_imdb
@pytest.mark.parametrize("name", ["residual", "causal"])
def test_a_tiny_run_writes_what_the_tour_reads(tmp_path, small_data, name):
    result = why.run(name, steps=15, seeds=2, out=tmp_path / name, minutes=None, command="test", log=lambda s: None)
    written = json.loads((tmp_path / name / "why.json").read_text(encoding="utf-8"))
    assert written == result
    assert set(written["curves"]) == {"with", "without"} and len(written["curves"]["with"]) == why.EVALS + 1
    assert written["curves"]["with"][0][0] == 0 and written["curves"]["with"][-1][0] == 15
    assert written["verdict"] == why.verdict(written["final"], written["spread"])
    assert written["samples"]["with"].startswith(why.PROMPT)
    if name == "causal":  # its curve is the loss as it generates: the measure's second reading
        trained, generated = written["measure"]["without"]
        assert generated == pytest.approx(written["final"]["without"], abs=0.02) and trained <= generated + 1e-3


@pytest.mark.needs_imdb
def test_the_depth_run_writes_both_induction_models(tmp_path, small_data):
    why.run("depth", steps=15, seeds=1, out=tmp_path / "depth", minutes=None, command="test", log=lambda s: None)
    written = json.loads((tmp_path / "induction" / "induction.json").read_text(encoding="utf-8"))
    assert [m["label"] for m in written["moments"]] == ["before", "during", "after"]
    for name, layers in (("2layer", 2), ("1layer", 1)):
        model = DecoderOnlyLM.from_pretrained(tmp_path / f"induction-{name}")
        assert model.config.n_layer == layers
        best = written["best_head"][name]
        assert float(induction.scores(model).max()) == pytest.approx(best["score"], abs=1e-4)


SHIPPED_PARTS = sorted(p.parent.name for p in SHIPPED.glob("*/why.json"))


def test_at_least_eight_parts_are_shipped():
    assert len(SHIPPED_PARTS) >= 8, SHIPPED_PARTS


@pytest.mark.parametrize("name", SHIPPED_PARTS)
def test_each_shipped_verdict_agrees_with_its_numbers(name):
    w = json.loads((SHIPPED / name / "why.json").read_text(encoding="utf-8"))
    assert w["part"] == name and w["command"].startswith("python -m training.why --part " + name)
    assert all(len(w["curves"][arm]) >= 10 for arm in ("with", "without"))
    diff = w["final"]["without"] - w["final"]["with"]
    margin = max(w["spread"]["with"] + w["spread"]["without"], NO_CHANGE)
    assert w["verdict"] == ("worse" if diff > margin else "better" if diff < -margin else "within the seeds' spread")
    assert f"{w['final']['with']:.3f}" in w["summary"] and f"{w['final']['without']:.3f}" in w["summary"]
    assert w["tour_step"] == why.PARTS[name].tour_step
    if name == "causal":  # seeing the next token, it learned to copy it: far better as it trained than as it writes
        trained, generated = w["measure"]["without"]
        assert trained < generated - 1.0


def test_the_shipped_induction_models_form_a_head_in_two_layers_only():
    two = DecoderOnlyLM.from_pretrained(SHIPPED / "induction-2layer")
    one = DecoderOnlyLM.from_pretrained(SHIPPED / "induction-1layer")
    assert float(induction.scores(two).max()) >= 0.4  # a random sequence of `induction.LENGTH` shown twice
    assert float(induction.scores(one).max()) < 0.2
    for seed in (1, 2):  # on other random sequences of that length too
        assert float(induction_scores(two, induction.LENGTH, seed).max()) >= 0.4
        assert float(induction_scores(one, induction.LENGTH, seed).max()) < 0.2
    sizes = sum(f.stat().st_size for f in SHIPPED.rglob("*") if f.is_file())
    assert sizes <= 15 * 2**20

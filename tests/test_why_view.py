"""Issue 60's display: the tour's "Trained without it" (`demo.views.why`, `demo.tabs.why_panel`), the `/tour`
API's `trained_without`, and "Watch an induction head form" (`demo.views.induction`,
`demo.tabs.induction_panel`), against the fixture in tests/data/why/ (the schema `python -m training.why`
writes), and against the shipped checkpoints/why/ where it exists. Every sentence is checked against
the numbers beside it: the same numbers changed, the sentence follows."""

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from demo.serving import DemoService
from demo.tabs import induction_panel, why_panel
from demo.tabs import tour as tour_tab
from demo.tiny import REPO_ROOT, shared_tiny_checkpoints
from demo.views import induction, tour, why
from inspection.trained_without import BETTER, WITHIN, WORSE, verdict

FIXTURE = Path(__file__).parent / "data" / "why"
SHIPPED = REPO_ROOT / "checkpoints" / "why"
STEPS = {"positions": "position", "embed_scale": "embedding", "scale_scores": "scaling", "causal": "mask",
         "heads": "heads", "residual": "residual", "layer_norm": "norm", "feed_forward": "ffn", "depth": "stack"}
PHRASE = {WORSE: "the model ends worse", BETTER: "the held-out loss ends lower",
          WITHIN: "this part does not matter"}


def fixture_runs() -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text(encoding="utf-8")) for p in FIXTURE.glob("*/why.json")}


@pytest.fixture
def fixture_root(monkeypatch) -> Path:
    monkeypatch.setattr(why, "ROOT", FIXTURE)
    return FIXTURE


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def write_run(root: Path, run: dict) -> None:
    (root / run["part"]).mkdir(parents=True, exist_ok=True)
    (root / run["part"] / why.RUN_FILE).write_text(json.dumps(run), encoding="utf-8")


# -- the verdict ------------------------------------------------------------------------------------


@pytest.mark.parametrize("without, expected", [(5.10, WORSE), (5.071, WORSE), (5.069, WITHIN),
                                               (4.931, WITHIN), (4.929, BETTER)])
def test_the_verdict_is_worse_or_better_only_past_both_spreads(without: float, expected: str) -> None:
    assert verdict({"with": 5.0, "without": without}, {"with": 0.02, "without": 0.05}) == expected


@pytest.mark.parametrize("root", [FIXTURE, SHIPPED], ids=["fixture", "shipped"])
def test_every_runs_verdict_agrees_with_its_numbers_and_its_line_is_found(root: Path) -> None:
    if not root.is_dir():
        pytest.skip(f"no {root.relative_to(REPO_ROOT)} yet")
    runs = why.runs(root)
    assert len(runs) >= 7 and set(runs) <= set(STEPS.values())  # issue 60: at least 7 LM steps carry a run
    for step, run in runs.items():
        assert run["verdict"] == verdict(run["final"], run["spread"]), step
        assert all(len(run["curves"][arm]) >= 10 for arm in why.ARMS), step
        view = why.why_view(run)
        assert view.code is not None and view.code.path.startswith("model/"), step


# -- the section's words and pictures -----------------------------------------------------------------


def section_of(service: DemoService, key: str):
    t = tour.tour(service, "This movie was", "lm")
    return why_panel.section(t, [s.key for s in t.steps].index(key))


@pytest.mark.parametrize("part", sorted(STEPS))
def test_the_section_shows_each_runs_numbers_and_the_verdict_they_give(service, fixture_root, part: str) -> None:
    run = fixture_runs()[part]
    box, words, curves, measure, details = section_of(service, STEPS[part])
    assert box["visible"] and words.startswith("### Trained without it")
    final, spread = run["final"], run["spread"]
    for value in (final["with"], final["without"], spread["with"], spread["without"]):
        assert f"{value:.3f}" in words
    assert f"{abs(final['without'] - final['with']):.3f}" in words
    assert PHRASE[run["verdict"]] in words
    if run["verdict"] == WITHIN:  # said plainly, with the scale it holds at
        shape = run["shape"]
        assert (f"**At this scale ({shape['n_layer']} layers, {shape['n_head']} heads, width {shape['d_model']}, "
                f"{run['steps']:,} steps) this part does not matter.**") in words
    assert [PHRASE[v] in words for v in PHRASE].count(True) == 1
    assert [trace.name for trace in curves.data] == ["with it", "without it"]
    for trace, arm in zip(curves.data, why.ARMS, strict=True):
        assert [list(p) for p in zip(trace.x, trace.y, strict=True)] == run["curves"][arm]
    m = run["measure"]
    if isinstance(m["with"], list):  # one pair of bars per label, each bar's value written on it
        assert measure["visible"]
        bars = measure["value"].data
        assert [list(b.y) for b in bars] == [m["with"], m["without"]] and list(bars[0].x) == m["labels"]
    else:  # two numbers: in the words, no picture
        assert measure == {"__type__": "update", "value": None, "visible": False}
        assert f"{why.number(m['with'])} with it, {why.number(m['without'])} without" in details
    assert m["about"] in details and run["command"] in details
    assert run["samples"]["with"] in details and run["samples"]["without"] in details
    code = why.why_view(run).code
    path, line = (REPO_ROOT / code.path), code.first_line  # the line shown is the file's line
    assert f"`{code.path}:{line}`" in details
    assert path.read_text(encoding="utf-8").splitlines()[line - 1].strip() in details


def test_the_words_follow_the_numbers_not_the_shipped_verdict(service, tmp_path, monkeypatch) -> None:
    """The residual run with its without-arm's final moved into the spread: the section says the part
    does not matter here (though the file still says "worse"); moved below: lower."""
    run = fixture_runs()["residual"]
    monkeypatch.setattr(why, "ROOT", tmp_path)
    for without, phrase in ((5.25, WITHIN), (5.0, BETTER)):
        changed = copy.deepcopy(run)
        changed["final"]["without"] = without
        root = tmp_path / str(without)
        write_run(root, changed)
        monkeypatch.setattr(why, "ROOT", root)
        words = section_of(service, "residual")[1]
        assert PHRASE[phrase] in words and f"{without:.3f}" in words and PHRASE[WORSE] not in words


def test_a_worse_arm_that_catches_up_says_at_which_step(service, tmp_path, monkeypatch) -> None:
    run = copy.deepcopy(fixture_runs()["residual"])
    run["final"]["without"] = 5.4
    curve = run["curves"]["without"]
    curve[7][1] = run["final"]["with"] - 0.01  # at or below the with-arm's final loss from this point
    write_run(tmp_path, run)
    monkeypatch.setattr(why, "ROOT", tmp_path)
    words = section_of(service, "residual")[1]
    assert f"first gets down to the with-arm's final loss at step {curve[7][0]:,}" in words
    assert "never gets down" not in words


def test_the_section_is_hidden_without_a_run(service, fixture_root) -> None:
    t = tour.tour(service, "This movie was", "lm")
    shown = [s.key for i, s in enumerate(t.steps) if why_panel.section(t, i)[0]["visible"]]
    assert shown == [s.key for s in t.steps if s.key in set(STEPS.values())]
    sentiment = tour.tour(service, "A fine film.", "sentiment")  # its scaling step is the classifier's
    assert not any(why_panel.section(sentiment, i)[0]["visible"] for i in range(len(sentiment.steps)))
    assert why_panel.section(None, 3)[0] == {"__type__": "update", "visible": False}


def test_no_runs_shipped_and_broken_files_leave_the_tour_as_it_was(service, tmp_path, monkeypatch, caplog) -> None:
    run = fixture_runs()["residual"]
    write_run(tmp_path, {k: v for k, v in run.items() if k != "final"})  # a key missing
    write_run(tmp_path, {**run, "part": "depth", "tour_step": "stack", "spread": {"with": 0.1}})  # a spread missing
    (tmp_path / "positions").mkdir()
    (tmp_path / "positions" / why.RUN_FILE).write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(why, "ROOT", tmp_path)
    assert why.runs() == {} and "no final" in caplog.text and "'without'" in caplog.text
    write_run(tmp_path / "two", run)
    write_run(tmp_path / "two", {**run, "part": "zresidual"})  # a second run for the same step
    assert why.runs(tmp_path / "two")["residual"]["part"] == "residual" and "shows residual's run" in caplog.text
    t = tour.tour(service, "This movie was", "lm")
    assert not any("trained_without" in s for s in tour.tour_json(t)["steps"])
    monkeypatch.setattr(why, "ROOT", tmp_path / "nothing")
    assert why.runs() == {} and why.trained_without("residual") is None


# -- the API ------------------------------------------------------------------------------------------


def keys(value) -> set[str]:
    """Every key of every dict inside `value`."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    return {k for v in value for k in keys(v)} if isinstance(value, list) else set()


def test_the_tour_api_carries_each_runs_why_json_on_its_step(service, fixture_root) -> None:
    t = tour.tour(service, "This movie was", "lm")
    data = tour.tour_json(t)
    runs = {STEPS[part]: run for part, run in fixture_runs().items()}
    for step, out in zip(t.steps, data["steps"], strict=True):
        assert out.get("trained_without") == runs.get(step.key), step.key
    assert sum("trained_without" in s for s in data["steps"]) == len(runs) >= 7
    json.dumps(data)  # as the API sends it
    api = tour_tab.run(service, "This movie was", "lm", 0, 0, False)[1]  # the `/tour` route's own output
    assert [s.get("trained_without") for s in api["steps"]] == [s.get("trained_without") for s in data["steps"]]
    assert "path" not in keys(data)  # gradio_client would take a dict with a "path" for a file to download
    sentiment = tour.tour_json(tour.tour(service, "A fine film.", "sentiment"))
    assert not any("trained_without" in s for s in sentiment["steps"])


# -- watch an induction head form -------------------------------------------------------------------


def induction_share_by_hand(weights: list[list[float]]) -> float:
    """Olsson et al.'s stripe, by loops: from each second-copy token with a successor in the first copy,
    the weight on that successor."""
    n = (len(weights) - 1) // 2
    cells = [weights[q][q - n + 1] for q in range(n + 1, 2 * n)]
    return sum(cells) / len(cells)


def test_the_induction_panel_draws_the_run_and_says_what_it_shows(fixture_root) -> None:
    run = json.loads((FIXTURE / "induction" / "induction.json").read_text(encoding="utf-8"))
    about, loss, score, *maps, summary, code = induction_panel.draw()
    assert run["command"] in about and run["data"] in about and "layer 2, head 3" in about
    for figure, key in ((loss, "repeat_loss"), (score, "induction")):
        for trace, model in zip(figure.data, induction.MODELS, strict=False):
            assert [list(p) for p in zip(trace.x, trace.y, strict=True)] == run["curves"][model][key]
    assert list(score.data[-1].y) == [0.3, 0.3]  # the threshold where the app names a head
    assert len(maps) == 3
    for figure, moment in zip(maps, run["moments"], strict=True):
        w = np.array(moment["weights"])  # drawn on the square-root scale, the future blank
        np.testing.assert_allclose(np.array(figure.data[0].z, dtype=float),
                                   np.where(np.triu(np.ones_like(w, dtype=bool), 1), np.nan, np.sqrt(w)))
        assert f"Step {moment['step']:,}: {moment['label']} the drop" in figure.layout.title.text
        assert "2 layers: layer 2, head 3" in figure.layout.title.text
        share = induction_share_by_hand(moment["weights"])
        assert f"{share:.2f} at step {moment['step']:,} ({moment['label']} the drop)" in summary
    two, one = run["curves"]["2layer"], run["curves"]["1layer"]
    assert f"scores {two['induction'][0][1]:.2f} at step 0 and {run['final']['2layer']:.2f} at the end" in summary
    named = next(s for s, v in two["induction"] if v >= 0.3)
    assert f"first reaches 0.30, where this app names an induction head, at step {named:,}" in summary
    assert f"ends at {run['final']['1layer']:.2f} and never reaches it" in summary
    falls = [(a[0], b[0], a[1] - b[1]) for a, b in zip(two["repeat_loss"], two["repeat_loss"][1:], strict=False)]
    a, b, fall = max(falls, key=lambda f: f[2])
    assert f"the steepest fall, {fall:.2f}, between steps {a:,} and {b:,}" in summary
    assert f"from {one['repeat_loss'][0][1]:.2f} to {one['repeat_loss'][-1][1]:.2f} with 1 layer" in summary
    for ref in induction.COMPOSITION:  # the lines of model/ that make composition possible, from the files
        lines = induction.source_lines(ref)
        assert f"`{lines.path}:{lines.first_line}" in code and lines.lines[0].strip() in code
    assert "x = layer(" in code and "kept + " in code and "self.in_proj(x)" in code


def test_a_map_of_another_shape_is_drawn_without_a_share(tmp_path, monkeypatch) -> None:
    run = json.loads((FIXTURE / "induction" / "induction.json").read_text(encoding="utf-8"))
    for m in run["moments"]:
        m["tokens"] = [*m["tokens"][:-1], "other"]  # not one sequence shown twice
    (tmp_path / "induction").mkdir()
    (tmp_path / "induction" / "induction.json").write_text(json.dumps(run), encoding="utf-8")
    monkeypatch.setattr(why, "ROOT", tmp_path)
    view = induction.induction_view()
    assert view.shares == [None] * 3 and "In the maps" not in view.summary and len(view.maps) == 3
    monkeypatch.setattr(why, "ROOT", tmp_path / "nothing")
    assert induction_panel.draw()[0] == f"**{induction.NO_RUN}**"
    del run["best_head"]  # not what the panel reads: one line, no figure
    broken = tmp_path / "broken"
    (broken / "induction").mkdir(parents=True)
    (broken / "induction" / "induction.json").write_text(json.dumps(run), encoding="utf-8")
    monkeypatch.setattr(why, "ROOT", broken)
    out = induction_panel.draw()
    assert out[0].startswith("⚠️") and out[1:6] == (None,) * 5


def test_the_shipped_induction_run_forms_a_head_with_two_layers_only() -> None:
    """Issue 60's bar, checked on what is shipped: the 2-layer model's best head ≥ 0.4, the 1-layer's < 0.2."""
    run = induction.induction_run(SHIPPED)
    if run is None:
        pytest.skip("no checkpoints/why/induction yet")
    assert run["final"]["2layer"] >= 0.4 > 0.2 > run["final"]["1layer"]
    assert [m["label"] for m in run["moments"]] == ["before", "during", "after"]
    assert all(math.isfinite(s) for s in induction.induction_view(SHIPPED).shares if s is not None)

"""The page header and the About tab: which models run where, their size, data and metrics."""

import base64
import json
from pathlib import Path

import gradio as gr

from demo import plots
from demo.checkpoint import LM, SENTIMENT, Checkpoint
from demo.inference import DemoService
from demo.inputs import scrub_paths
from demo.text import DATA_LINES, HEADER, MODEL_TITLES, RETRAINING, SHORT_TITLES

HIDDEN_METRICS = {"history", "model_config", "train_config", "samples", "data"}  # shown otherwise, or too long
MAX_METRIC_CHARS = 120
CALIBRATION_RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "calibration.json"


def _fmt(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _short_params(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"


def _score(metrics: dict) -> str:
    if "val_ppl" in metrics:
        return f", val ppl {_fmt(metrics['val_ppl'])}"
    if "val_accuracy" in metrics:
        return f", val acc {_fmt(metrics['val_accuracy'])}"
    return ""


def header_markdown(service: DemoService) -> str:
    """Which device and checkpoints are in use, with a warning for missing or untrained ones."""
    parts = [f"**Device:** {service.device_description()}, {service.precision} for the batched passes"]
    for ckpt in service.checkpoints:
        title = SHORT_TITLES[ckpt.name][0]
        if ckpt.ready:
            parts.append(f"**{title}:** `{ckpt.location}` ({_short_params(ckpt.parameters)} params"
                         f"{_score(ckpt.metrics)})")
        else:
            parts.append(f"**{title}:** not loaded")
    warnings = list(service.notices)
    warnings += [f"{SHORT_TITLES[c.name][1]}: {c.message}." for c in service.checkpoints if c.message]
    return "\n".join([HEADER, " · ".join(parts), ""] + [f"> ⚠️ {w}" for w in warnings])


def metric_rows(metrics: dict) -> list[tuple[str, str]]:
    """(name, value) rows for whatever metrics.json holds: scalars as they are, one level of a
    nested dict flattened (`tokenizer.vocab_size`), short lists inline, long ones counted.
    Absolute paths are shortened (see `scrub_paths`)."""
    rows = []
    for key, value in metrics.items():
        if key in HIDDEN_METRICS:
            continue
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            name = f"{key}.{sub}" if sub is not None else str(key)
            text = _fmt(v) if isinstance(v, (int, float, str)) else json.dumps(v, ensure_ascii=False)
            if len(text) > MAX_METRIC_CHARS:
                text = f"({len(v)} entries)" if isinstance(v, (list, dict)) else text[:MAX_METRIC_CHARS] + "…"
            rows.append((name, scrub_paths(text)))
    return rows


def _lm_architecture(c: dict) -> str:
    return (f"{c.get('n_layer')} layers, {c.get('n_head')} heads, d_model {c.get('d_model')}, "
            f"context {c.get('block_size')} tokens, vocabulary {c.get('vocab_size')}")


def _sentiment_architecture(c: dict) -> str:
    tail = c.get("src_keep_tail") or 0
    tail_note = f" (a longer review: its start and its last {tail})" if tail else ""
    return (f"{c.get('n_encoder_layer')} encoder + {c.get('n_decoder_layer')} decoder layers, "
            f"{c.get('n_head')} heads, d_model {c.get('d_model')}, reads up to {c.get('max_src_len')} "
            f"tokens{tail_note}, labels {', '.join(c.get('labels') or [])}")


ARCHITECTURES = {LM: _lm_architecture, SENTIMENT: _sentiment_architecture}


def _data_line(ckpt: Checkpoint) -> str:
    default = DATA_LINES[ckpt.name]
    data = ckpt.metrics.get("data") or ckpt.metrics.get("dataset")
    if isinstance(data, dict):
        details = ", ".join(f"{k.replace('_', ' ')}: {_fmt(v)}" for k, v in data.items()
                            if isinstance(v, (int, float, str)))
        return f"{default} ({scrub_paths(details)})" if details else default
    return f"{default} ({scrub_paths(_fmt(data))})" if data else default


def _table_cell(text: str, code: bool = False) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return f"`{text.replace('`', 'ʼ')}`" if code else text


def checkpoint_markdown(ckpt: Checkpoint) -> str:
    """One model's section: size, architecture, data, metrics and samples."""
    lines = [f"## {MODEL_TITLES[ckpt.name]}", ""]
    if not ckpt.ready:
        return "\n".join(lines + [f"⚠️ Not loaded: {ckpt.message}."])
    lines += [f"- **Checkpoint:** `{ckpt.location}`",
              f"- **Parameters:** {ckpt.parameters:,}",
              f"- **Architecture:** {ARCHITECTURES[ckpt.name](ckpt.config)}",
              f"- **Data:** {_data_line(ckpt)}",
              ""]
    if ckpt.message:
        lines += [f"⚠️ {ckpt.message}.", ""]
    rows = metric_rows(ckpt.metrics)
    if rows:
        lines += ["| metric | value |", "| --- | --- |"]
        lines += [f"| {_table_cell(k)} | {_table_cell(v, code=k == 'command')} |" for k, v in rows]
    samples = ckpt.metrics.get("samples")
    if isinstance(samples, list) and samples:
        lines += ["", "**Samples written at the end of training:**", ""]
        for sample in samples[:5]:  # model output: shown as code, never rendered as Markdown
            lines += ["```text", str(sample).replace("```", "ʼʼʼ"), "```"]
    return "\n".join(lines)


def about_markdown(service: DemoService) -> str:
    """Each model's size, architecture, data and metrics (whatever metrics.json holds)."""
    sections = [checkpoint_markdown(ckpt) for ckpt in service.checkpoints]
    return "\n\n".join(sections + [RETRAINING.format(device=service.device_description())])


def curve_html(ckpt: Checkpoint) -> str:
    """The training curve inlined as a data URI: nothing from disk is served to the browser."""
    if not ckpt.training_curve_png:
        return ""
    data = base64.b64encode(ckpt.training_curve_png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="training curve of the {ckpt.name} model" '
            f'style="max-width:640px;width:100%"><figcaption>Training curve: {ckpt.name}</figcaption></figure>')


def read_calibration(path: Path = CALIBRATION_RESULTS) -> dict | None:
    """`python -m benchmarks.calibration`'s result, or None when it has not been run (a Space)."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        return result if all(key in result for key in ("before", "after", "bins", "measured_on")) else None
    except (OSError, ValueError):
        return None


def build(service: DemoService) -> None:
    gr.Markdown(about_markdown(service), elem_id="about")
    calibration = read_calibration()
    if calibration:  # the probabilities the app shows, against how often they are right
        gr.Plot(plots.reliability_figure(calibration), label="Calibration (python -m benchmarks.calibration)",
                elem_id="about-reliability")
    for ckpt in service.checkpoints:
        if ckpt.training_curve_png:
            gr.HTML(curve_html(ckpt))

"""The page header and the About tab. The header and the top of About speak to learners: what each
model is and does, its size and how good it is, in words. Everything a developer needs (the device
and precision, checkpoint paths, every metric of metrics.json, the commands that retrain the models
and measure the figures the app shows) sits in About's "For developers" section, closed."""

import base64
import json
import math
from dataclasses import asdict
from pathlib import Path

import gradio as gr

from demo import plots
from demo.serving import LM, SENTIMENT, SENTIMENT_BACKWARD, Checkpoint, DemoService, scrub_paths
from demo.text import DATA_LINES, DEVELOPERS, MODEL_TITLES, SHORT_TITLES, USES, header, held_out_words, own_text
from storage import chain

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


def _score(metrics: dict) -> str:
    """How good the model is, in words a learner can picture: a language model of its own text in bits per
    byte (its tokenizer is its own: a perplexity would not compare with any other model's)."""
    name = own_text(metrics)
    if name and isinstance(metrics.get("val_bpb"), int | float):
        return (f"on the part of `{name}` held out of its training it needs {metrics['val_bpb']:.3f} bits per byte "
                "of text (the fewer, the better it predicts; 8 would be a blind guess among all 256 byte values)")
    if "val_ppl" in metrics and isinstance(metrics["val_ppl"], int | float):
        ppl = metrics["val_ppl"]
        return (f"on reviews it never trained on, its perplexity is {_fmt(ppl)}: at each token it is, on average, "
                f"as unsure as a pick among {ppl:.0f} equally likely tokens")
    if "val_accuracy" in metrics and isinstance(metrics["val_accuracy"], int | float):
        return f"right on {metrics['val_accuracy']:.1%} of the reviews held out of its training"
    return ""


def _training(metrics: dict) -> str:
    """How much text the model read while it learned, its ancestors' runs included (a fine-tuned or
    continued model records what it started from: `storage.lineage`)."""
    if not isinstance(metrics.get("tokens_seen"), int):
        return ""
    own = f"{metrics['tokens_seen'] / 1e6:.1f} M"
    name = own_text(metrics)
    what = f"of `{name}`" if name else "of reviews"
    earlier = [r["tokens_seen"] for r in reversed(chain(metrics)) if isinstance(r.get("tokens_seen"), int)]
    if not earlier:
        return f"it read {own} tokens {what} while it learned"
    whose = "the model it started from" if len(earlier) == 1 else "the models it started from"
    return (f"it read {(metrics['tokens_seen'] + sum(earlier)) / 1e6:.1f} M tokens {what} while it learned: "
            f"{', then '.join(f'{t / 1e6:.1f} M' for t in earlier)} as {whose}, then {own} in its own run")


def header_markdown(service: DemoService) -> str:
    """What the two models are and do, in plain words, with a warning for a missing or untrained one."""
    warnings = list(service.notices)
    warnings += [f"{SHORT_TITLES[c.name]}: {c.message}." for c in service.checkpoints if c.message]
    return "\n".join([header(service.lm.metrics), ""] + [f"> ⚠️ {w}" for w in warnings])


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
    return (f"{c.get('n_layer')} layers of {c.get('n_head')} attention heads; each token is a vector of "
            f"{c.get('d_model')} numbers (d_model); reads up to {c.get('block_size')} tokens at a time; "
            f"a vocabulary of {_fmt(c.get('vocab_size'))} tokens")


def _sentiment_architecture(c: dict) -> str:
    tail = c.get("src_keep_tail") or 0
    cut = f"its start and its last {tail} first, then the middle" if tail else "its start, then the rest"
    tail_note = f" at once (a longer review: {cut} in windows of its own, the scores averaged)"
    order = " from its last token to its first" if c.get("reverse") else ""
    return (f"an encoder of {c.get('n_encoder_layer')} layers reads the review{order}, a decoder of "
            f"{c.get('n_decoder_layer')} layer writes the label; {c.get('n_head')} attention heads a layer; each "
            f"token is a vector of {c.get('d_model')} numbers (d_model); reads up to {c.get('max_src_len')} "
            f"tokens{tail_note}; labels {', '.join(c.get('labels') or [])}")


ARCHITECTURES = {LM: _lm_architecture, SENTIMENT: _sentiment_architecture, SENTIMENT_BACKWARD: _sentiment_architecture}


def _data_line(ckpt: Checkpoint) -> str:
    """The data in words, with its counts (where it was read from is for developers)."""
    default = DATA_LINES[ckpt.name]
    data = ckpt.metrics.get("data") or ckpt.metrics.get("dataset")
    if isinstance(data, dict) and data.get("kind") == "data":  # `training.run --data`: not IMDB
        default = f"Its own text, `{Path(data['source']).name}`"
    if isinstance(data, dict):
        details = ", ".join(f"{k.replace('_', ' ')}: {_fmt(v)}" for k, v in data.items()
                            if isinstance(v, int | float) and not isinstance(v, bool))
        return f"{default} ({details})" if details else default
    return default


def _table_cell(text: str, code: bool = False) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return f"`{text.replace('`', 'ʼ')}`" if code else text


def _facts(ckpt: Checkpoint) -> dict:
    """The architecture (config.json) and, for a classifier, how it reads (classifier.json), in one dict."""
    return {**ckpt.config, **(asdict(ckpt.classifier) if ckpt.classifier is not None else {})}


def checkpoint_markdown(ckpt: Checkpoint, note: str = "") -> str:
    """One model for learners: what it does (after `note`, a line under its title), its size and shape, its
    data and how good it is."""
    name = own_text(ckpt.metrics) if ckpt.name == LM else None
    uses = f"Continues a text like `{name}` that you start, one token at a time (the **Chat** tab)." if name else \
        USES[ckpt.name]
    lines = [f"## {MODEL_TITLES[ckpt.name]}", "", *([note, ""] if note else []), uses, ""]
    if not ckpt.ready:
        return "\n".join(lines + [f"⚠️ Not loaded: {ckpt.message}."])
    facts = [("Size", f"{ckpt.parameters:,} parameters (numbers learned in training)"),
             ("Shape", ARCHITECTURES[ckpt.name](_facts(ckpt))), ("Data", _data_line(ckpt)),
             ("Training", _training(ckpt.metrics)), ("How good", _score(ckpt.metrics))]
    lines += [f"- **{name}:** {text}" for name, text in facts if text] + [""]
    if ckpt.message:
        lines += [f"⚠️ {ckpt.message}.", ""]
    samples = ckpt.metrics.get("samples")
    if isinstance(samples, list) and samples:
        lines += ["", "**Written by the model at the end of its training:**", ""]
        for sample in samples[:5]:  # model output: shown as code, never rendered as Markdown
            lines += ["```text", str(sample).replace("```", "ʼʼʼ"), "```"]
    return "\n".join(lines)


def developer_markdown(ckpt: Checkpoint) -> str:
    """One model for developers: where its checkpoint is and every metric its training wrote."""
    lines = [f"### {MODEL_TITLES[ckpt.name]}", ""]
    if not ckpt.ready:
        return "\n".join(lines + [f"Not loaded: {ckpt.message}."])
    lines += [f"- **Checkpoint:** `{ckpt.location}`", ""]
    rows = metric_rows(ckpt.metrics)
    if rows:
        lines += ["| metric | value |", "| --- | --- |"]
        lines += [f"| {_table_cell(k)} | {_table_cell(v, code=k == 'command')} |" for k, v in rows]
    return "\n".join(lines)


def about_markdown(service: DemoService) -> str:
    """What each model is, for learners; beside a language model of its own text, the sentiment models are
    labelled as the IMDb classifier they are."""
    name = own_text(service.lm.metrics)
    apart = f"*Apart from the language model of `{name}`: the app's IMDb classifier, not trained on your text.*"
    return "\n\n".join(checkpoint_markdown(ckpt, apart if name and ckpt.name != LM else "")
                         for ckpt in service.checkpoints)


def developers_markdown(service: DemoService) -> str:
    """The device, the checkpoints' metrics and the commands behind the app's figures."""
    sections = [developer_markdown(ckpt) for ckpt in service.checkpoints]
    return "\n\n".join([DEVELOPERS.format(device=service.device_description(), precision=service.precision)]
                         + sections)


def curve_html(ckpt: Checkpoint) -> str:
    """The training curve inlined as a data URI: nothing from disk is served to the browser."""
    if not ckpt.training_curve_png:
        return ""
    data = base64.b64encode(ckpt.training_curve_png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="training curve of the {ckpt.name} model" '
            f'style="max-width:640px;width:100%"><figcaption>Training curve: {SHORT_TITLES[ckpt.name].lower()} '
            f"(the picture's own title names the run's task and preset)</figcaption></figure>")


def curve_caption(ckpt: Checkpoint) -> str:
    """What the training curve shows, in words: which model, and why its two losses differ where the
    run's recipe makes them (label smoothing, dropout, cropped reviews are in the training loss only)."""
    metrics, config = ckpt.metrics, ckpt.config or {}
    history = metrics.get("history") or []
    last = history[-1] if history else {}
    steps = _fmt(metrics.get("steps", last.get("step")))
    title = MODEL_TITLES[ckpt.name][0].lower() + MODEL_TITLES[ckpt.name][1:]
    measured = "the loss and the accuracy" if any("val_accuracy" in h for h in history) else "the loss"
    held_out = held_out_words(metrics) if ckpt.name == LM else "held-out reviews"
    lines = [f"**Training curve of the {title}**: {steps} steps; {measured} on {held_out}, measured along the way."]
    recipe = (metrics.get("train_config") or {}).get("recipe") or {}
    smoothing, vocab = recipe.get("label_smoothing") or 0, config.get("vocab_size")
    train, val = last.get("train_loss"), last.get("val_loss")
    if smoothing and vocab and isinstance(train, int | float) and isinstance(val, int | float):
        dropout, crop = config.get("dropout") or 0, recipe.get("crop_prob") or 0
        also = [f"drops out {dropout:.0%} of the activations"] * bool(dropout) + \
            [f"crops {crop:.0%} of the reviews"] * bool(crop)
        lines.append(
            f"Why the training loss ({train:.2f}) sits far above the validation loss ({val:.2f}): they are not "
            f"the same measure. Training used **label smoothing** ({smoothing:g}): its target was {1 - smoothing:.0%} "
            f"the right token and {smoothing:.0%} spread over all {vocab:,} tokens, so even a perfect model's "
            f"training loss would be {smoothing_floor(smoothing, vocab):.2f} nats per token."
            + (f" Training also {' and '.join(also)}." if also else "")
            + " The validation loss is the plain cross-entropy of the true label's words, on whole reviews, with "
              "nothing dropped.")
    return "\n\n".join(lines)


def smoothing_floor(smoothing: float, vocab: int) -> float:
    """The least cross-entropy against a label-smoothed target (1 - ε on the right token plus ε / V on
    each of the V): its entropy, reached by a model that predicts it exactly."""
    right = 1 - smoothing + smoothing / vocab
    other = smoothing / vocab
    return -(right * math.log(right) + (vocab - 1) * other * math.log(other))


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
        gr.Plot(plots.reliability_figure(calibration), show_label=False, elem_id="about-reliability")
    for ckpt in service.checkpoints:
        history = ckpt.metrics.get("history") if ckpt.ready else None
        if isinstance(history, list) and history and all(isinstance(h, dict) and "step" in h for h in history):
            gr.Plot(plots.training_curve_figure(history, f"Training curve: {SHORT_TITLES[ckpt.name].lower()}"),
                    show_label=False, elem_id=f"about-curve-{ckpt.name}")
            gr.Markdown(curve_caption(ckpt), elem_id=f"about-curve-caption-{ckpt.name}")
        elif ckpt.training_curve_png:
            gr.HTML(curve_html(ckpt))
    with gr.Accordion("For developers", open=False, elem_id="about-developers"):
        gr.Markdown(developers_markdown(service), elem_id="about-developers-text")

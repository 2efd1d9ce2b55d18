"""The demo's precision: "auto" follows the hardware, the flag and $DEMO_PRECISION override it, and a
bfloat16 service answers the batched tabs with the float32 service's label and nearly its numbers."""

import math
from pathlib import Path

import numpy as np
import pytest

from demo.app import parse_args
from demo.serving import PRECISION_ENV, DemoService
from demo.tabs.about import developers_markdown
from demo.tiny import shared_tiny_checkpoints
from demo.views.attention import attention_view
from demo.views.sentiment import classify, explain
from inspection import METHODS

REVIEW = "A slow start, but the acting is wonderful and the ending moved me."


@pytest.fixture(scope="module")
def ckpt() -> Path:
    return shared_tiny_checkpoints()


@pytest.mark.parametrize(("native", "expected"), [(True, "bf16"), (False, "fp32")])
def test_auto_follows_the_hardware(ckpt: Path, monkeypatch: pytest.MonkeyPatch, native: bool, expected: str) -> None:
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    monkeypatch.setattr("model.precision.bf16_native", lambda device: native)
    service = DemoService(ckpt, device="cpu")
    assert service.precision == expected
    assert f"the batched passes (classification, explanations, attention) in **{expected}**" in \
        developers_markdown(service)  # About, for developers


def test_the_environment_and_the_argument_override_auto(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("model.precision.bf16_native", lambda device: False)
    monkeypatch.setenv(PRECISION_ENV, "bf16")
    assert DemoService(ckpt, device="cpu").precision == "bf16"  # forced even where it is slower
    assert DemoService(ckpt, device="cpu", precision="fp32").precision == "fp32"
    assert parse_args([]).precision == "bf16" and parse_args(["--precision", "fp32"]).precision == "fp32"
    monkeypatch.setenv(PRECISION_ENV, "fp16")
    with pytest.raises(ValueError, match="precision must be one of"):
        DemoService(ckpt, device="cpu")


def test_bf16_answers_like_fp32(ckpt: Path) -> None:
    fp32 = DemoService(ckpt, device="cpu", precision="fp32")
    bf16 = DemoService(ckpt, device="cpu", precision="bf16")
    a, b = classify(fp32, REVIEW), classify(bf16, REVIEW)
    assert a.label == b.label and a.probabilities.keys() == b.probabilities.keys()
    assert math.fsum(b.probabilities.values()) == pytest.approx(1.0, abs=1e-5)  # summed in float32
    assert max(abs(a.probabilities[k] - b.probabilities[k]) for k in a.probabilities) < 0.02
    for method in METHODS:
        x, y = explain(fp32, REVIEW, method), explain(bf16, REVIEW, method)
        assert x.label == y.label and len(x.highlights) == len(y.highlights)
        assert all(w is None or math.isfinite(w) for _, w in y.highlights)
    maps = attention_view(bf16, REVIEW, "lm_self", 0).all_weights
    assert maps.dtype == np.float32
    np.testing.assert_allclose(maps, attention_view(fp32, REVIEW, "lm_self", 0).all_weights, atol=0.02)

"""Starting the demo: command-line flags, environment variables, both entry points, serving models
named on the command line, and that the demo never depends on the training code."""

import ast
import runpy
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from benchmarks.app_startup import free_port, start_server, stop_server, wait_ready
from demo.app import DEFAULT_CHECKPOINTS, build_app, parse_args
from demo.serving import LM, SENTIMENT, DemoService
from demo.tabs.about import developers_markdown
from demo.tiny import REPO_ROOT, shared_tiny_checkpoints
from demo.views.chat import continue_text
from demo.views.sentiment import classify
from storage import SNAPSHOTS_DIR


def test_defaults(monkeypatch) -> None:
    for var in ("GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT", "DEMO_CHECKPOINTS"):
        monkeypatch.delenv(var, raising=False)
    args = parse_args([])
    assert (args.host, args.port, args.share, args.device) == ("127.0.0.1", 7860, False, "auto")
    assert args.checkpoints == DEFAULT_CHECKPOINTS == REPO_ROOT / "checkpoints"


def test_flags_and_spaces_environment(monkeypatch) -> None:
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7999")
    args = parse_args([])
    assert (args.host, args.port) == ("0.0.0.0", 7999)
    args = parse_args(["--host", "::1", "--port", "8001", "--share", "--checkpoints", "x", "--device", "cpu"])
    assert (args.host, args.port, args.share, args.checkpoints, args.device) == ("::1", 8001, True, Path("x"), "cpu")
    with pytest.raises(SystemExit):
        parse_args(["--device", "tpu"])


def test_python_m_demo_help(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["demo", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("demo", run_name="__main__", alter_sys=True)
    assert exit_info.value.code == 0
    assert "--checkpoints" in capsys.readouterr().out


def test_demo_never_imports_training() -> None:
    """The Space ships the demo and checkpoints; importing `training` would tie it to the
    training code and its dependencies."""
    for path in (REPO_ROOT / "demo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "training" or n.startswith("training.") for n in names), path.name


def test_python_demo_app_py_serves_the_page() -> None:
    """The Hugging Face Spaces way: `python demo/app.py`, port from GRADIO_SERVER_PORT."""
    port = free_port()
    process = start_server(shared_tiny_checkpoints(), port, entry="script", use_env_port=True)
    try:
        wait_ready(process, port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=10) as response:
            config = response.read().decode()
        assert "Tiny Transformers, built from scratch" in config
        assert "Running on **CPU" in config or "Running on **CUDA" in config  # About, for developers
    finally:
        output = stop_server(process)
    assert "Traceback" not in output


def test_lm_and_sentiment_paths_serve_those_models(tmp_path) -> None:
    """`python -m demo --lm runs/x --sentiment runs/y`: run folders (here copies of the tiny checkpoint,
    with the tokenizer beside the weights, as a run writes it) are served, with no checkpoints folder
    at all; the LM's snapshots fill the "Watch it learn" tab."""
    tiny = shared_tiny_checkpoints()
    runs = tmp_path / "runs"
    shutil.copytree(tiny / "lm", runs / "x")
    shutil.copytree(tiny / "sentiment", runs / "y")
    args = parse_args(["--lm", str(runs / "x"), "--sentiment", str(runs / "y"), "--checkpoints", str(tmp_path / "no")])
    assert (args.lm, args.sentiment) == (str(runs / "x"), str(runs / "y"))
    service = DemoService(args.checkpoints, "cpu", models={LM: args.lm, SENTIMENT: args.sentiment})
    assert service.lm.ready and service.sentiment.ready and service.tokenizer is service.lm.tokenizer
    assert (service.lm.location, service.sentiment.location) == ("runs/x", "runs/y")
    assert continue_text(service, "This movie was", max_new_tokens=3, temperature=0).text
    assert classify(service, "A fine film.").label in ("negative", "positive")
    assert service.snapshots is not None and service.snapshots.location == f"x/{SNAPSHOTS_DIR}"
    developers = developers_markdown(service)  # where each model comes from: About's developer section
    assert "runs/x" in developers and "runs/y" in developers
    build_app(service)  # every tab builds


def test_a_path_that_holds_no_model_stops_the_app_at_start_with_one_line(tmp_path) -> None:
    empty = tmp_path / "runs" / "empty"
    empty.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "demo", "--lm", str(empty), "--port", str(free_port())],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (f"error: --lm {empty}: `runs/empty` holds no model (no config.json: a run "
                                            "writes it at its first evaluation); see: python -m demo --help")

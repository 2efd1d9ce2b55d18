"""Starting the demo: command-line flags, environment variables, both entry points, and that the
demo never depends on the training code."""

import ast
import runpy
import sys
import urllib.request
from pathlib import Path

import pytest

from benchmarks.app_startup import free_port, start_server, stop_server, wait_ready
from demo.app import DEFAULT_CHECKPOINTS, parse_args
from demo.tiny import REPO_ROOT, shared_tiny_checkpoints


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

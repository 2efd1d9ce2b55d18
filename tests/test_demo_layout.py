"""The demo's two parts and the page on top (`demo/__init__.py`): imports go one way, serving →
views → tabs and app, and the browser-side code lives in `demo/static/*.js`, one function a file,
each one used by the page and none written inside a tab."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from demo.app import build_app
from demo.serving import DemoService
from demo.tabs import browser
from demo.tiny import REPO_ROOT, shared_tiny_checkpoints

DEMO = REPO_ROOT / "demo"
PAGE = ("demo.tabs", "demo.app", "demo.plots", "demo.export")  # what draws and serves the page
NEVER = {"serving": ("demo.views", "demo.text", *PAGE), "views": PAGE}  # part -> what it must not import


def demo_imports(path: Path) -> set[str]:
    """The `demo` modules a file imports (`from demo.views import chat` counts as demo.views.chat)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {n for n in names if n.split(".")[0] == "demo"}


@pytest.mark.parametrize("part", NEVER)
def test_imports_go_one_way(part: str) -> None:
    for path in (DEMO / part).rglob("*.py"):  # packages inside a part too (demo/views/tour/)
        wrong = {n for n in demo_imports(path) if n.startswith(NEVER[part])}
        assert not wrong, f"{path.relative_to(DEMO.parent)} imports {sorted(wrong)}"


def test_serving_loads_without_gradio() -> None:
    """The service and the views are plain Python: a benchmark or a test of a view starts no Gradio."""
    code = "import sys, demo.serving, demo.views; assert 'gradio' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


@pytest.fixture(scope="module")
def page_js() -> list[str]:
    """The `js=` of every event on the page."""
    app = build_app(DemoService(shared_tiny_checkpoints(), "cpu"))
    return [fn.js for fn in app.fns.values() if fn.js]


def test_every_event_runs_a_static_function_and_every_one_is_used(page_js: list[str]) -> None:
    names = {path.stem for path in browser.STATIC.glob("*.js")}
    used = set()
    for js in page_js:
        name = next((n for n in names if js.startswith(f"() => ({browser.source(n)}\n)(")), None)
        assert name is not None, f"an event's js is not a call of a demo/static file: {js[:200]}"
        used.add(name)
    assert used == names  # no file left unused


def test_no_tab_holds_javascript() -> None:
    for path in (DEMO / "tabs").glob("*.py"):
        if path.name != "browser.py":  # the one line that calls a file's function
            assert "=>" not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js to parse the JavaScript")
@pytest.mark.parametrize("name", sorted(path.stem for path in browser.STATIC.glob("*.js")))
def test_each_static_file_is_one_function(name: str, tmp_path: Path) -> None:
    """`node --check` parses the call the page runs, exactly as `browser.call` writes it."""
    script = tmp_path / f"{name}.js"
    script.write_text(f"const f = {browser.call(name)};\n", encoding="utf-8")
    subprocess.run(["node", "--check", str(script)], check=True)

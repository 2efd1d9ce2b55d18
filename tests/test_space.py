"""`publishing.space`: the tree a Hugging Face Space gets holds exactly what the app needs, runs alone
(`python demo/app.py` from that folder, as Spaces starts it, answering /chat, /classify and /tour), and
every refusal is one line with nothing left behind. The upload itself is `huggingface_hub`'s; here it is
replaced (no network), everything up to it is the real code."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import SpaceCard

from demo.tiny import make_tiny_checkpoints
from publishing import space
from storage import IN_PROGRESS_NAME, STATE_NAME, WEIGHTS_NAME

ROOT = Path(__file__).resolve().parents[1]
OURS = ("cli", "demo", "inspection", "model", "storage", "tokenization", "training", "publishing", "benchmarks")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("space") / "tree"
    count, size = space.build(out)
    assert count == sum(1 for p in out.rglob("*") if p.is_file()) and size > 50e6
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_checkpoints(tmp_path_factory.mktemp("tiny") / "checkpoints")


def names(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_the_tree_holds_what_the_app_needs_and_nothing_else(tree: Path) -> None:
    files = names(tree)
    assert {"demo/app.py", "model/attention.py", "tokenization/bpe.py", "storage/layout.py", "inspection/__init__.py",
            "cli.py", "requirements.txt", "LICENSE", "README.md", "checkpoints/tokenizer.json",
            "demo/static/scroll_to.js"} <= files
    for name in ("lm", "sentiment", "sentiment-backward"):
        assert f"checkpoints/{name}/{WEIGHTS_NAME}" in files and f"checkpoints/{name}/config.json" in files
    assert any(f.startswith("checkpoints/lm-laptop/snapshots/step-") for f in files)
    tops = {f.split("/")[0] for f in files}
    code = set(space.local_packages(ROOT / "demo" / "app.py"))  # what the app imports, followed
    assert {"demo", "model", "tokenization", "storage", "inspection", "cli.py"} <= code
    assert tops == code | {"checkpoints", "benchmarks", "docs", "requirements.txt", "LICENSE", "README.md",
                           ".gitattributes"}
    assert {f for f in files if f.startswith("benchmarks/")} <= set(space.APP_DATA)
    assert all(f.startswith("docs/screenshot_") and f.endswith(".png") for f in files if f.startswith("docs/"))
    forbidden = ("tests/", "runs/", "docs/experiments/", ".git/", "training/", "publishing/")
    assert not [f for f in files if f.startswith(forbidden) or "__pycache__" in f or f.endswith(".pyc")
                or STATE_NAME in f or IN_PROGRESS_NAME in f]


def test_the_trees_gitattributes_store_its_binary_files_as_large_files(tree: Path) -> None:
    """For a git push of the tree: the Hub refuses binary files stored as plain git objects."""
    rules = (tree / ".gitattributes").read_text().splitlines()
    assert rules == ["*.png filter=lfs diff=lfs merge=lfs -text", "*.safetensors filter=lfs diff=lfs merge=lfs -text"]


def test_the_card_parses_as_a_space_card(tree: Path) -> None:
    data = SpaceCard((tree / "README.md").read_text(encoding="utf-8")).data
    assert data.sdk == "gradio" and data.app_file == "demo/app.py" and (tree / data.app_file).is_file()
    assert f"gradio=={data.sdk_version}" in (tree / "requirements.txt").read_text()
    assert (tree / "README.md").read_text() == (ROOT / "README.md").read_text()  # no --models: as it is


def test_the_app_data_are_the_files_the_app_reads() -> None:
    from demo.tabs.about import CALIBRATION_RESULTS
    from demo.tabs.sentiment import BEHAVIOUR_RESULTS, FAITHFULNESS_RESULTS

    read = {p.relative_to(ROOT).as_posix() for p in (CALIBRATION_RESULTS, BEHAVIOUR_RESULTS, FAITHFULNESS_RESULTS)}
    assert read == set(space.APP_DATA)


def test_the_tree_imports_nothing_outside_itself(tree: Path) -> None:
    assert space.outside_imports(tree) == []
    assert not {"training", "publishing", "benchmarks"} & {
        m.split(".")[0] for m in space.local_modules(ROOT / "demo" / "app.py")}
    # the app's modules imported from the tree, in a process where the repository is not on the path
    probe = ("import sys, json; sys.path.insert(0, '.'); import demo.app, demo.views.tour as t; "
             "[t.code_range(k) for k in t.REGISTRY]; "  # the tour's own imports by name
             f"print(json.dumps({{n: getattr(m, '__file__', None) for n, m in sys.modules.items() "
             f"if n.split('.')[0] in {list(OURS)!r}}}))")
    out = subprocess.run([sys.executable, "-I", "-c", probe], cwd=tree, capture_output=True, text=True, timeout=300,
                         env=clean_env())
    assert out.returncode == 0, out.stderr[-2000:]
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert "model" in modules and "demo.app" in modules
    outside = {n: f for n, f in modules.items() if f and not Path(f).resolve().is_relative_to(tree.resolve())}
    assert not outside


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEMO_CHECKPOINTS")}
    return {**env, "PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_app_runs_from_the_tree(tree: Path, tmp_path: Path) -> None:
    """As Spaces starts it: `python demo/app.py` in the Space's folder, the host and port from the environment."""
    gradio_client = pytest.importorskip("gradio_client")
    port = free_port()
    log = (tmp_path / "server.log").open("w+")
    env = clean_env(GRADIO_SERVER_NAME="0.0.0.0", GRADIO_SERVER_PORT=str(port))
    process = subprocess.Popen([sys.executable, "-I", "demo/app.py"], cwd=tree, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        wait_ready(process, port, log)
        client = gradio_client.Client(f"http://127.0.0.1:{port}/", verbose=False)
        history, *_ = client.predict("This movie was", [], 8, 0.0, 40, 0.95, 1, 0, api_name="/chat")
        assert [m["role"] for m in history] == ["user", "assistant"] and len(str(history[-1]["content"])) > 5
        label, highlights, notice = client.predict("A wonderful, moving film. Loved it!", api_name="/classify")
        assert label["label"] == "positive" and "".join(h["token"] for h in highlights).startswith("A wonderful")
        outputs = client.predict("This movie was", "lm", 0, 0, False, api_name="/tour")
        steps = next(o for o in outputs if isinstance(o, dict) and "steps" in o)["steps"]
        assert len(steps) >= 14 and all(check["ok"] for step in steps for check in step["checks"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log.seek(0)
    text = log.read()
    assert "Traceback" not in text, text[-3000:]
    assert str(ROOT) not in text  # nothing read from the repository's folder


def wait_ready(process: subprocess.Popen, port: int, log, timeout: float = 240.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if process.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the app exited with {process.returncode}:\n{log.read()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"the app did not answer within {timeout:.0f} s")


# -- refusals: one line, exit status 2, nothing written ------------------------------------------

def refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        space.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err


def test_a_checkpoint_being_written_is_refused(tiny: Path, tmp_path: Path, capsys) -> None:
    busy = tmp_path / "checkpoints"
    shutil.copytree(tiny, busy)
    (busy / "lm" / IN_PROGRESS_NAME).write_text(json.dumps({"command": "python -m training.run"}))
    err = refused(["--repo-id", "a/b", "--checkpoints", str(busy), "--dry-run", "--out", str(tmp_path / "out")],
                  capsys)
    assert "still writing" in err and "lm" in err
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_checkpoint_that_does_not_load_is_refused(tiny: Path, tmp_path: Path, capsys) -> None:
    broken = tmp_path / "checkpoints"
    shutil.copytree(tiny, broken)
    (broken / "sentiment" / WEIGHTS_NAME).write_bytes(b"not safetensors")
    err = refused(["--repo-id", "a/b", "--checkpoints", str(broken), "--dry-run", "--out", str(tmp_path / "out")],
                  capsys)
    assert "does not load" in err and "sentiment" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("front", "said"), [
    ("title: [unclosed\nsdk: gradio", "does not parse"),
    ("- a list\n- not a mapping", "does not parse"),
    ("title: x\nsdk: streamlit\nsdk_version: 1.0\napp_file: app.py", "sdk is 'streamlit'"),
    ("title: x\nsdk: gradio\napp_file: demo/app.py", "no sdk_version"),
    ("title: x\nsdk: gradio\nsdk_version: 6.31.0\napp_file: demo/missing.py", "app_file"),
    ("title: x\nsdk: gradio\nsdk_version: 5.0.0\napp_file: demo/app.py", "pins gradio"),
])
def test_a_card_spaces_cannot_use_is_refused(tmp_path: Path, front: str, said: str) -> None:
    root = tmp_path / "repo"
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "app.py").write_text("")
    (root / "requirements.txt").write_text("gradio==6.31.0\n")
    (root / "README.md").write_text(f"---\n{front}\n---\n\n# x\n")
    with pytest.raises(space.Refused, match=said) as refusal:
        space.read_card(root)
    assert "\n" not in str(refusal.value)


def test_models_are_added_to_the_card(tmp_path: Path) -> None:
    text, data = space.read_card(ROOT, ["someone/tiny-lm", "someone/tiny-sentiment"])
    card = SpaceCard(text).data
    assert card.models == ["someone/tiny-lm", "someone/tiny-sentiment"] and card.sdk == "gradio"
    body = (ROOT / "README.md").read_text().split("---", 2)[2]
    assert card.app_file == "demo/app.py" and text.split("---", 2)[2] == body


def test_out_must_be_empty_and_goes_with_dry_run(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    err = refused(["--repo-id", "a/b", "--checkpoints", str(tiny), "--dry-run", "--out", str(out)], capsys)
    assert "not an empty folder" in err and names(out) == {"keep.txt"}
    refused(["--repo-id", "a/b", "--dry-run"], capsys)


def test_a_missing_token_is_refused(tiny: Path, monkeypatch, capsys) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: pytest.fail("no token: nothing may be sent"))
    err = refused(["--repo-id", "a/b", "--checkpoints", str(tiny)], capsys)
    assert "hf auth login" in err and "HF_TOKEN" in err


def test_the_upload_is_one_commit_of_the_tree_to_a_space(tiny: Path, monkeypatch, capsys) -> None:
    import huggingface_hub

    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls["create"] = (repo_id, kwargs)

        def upload_folder(self, **kwargs):
            calls["upload"] = kwargs
            calls["files"] = names(Path(kwargs["folder_path"]))
            return type("Commit", (), {"commit_url": "https://huggingface.co/spaces/someone/tiny/commit/0"})()

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_fake")
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    space.main(["--repo-id", "someone/tiny", "--private", "--checkpoints", str(tiny), "--models", "someone/tiny-lm"])
    repo_id, kwargs = calls["create"]
    assert repo_id == "someone/tiny" and kwargs["repo_type"] == "space" and kwargs["space_sdk"] == "gradio"
    assert kwargs["private"] is True and kwargs["exist_ok"] is True
    assert calls["upload"]["repo_id"] == "someone/tiny" and calls["upload"]["repo_type"] == "space"
    assert calls["upload"]["ignore_patterns"] == [".gitattributes"]  # the Space keeps its own
    needed = {"demo/app.py", "README.md", "requirements.txt", "LICENSE", "checkpoints/lm/model.safetensors"}
    assert needed <= calls["files"]
    assert not any(f.startswith(("tests/", "training/")) for f in calls["files"])
    assert not Path(calls["upload"]["folder_path"]).exists()  # the temporary tree is gone
    assert "uploaded the app to https://huggingface.co/spaces/someone/tiny" in capsys.readouterr().out


def test_the_hubs_failure_is_one_line(tiny: Path, monkeypatch, capsys) -> None:
    import huggingface_hub

    class Offline:
        def create_repo(self, *args, **kwargs):
            raise ConnectionError("no network\nat all")

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_fake")
    monkeypatch.setattr(huggingface_hub, "HfApi", Offline)
    with pytest.raises(SystemExit) as exit_:
        space.main(["--repo-id", "someone/tiny", "--checkpoints", str(tiny)])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "ConnectionError" in err

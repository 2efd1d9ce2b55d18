"""Put the app on a Hugging Face Space: exactly what it needs, in one commit.

    python -m publishing.space --repo-id you/tiny-transformers [--private] [--models you/tiny-lm ...]
    python -m publishing.space --repo-id you/tiny-transformers --dry-run --out DIR   # the tree, written to DIR

The tree (`space_files`):

- the card's `app_file` (demo/app.py) and every package of this repository it imports, found by following
  its imports (`local_packages`: `import`/`from` statements, also those inside functions), whole packages
  (the tour reads `model/`'s source, the app its static/ files), without caches;
- the shipped checkpoints (`checkpoints/`, or `--checkpoints DIR`), without optimizer states;
- the benchmark results the app quotes (`APP_DATA`), when they exist;
- requirements.txt, LICENSE, and README.md as the Space's card, with the images it shows;
- a .gitattributes storing its binary files (weights, images) as large files, for whoever pushes the tree
  with git instead (README, "Host it on Spaces"); the upload leaves the Space's own .gitattributes alone.

Nothing else: no tests/, runs/, docs/ beyond those images, benchmarks' code, experiments, caches or .git.
`huggingface_hub.upload_folder` stores the large files (the weights) as the Hub wants them (LFS/Xet), which
is why this works where `git push` of this repository does not (README, "Host it on Spaces").

Refused, in one line and before anything is written or sent (exit status 2): a checkpoint folder a
run is still writing (RUN_IN_PROGRESS), a checkpoint or tokenizer that does not load, a card whose
front matter `huggingface_hub` does not parse (or names no gradio `sdk`, `sdk_version` or existing
`app_file`), and, for an upload, a missing token. The Hub's own failures are one line too (exit status 1).
"""

import ast
import re
import shutil
import sys
import tempfile
from pathlib import Path

from cli import Parser
from storage import CONFIG_NAME, IN_PROGRESS_NAME, STATE_NAME, TOKENIZER_NAME, is_being_written

ROOT = Path(__file__).resolve().parents[1]
CARD = "README.md"
ALWAYS = ("requirements.txt", "LICENSE")
CHECKPOINTS = "checkpoints"
# files the app reads if present (demo/tabs/sentiment.py, demo/tabs/about.py): the figures it quotes
APP_DATA = ("benchmarks/results/faithfulness.json", "benchmarks/results/behaviour.json",
            "benchmarks/results/calibration.json")
SKIPPED_NAMES = {"__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", STATE_NAME, ".DS_Store"}
NEVER = ("tests/", "runs/", "docs/experiments/", ".git/", "benchmarks/results/")  # checked on the finished tree
NO_TOKEN = ("no Hugging Face token: run `hf auth login` (or set HF_TOKEN to a token with write access), "
            "or use --dry-run --out DIR")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
GITATTRIBUTES = ".gitattributes"


class Refused(Exception):
    """A reason not to build or upload the tree, said in one line."""


# -- which code the app needs --------------------------------------------------------------------

def _module_file(root: Path, dotted: str) -> Path | None:
    path = root.joinpath(*dotted.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _imports(file: Path, module: str) -> set[str]:
    """The dotted names `file` (module `module`) imports, relative imports resolved; `from a import b`
    gives both a and a.b (b may be a submodule)."""
    package = module.split(".") if file.name == "__init__.py" else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), str(file))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            if target:
                names.add(target)
            names.update(f"{target}.{alias.name}" if target else alias.name for alias in node.names)
    return names


def local_modules(entry: Path, root: Path = ROOT) -> set[str]:
    """Every module of `root` that `entry` (a file under `root`) imports, directly or not."""
    start = ".".join(entry.relative_to(root).with_suffix("").parts)
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        file = entry if name == start else _module_file(root, name)
        if file is None:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b runs a/__init__.py
        todo += _imports(file, name)
    return seen


def local_packages(entry: Path, root: Path = ROOT) -> list[str]:
    """The top-level packages (folders) and modules (.py files) of `root` the app imports, as paths."""
    tops = {name.split(".")[0] for name in local_modules(entry, root)}
    return sorted(top if (root / top).is_dir() else f"{top}.py" for top in tops)


def outside_imports(tree: Path, repo: Path = ROOT) -> list[str]:
    """Imports in `tree`'s Python files of this repository's modules that `tree` does not hold: what
    a copy of the app would miss (empty for a complete tree)."""
    ours = {p.name for p in repo.iterdir() if (p / "__init__.py").is_file()} | {p.stem for p in repo.glob("*.py")}
    missing = set()
    for file in tree.rglob("*.py"):
        module = ".".join(file.relative_to(tree).with_suffix("").parts)
        for name in _imports(file, module):
            if name.split(".")[0] in ours and _module_file(tree, name) is None and _module_file(repo, name) is not None:
                missing.add(f"{file.relative_to(tree)}: {name}")
    return sorted(missing)


# -- checks --------------------------------------------------------------------------------------

def read_card(root: Path = ROOT, models: list[str] | None = None) -> tuple[str, dict]:
    """README.md's text (with `models` added to its front matter when given) and its metadata, after
    checking `huggingface_hub` parses it as a Space card that Spaces can run."""
    from huggingface_hub import SpaceCard

    path = root / CARD
    if not path.is_file():
        raise Refused(f"no {CARD}: a Space's card is its README.md")
    text = path.read_text(encoding="utf-8")
    try:
        card = SpaceCard(text)
    except Exception as e:  # the YAML's own errors, whatever their class
        raise Refused(f"{CARD}: front matter that huggingface_hub does not parse: {' '.join(str(e).split())}") from None
    data = card.data.to_dict()
    if not text.startswith("---") or not data:
        raise Refused(f"{CARD}: no front matter (a Space needs sdk, sdk_version, app_file)")
    if data.get("sdk") != "gradio":
        raise Refused(f"{CARD}: sdk is {data.get('sdk')!r}, the app is a gradio one (sdk: gradio)")
    if not data.get("sdk_version"):
        raise Refused(f"{CARD}: no sdk_version (the gradio version the Space installs)")
    if not isinstance(data.get("app_file"), str) or not (root / data["app_file"]).is_file():
        raise Refused(f"{CARD}: app_file {data.get('app_file')!r} is not a file of this repository")
    pinned = re.search(r"^gradio==(\S+)", (root / "requirements.txt").read_text(encoding="utf-8"), re.M)
    if pinned and pinned.group(1) != str(data["sdk_version"]):
        raise Refused(f"{CARD}: sdk_version {data['sdk_version']} but requirements.txt pins gradio=={pinned.group(1)}")
    if models:
        card.data.models = list(models)
        text, data = str(card), card.data.to_dict()
    return text, data


def check_checkpoints(folder: Path) -> None:
    """Refuse a folder a run is writing into, a checkpoint (config.json) that does not load in this
    project's code and a tokenizer.json that does not read."""
    from model import load_pretrained
    from tokenization import BPETokenizer

    if not folder.is_dir():
        raise Refused(f"--checkpoints {folder}: no such folder")
    for marker in sorted(folder.rglob(IN_PROGRESS_NAME)):
        run = marker.parent
        if is_being_written(run):
            raise Refused(f"{run}: a training run is still writing into it ({IN_PROGRESS_NAME}); "
                          "publish once it has written its metrics.json")
    for config in sorted(folder.rglob(CONFIG_NAME)):
        try:
            load_pretrained(config.parent)
        except Exception as e:  # what loading raises, a torch error included
            raise Refused(f"{config.parent}: does not load: {' '.join(str(e).split())[:300]}") from None
    for tokenizer in sorted(folder.rglob(TOKENIZER_NAME)):
        try:
            BPETokenizer.from_file(tokenizer)
        except Exception as e:
            raise Refused(f"{tokenizer}: does not load: {' '.join(str(e).split())[:300]}") from None


# -- the tree ------------------------------------------------------------------------------------

def _skip(path: Path) -> bool:
    return path.name in SKIPPED_NAMES or path.suffix == ".pyc" or ".tmp" in path.name


def _files_under(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.iterdir()):
        if _skip(path) or path.is_symlink() and not path.exists():
            continue
        found += _files_under(path) if path.is_dir() else [path]
    return found


def space_files(root: Path = ROOT, checkpoints: Path | None = None, card: str = "",
                app_file: str = "demo/app.py") -> dict[str, Path]:
    """{path in the Space: file here} for everything the Space needs (the card's text is written apart)."""
    files: dict[str, Path] = {}
    for top in local_packages(root / app_file, root):
        source = root / top
        for file in _files_under(source) if source.is_dir() else [source]:
            files[file.relative_to(root).as_posix()] = file
    checkpoints = checkpoints or root / CHECKPOINTS
    for file in _files_under(checkpoints):
        files[f"{CHECKPOINTS}/{file.relative_to(checkpoints).as_posix()}"] = file
    for name in (*ALWAYS, *APP_DATA):
        if (root / name).is_file():
            files[name] = root / name
    for link in IMAGE.findall(card):  # the card's pictures, so that it renders on the Space's page
        path = (root / link).resolve()
        if "://" not in link and path.is_file() and path.is_relative_to(root.resolve()):
            files[path.relative_to(root.resolve()).as_posix()] = path
    bad = [name for name in files if name.startswith(NEVER) and name not in APP_DATA]
    if bad:
        raise Refused(f"the tree would hold {bad[0]}: not for a Space")
    return files


def _starts_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return b"\0" in f.read(8192)


def gitattributes(files) -> str:
    """Git LFS rules for every kind of binary file (a NUL byte in its first 8 KB) in `files`: the Hub
    refuses a git push holding binary files stored as plain git objects, at any size."""
    binary = sorted({f"*{p.suffix}" for p in files if p.suffix and _starts_binary(p)})
    return "".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n" for pattern in binary)


def build(out: Path, root: Path = ROOT, checkpoints: Path | None = None,
          models: list[str] | None = None) -> tuple[int, int]:
    """Check everything, then write the Space's tree to `out` (absent or empty); (files, bytes).
    Nothing is left in `out` when a check refuses or a copy fails."""
    text, data = read_card(root, models)
    checkpoints = checkpoints or root / CHECKPOINTS
    check_checkpoints(checkpoints)
    files = space_files(root, checkpoints, text, data["app_file"])
    if data["app_file"] not in files:
        raise Refused(f"{CARD}: app_file {data['app_file']} is not in the tree")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise Refused(f"--out {out}: exists and is not an empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp", dir=out.parent))
    try:
        for name, source in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, tmp / name)
        (tmp / CARD).write_text(text, encoding="utf-8")
        (tmp / GITATTRIBUTES).write_text(gitattributes(files.values()), encoding="utf-8")
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    written = [p for p in out.rglob("*") if p.is_file()]
    return len(written), sum(p.stat().st_size for p in written)


def upload(repo_id: str, private: bool = False, root: Path = ROOT, checkpoints: Path | None = None,
           models: list[str] | None = None) -> str:
    """Build the tree in a temporary folder and upload it to the Space `repo_id` in one commit (creating
    the Space if needed; files of an earlier upload that the tree no longer holds are removed); the
    commit's URL."""
    from huggingface_hub import HfApi, get_token

    if not get_token():
        raise Refused(NO_TOKEN)
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "space"
        count, size = build(tree, root, checkpoints, models)
        api = HfApi()
        api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=tree, delete_patterns="*",
                                   ignore_patterns=[GITATTRIBUTES],  # the Space's own stays
                                   commit_message=f"Deploy the app: {count} files, {size / 1e6:.1f} MB "
                                                  "(python -m publishing.space)")
    return commit.commit_url


def main(argv: list[str] | None = None) -> None:
    parser = Parser("python -m publishing.space", __doc__)
    parser.add_argument("--repo-id", required=True, help="the Space, owner/name (created if missing)")
    parser.add_argument("--private", action="store_true", help="create the Space private")
    parser.add_argument("--models", nargs="+", metavar="REPO_ID",
                        help="model repos the checkpoints were also pushed to (publishing.push): listed in the "
                             "card's `models:`, which links the Space and the models on the Hub")
    parser.add_argument("--checkpoints", type=Path, help="the folder shipped as checkpoints/ (default: checkpoints/)")
    parser.add_argument("--dry-run", action="store_true", help="write the tree to --out instead of uploading it")
    parser.add_argument("--out", type=Path, help="with --dry-run: the folder to write (absent or empty)")
    args = parser.parse_args(argv)
    if args.dry_run != (args.out is not None):
        parser.error("--dry-run and --out go together")
    try:
        if args.dry_run:
            count, size = build(args.out, checkpoints=args.checkpoints, models=args.models)
            print(f"wrote {args.out}: {count} files, {size / 1e6:.1f} MB (what {args.repo_id} would get); "
                  f"run it: cd {args.out} && python demo/app.py")
            return
        url = upload(args.repo_id, args.private, checkpoints=args.checkpoints, models=args.models)
    except Refused as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # the Hub's answer (no network, no rights, a name taken) as one line
        print(f"error: the upload to the Space {args.repo_id} failed: {type(e).__name__}: "
              f"{' '.join(str(e).split())[:300]}", file=sys.stderr)
        sys.exit(1)
    print(f"uploaded the app to https://huggingface.co/spaces/{args.repo_id} ({url})")


if __name__ == "__main__":
    main()

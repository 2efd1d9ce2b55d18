"""Short training text learned from the reviews' own evidence (issue 28, item 3).

Why: the classifier reads full reviews well (90% on the selection rows) and one-line text badly
(72% on their first and last sentences): it has only ever been trained on whole reviews, whose label
is a verdict on the whole text. Its sentences carry that verdict unevenly: plot summary is neutral,
"but the ending ruined it" argues against it. Labelling every sentence with the review's label
(`--crop-prob`) teaches noise along with the signal. Here the full-review classifier itself says
which sentences carry the label: a sentence is kept, with the review's label, only where its
attribution supports that label clearly, and the neutral and opposing ones are skipped. Document
labels can train sentence-level sentiment this way (MILNET, Angelidis & Lapata 2018), and adding
n-gram samples of the training text lifted a distilled student on SST-2 (Tang et al. 2019), so the
strongest 2-4-word phrases and single words of the kept sentences are kept too. The 50,000
unlabeled reviews add their evidence under the teacher's own label of the whole review, where the
teacher is confident (`CONFIDENCE`).

How (`review_evidence`):

- the token attributions are integrated gradients toward the label (`model.attribute`), the most
  faithful of the project's methods on the classifier this cache was first built with (shipped until
  2026-11-25: ERASER comprehensiveness 0.606 against occlusion's 0.276 and grad x input's 0.128; on
  its successor occlusion and integrated gradients are within a standard error), and the one whose
  scores add up: the tokens' scores
  sum to f(review) - f(blank review) (completeness), so a sentence's sum is its part of the
  verdict. Its quadrature is Gauss-Legendre `IG_STEPS` = 7 nodes, fixed, instead of the app's
  adaptive ladder. Measured on 50 training reviews in bf16 on one thread of a shared, loaded 2-core
  AVX512-BF16 CPU (wall seconds a review, mean): the ladder 3.7 s (11.3 passes), 7 nodes 2.3 s, 4 nodes 1.6 s,
  occlusion 2.6 s, grad x input 0.6 s; the sentences kept agree with the ladder's (Jaccard) at
  1.00 for 7 nodes, 0.89 for 4 (its completeness gap reaches 6x the verdict), 0.32 for occlusion
  and 0.34 for grad x input;
- a sentence's score is the sum of its tokens' scores over the review's evidence mass, the sum of
  |sentence sum| over its sentences (both directions), so the threshold is relative to how much
  the review's sentences say at all: kept when score >= `SENTENCE_SHARE`. A sentence against the
  label has a negative score and is never kept; a neutral one has a small score and is skipped.
  A sentence the model did not read (the middle of a review past `max_src_len`, cut head + tail) is
  neither scored nor kept;
- within the kept sentences, single words (that contain a letter) scoring >= `WORD_SHARE`, and
  2-4-word phrases scoring >= `PHRASE_SHARE` whose first and last words each carry `EDGE_SHARE` of
  the phrase's score (an edge word that adds nothing makes a longer phrase, not better evidence),
  taken best first without overlap. A phrase has fewer words than its sentence: the sentence itself
  is already kept. Training uses a word or phrase only with the label it carries across the reviews
  (`load_evidence`, `AGREEMENT`).

The cache (`--out`, default `runs/evidence/<teacher sha>-<split>.jsonl`) is a header line (the
settings, checked on every later call and by training) and one line per review considered,
appended and flushed as soon as the review is done:

    {"review": row of the split's file, "label": the label explained (null: an unlabeled review the
     teacher is not confident of), "p": the teacher's probability of it (unlabeled reviews),
     "snippets": [{"text", "kind": sentence | phrase | word, "score"}]}

A second call skips the reviews already there, so the build runs in stretches (`--start`, `--limit`)
and a killed one continues where it stopped (a torn last line is dropped). It needs them: on 200
training reviews (bf16, one thread) a review took 0.7 s of CPU (1.3-1.9 s of wall time on the
shared, loaded machine) and kept 1.0 sentence, 0.7 phrase and 1.0 word; the teacher was confident
of 40 of 60 unlabeled reviews. The 22,500 training reviews are about 4.5 hours of a quiet core, the
50,000 unlabeled ones about 7.

Only training rows and the unlabeled reviews are read: never a held-out review (`training.heldout`:
the validation carve-out of `training.data`, its selection and report rows), nor any review whose
text equals one (IMDB repeats 16 of the held-out reviews among the training rows and 21 among the
unlabeled ones).

    python -m training.evidence --teacher checkpoints/sentiment --data-dir ../shared/data/imdb --split train
    python -m training.evidence --teacher checkpoints/sentiment --data-dir ../shared/data/imdb --split unsupervised \
        --start 10000 --limit 5000
"""

import argparse
import bisect
import hashlib
import json
import math
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from classifier import Reader
from cli import Parser
from inspection import attribute
from model import PRECISIONS, autocast, resolve_precision
from storage import WEIGHTS_NAME
from tokenization import (
    BPETokenizer,
    Piece,
    clean_texts,
    cut_source,
    sentence_spans,
    source_ids,
    word_ids,
)

from .data import DataError, label_column, load_splits, text_column, validation_split
from .errors import UsageError, one_line_errors
from .heldout import add_held_out_arguments

SPLITS = ("train", "unsupervised")  # the training rows (gold labels) and the unlabeled reviews (the teacher's)
METHOD = "integrated_gradients"
IG_STEPS = 7  # Gauss-Legendre nodes, no refinement (module doc)
SENTENCE_SHARE = 0.2  # of the review's evidence mass: at most five sentences of a review are kept
PHRASE_SHARE = 0.1
WORD_SHARE = 0.1
EDGE_SHARE = 0.25  # of a phrase's score, carried by each of its first and last words at least
AGREEMENT = 0.9  # training: a word or phrase is used with the label of at least this share of its occurrences
CONFIDENCE = 0.9  # unlabeled reviews: the teacher's calibrated P(label) of the whole review, at least
KINDS = ("sentence", "phrase", "word")
FORMAT = 1  # the cache's layout; a change makes old caches refused, not misread
# the header fields a later call (and training) must agree with: what decides which rows and snippets
CHECKED = ("format", "teacher_sha", "split", "val_size", "seed", "method", "ig_steps", "sentence_share",
           "phrase_share", "word_share", "edge_share", "confidence")


@dataclass(frozen=True)
class Snippet:
    text: str
    kind: str  # sentence | phrase | word
    score: float  # the span's attribution sum over the review's evidence mass; > 0 supports the label


def token_starts(text: str, pieces: list[Piece]) -> list[int | None]:
    """Where each token's first non-space character is in `text` (None: a token of white space only).
    A token belongs to the sentence, word or phrase that this character is in: byte-level BPE glues
    the space before a word to the word's token."""
    starts = []
    for p in pieces:
        chunk = text[p.start : p.end]
        stripped = chunk.lstrip()
        starts.append(p.start + len(chunk) - len(stripped) if stripped else None)
    return starts


@dataclass(frozen=True)
class Sentence:
    start: int  # character offsets into the review
    end: int
    tokens: list[int]  # the indices of its tokens
    total: float  # the sum of their scores; NaN when the model did not read one of them


def sentence_sums(text: str, pieces: list[Piece], scores: list[float]) -> list[Sentence]:
    """Every sentence of the review (`sentence_spans`, fragments included) with the sum of its
    tokens' scores; a token belongs to the sentence its first non-space character is in."""
    spans = sentence_spans(text, min_words=1)
    first_chars = [a for a, _ in spans]
    members: list[list[int]] = [[] for _ in spans]
    for t, start in enumerate(token_starts(text, pieces)):
        s = bisect.bisect_right(first_chars, start) - 1 if start is not None else -1
        if s >= 0 and start < spans[s][1]:
            members[s].append(t)
    return [Sentence(a, b, tokens, sum(scores[t] for t in tokens)) for (a, b), tokens in zip(spans, members,
                                                                                               strict=True)]


def review_evidence(text: str, pieces: list[Piece], scores: list[float]) -> list[Snippet]:
    """The snippets of one review that carry its label (module doc). `pieces`: the review's tokens
    (`tokenizer.pieces`); `scores`: one attribution per piece toward the label, NaN for a token the
    model did not read."""
    found = sentence_sums(text, pieces, scores)
    mass = sum(abs(s.total) for s in found if not math.isnan(s.total))
    snippets = []
    for sentence in found:
        if mass and sentence.total >= SENTENCE_SHARE * mass:  # False for NaN: a sentence the model did not read
            snippets.append(Snippet(text[sentence.start : sentence.end], "sentence", sentence.total / mass))
            snippets += short_spans(text, pieces, scores, sentence.tokens, mass)
    return snippets


def short_spans(text: str, pieces: list[Piece], scores: list[float], tokens: list[int], mass: float) -> list[Snippet]:
    """The words and 2-4-word phrases of one kept sentence (its `tokens`) that carry the label
    (module doc). A word is written between spaces, its leading and trailing punctuation left out
    ("doesn't", "beaten-up", "played" of "(played"), and has a letter; a span's score is the sum of
    all its tokens' scores (punctuation between its words included) over `mass`."""
    starts, words = token_starts(text, pieces), word_ids([p.text for p in pieces])
    groups: dict[int, list[int]] = {}  # word_ids' words: punctuation stands on its own
    for t in tokens:
        groups.setdefault(words[t], []).append(t)
    written: list[list[list[int]]] = []  # those groups joined where no space parts them
    for group in groups.values():
        if written and starts[group[0]] == pieces[written[-1][-1][-1]].end:
            written[-1].append(group)
        else:
            written.append([group])
    span_text = lambda first, last: text[starts[first] : pieces[last].end]
    units = []  # (first token, last token) of each word
    for word in written:
        inner = [g for g in word if any(c.isalnum() for c in span_text(g[0], g[-1]))]
        if inner and any(c.isalpha() for c in span_text(inner[0][0], inner[-1][-1])):
            units.append((inner[0][0], inner[-1][-1]))
    span_score = lambda first, last: sum(scores[first : last + 1])
    unit_scores = [span_score(*u) for u in units]
    snippets = [Snippet(span_text(*u), "word", score / mass) for u, score in zip(units, unit_scores, strict=True)
                if score >= WORD_SHARE * mass]
    phrases = []  # (score, first unit, last unit)
    for i in range(len(units)):
        for j in range(i + 1, min(i + 4, len(units) - 1 + i, len(units))):  # 2-4 words, fewer than the sentence's
            score = span_score(units[i][0], units[j][1])
            if score >= PHRASE_SHARE * mass and min(unit_scores[i], unit_scores[j]) >= EDGE_SHARE * score:
                phrases.append((score, i, j))
    taken: set[int] = set()
    for score, i, j in sorted(phrases, key=lambda w: (-w[0], w[1], w[2])):  # best first, without overlap
        if taken.isdisjoint(range(i, j + 1)):
            taken.update(range(i, j + 1))
            snippets.append(Snippet(span_text(units[i][0], units[j][1]), "phrase", score / mass))
    return snippets


def read_scores(model: Reader, tokenizer: BPETokenizer, candidates: list[list[int]], text: str,
                label: int) -> tuple[list[Piece], list[float]]:
    """The review's tokens and their integrated-gradients scores toward `label`, as the reader reads
    the review (`tokenization.cut_source`: head + tail past max_src_len); NaN for the tokens cut out."""
    pieces = tokenizer.pieces(text)
    read = cut_source(list(range(len(pieces))), model.reading)
    ids = torch.tensor([*(pieces[i].id for i in read), tokenizer.eos_id])
    result = attribute(model, ids, candidates, METHOD, label=label, steps=IG_STEPS, max_steps=IG_STEPS)
    scores = [math.nan] * len(pieces)
    for i, s in zip(read, result.scores[:-1].tolist(), strict=True):  # the end token is no part of the text
        scores[i] = s
    return pieces, scores


@torch.inference_mode()
def teacher_label(model: Reader, tokenizer: BPETokenizer, candidates: list[list[int]], text: str) -> tuple[int, float]:
    """The teacher's label of a whole review and its calibrated probability."""
    ids = torch.tensor(source_ids([text], tokenizer, model.reading))
    probs = model.log_probs(model.encode(ids)[0], candidates)[0].exp()
    return int(probs.argmax()), float(probs.max())


def cache_line(review: int, label: int | None, p: float | None, snippets: list[tuple[str, str, float]]) -> str:
    """One review's line of a cache (FORMAT, module doc): its row, label, the teacher's probability and its
    snippets as (text, kind, score)."""
    line = {"review": review, "label": label, "p": p,
            "snippets": [{"text": text, "kind": kind, "score": round(score, 4)} for text, kind, score in snippets]}
    return json.dumps(line, ensure_ascii=False) + "\n"


def held_out_free_rows(splits: dict, split: str, val_size: int, seed: int) -> list[int]:
    """The rows of `split` the evidence may come from, in file order: for "train" the training rows
    (`validation_split`'s first part), for "unsupervised" all; in both, none whose cleaned text is
    that of a held-out review."""
    if split not in splits:
        raise DataError(f"the data has no {split!r} split (it has {sorted(splits)})")
    train = splits["train"]
    train_rows, held_out = validation_split(len(train), val_size, seed)
    held_texts = set(clean_texts(text_column(train, "text", "train", held_out.tolist())))
    rows = train_rows.tolist() if split == "train" else range(len(splits[split]))
    texts = clean_texts(text_column(splits[split], "text", split, rows))
    return [r for r, t in zip(rows, texts, strict=True) if t not in held_texts]


def teacher_sha(teacher: str | Path) -> str:
    """The first 12 hex digits of the teacher's weights' SHA-256: names the cache, so that another
    teacher never extends this one's."""
    digest = hashlib.sha256()
    with open(Path(teacher) / WEIGHTS_NAME, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def json_lines(text: str) -> list[str]:
    """The lines of a JSON-lines file. Not `str.splitlines()`: that also splits at U+2028, U+0085
    and the like, which reviews contain and `json.dumps(ensure_ascii=False)` writes as they are."""
    return [line for line in text.split("\n") if line]


def read_cache(path: Path) -> tuple[dict | None, set[int]]:
    """(header, reviews done) of a cache file; (None, empty) when there is none. A torn last line
    (a build killed while writing) is cut off, so that the next line appended starts clean."""
    if not path.is_file():
        return None, set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        with open(path, "r+b") as f:
            f.truncate(len(data))
    lines = json_lines(data.decode("utf-8"))
    if not lines:
        return None, set()
    return json.loads(lines[0]), {json.loads(line)["review"] for line in lines[1:]}


def check_header(found: dict, expected: dict, path: Path, checked: tuple[str, ...] = CHECKED) -> None:
    """A later build into the file at `path` must agree with its header on the `checked` fields."""
    changed = [f"{k} {found.get(k)!r} (now {expected[k]!r})" for k in checked if found.get(k) != expected[k]]
    if changed:
        raise UsageError(f"{path} was built with {'; '.join(changed)}: build into another --out")


def reviews_to_do(out: Path, header: dict, checked: tuple[str, ...], splits: dict, split: str,
                  args: argparse.Namespace) -> tuple[dict | None, list[int]]:
    """(the header of the file at `out`, None when there is none yet; the rows of `split` that
    --start and --limit ask for and the file lacks). A file already there must agree with `header`
    on the `checked` fields. Shared by the builders of this module and `training.pseudo`."""
    if args.start < 0 or args.limit is not None and args.limit < 1:
        raise UsageError("--start must be >= 0 and --limit >= 1")
    found, done = read_cache(out)
    if found is not None:
        check_header(found, header, out, checked)
    rows = held_out_free_rows(splits, split, args.val_size, args.seed)
    rows = rows[args.start : None if args.limit is None else args.start + args.limit]
    todo = [r for r in rows if r not in done]
    print(f"{split}: {len(rows):,} reviews asked for, {len(rows) - len(todo):,} already in {out}, "
          f"{len(todo):,} to do", file=sys.stderr)
    return found, todo


def read_for_training(path: str | Path, flag: str, fmt: int, builder: str, val_size: int,
                      seed: int) -> tuple[dict, list[str]]:
    """(header, review lines) of a file a training run reads (`flag`: --evidence, --pseudo-labels),
    refused unless it is of this version (`fmt`, made by the module `builder`) and holds out this
    run's rows (--val-size, --seed): otherwise its reviews could be this run's held-out ones."""
    if not Path(path).is_file():
        raise UsageError(f"{flag} {path}: no such file")
    lines = json_lines(Path(path).read_text(encoding="utf-8"))
    header = json.loads(lines[0]) if lines else {}
    if header.get("format") != fmt:
        raise UsageError(f"{flag} {path}: not a file of this version (python -m {builder})")
    if (header["val_size"], header["seed"]) != (val_size, seed):
        raise UsageError(f"{flag} {path} holds out --val-size {header['val_size']} --seed {header['seed']}, "
                         f"this run {val_size} and {seed}: its reviews may be this run's held-out ones")
    return header, lines[1:]


def load_evidence(paths: list[str] | tuple[str, ...], val_size: int, seed: int) -> tuple[list[str], list[int], dict]:
    """(texts, labels, counts) of the snippets of the evidence caches at `paths`, in file order, for
    training (`--evidence`). A cache built with other held-out rows (--val-size, --seed) is refused:
    its reviews could be this run's held-out ones. A word or phrase (case aside) is used only with a
    label that at least `AGREEMENT` of its occurrences carry: one review's attribution can single
    out "the" or "and", the reviews of both labels together cannot."""
    found = []  # (text, label, kind)
    for path in paths:
        _, lines = read_for_training(path, "--evidence", FORMAT, "training.evidence", val_size, seed)
        for line in lines:
            try:
                review = json.loads(line)
            except json.JSONDecodeError:  # a torn last line of a build still running
                continue
            found += [(s["text"], review["label"], s["kind"]) for s in review["snippets"]]
    labels_of = defaultdict(Counter)
    for text, label, kind in found:
        if kind != "sentence":
            labels_of[text.casefold()][label] += 1
    kept = [(text, label, kind) for text, label, kind in found if kind == "sentence"
            or labels_of[text.casefold()][label] >= AGREEMENT * labels_of[text.casefold()].total()]
    counts = {kind: sum(k == kind for _, _, k in kept) for kind in KINDS}
    return [t for t, _, _ in kept], [y for _, y, _ in kept], counts


def build_parser() -> Parser:
    p = Parser("python -m training.evidence", __doc__)
    p.add_argument("--teacher", default="checkpoints/sentiment", help="the full-review classifier's checkpoint")
    add_held_out_arguments(p)  # --data-dir, and --val-size/--seed: which rows are held out
    p.add_argument("--split", required=True, choices=SPLITS,
                   help="train: the training rows, with their labels; unsupervised: the unlabeled reviews, "
                        "with the teacher's confident labels")
    p.add_argument("--out", help="the cache (default: runs/evidence/<teacher sha>-<split>.jsonl)")
    p.add_argument("--start", type=int, default=0, help="first review, counted among the split's usable rows")
    p.add_argument("--limit", type=int, help="reviews from --start (default: all)")
    p.add_argument("--precision", choices=list(PRECISIONS), default="auto",
                   help="bf16 autocast where the CPU has it natively (auto), or fp32")
    return p


def build(args: argparse.Namespace) -> Path:
    """Append the evidence of the requested reviews not yet in the cache; returns the cache path."""
    sha = teacher_sha(args.teacher)
    out = Path(args.out or f"runs/evidence/{sha}-{args.split}.jsonl")
    header = {"format": FORMAT, "teacher": str(args.teacher), "teacher_sha": sha, "split": args.split,
              "data_dir": str(args.data_dir), "val_size": args.val_size, "seed": args.seed, "method": METHOD,
              "ig_steps": IG_STEPS, "sentence_share": SENTENCE_SHARE, "phrase_share": PHRASE_SHARE,
              "word_share": WORD_SHARE, "edge_share": EDGE_SHARE, "confidence": CONFIDENCE}
    splits = load_splits(args.data_dir)
    found, todo = reviews_to_do(out, header, CHECKED, splits, args.split, args)
    if not todo:
        return out
    ds = splits[args.split]
    texts = clean_texts(text_column(ds, "text", args.split, todo))
    model = Reader.from_pretrained(args.teacher).eval()
    tokenizer, candidates = model.tokenizer, model.candidates
    gold = label_column(ds, "label", args.split, model.labels) if args.split == "train" else None
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(out, "a", encoding="utf-8") as f, autocast("cpu", resolve_precision(args.precision, "cpu")):
        if found is None:
            f.write(json.dumps(header) + "\n")
        bar = tqdm(zip(todo, texts, strict=True), total=len(todo), desc=f"evidence {args.split}", unit="review",
                   mininterval=30.0, file=sys.stderr)
        for row, text in bar:
            if gold is not None:
                label, p = gold[row], None
            else:
                label, p = teacher_label(model, tokenizer, candidates, text)
                label = label if p >= CONFIDENCE else None
            snippets = [] if label is None else review_evidence(text, *read_scores(model, tokenizer, candidates,
                                                                                     text, label))
            f.write(cache_line(row, label, p, [(s.text, s.kind, s.score) for s in snippets]))
            f.flush()
    elapsed = time.perf_counter() - started
    print(f"{len(todo):,} reviews in {elapsed:.0f} s ({elapsed / len(todo):.2f} s a review) -> {out}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> Path:
    parser = build_parser()
    return one_line_errors(parser, build, parser.parse_args(argv))


if __name__ == "__main__":
    main()

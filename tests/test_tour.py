"""The "How it works" tour (`demo/views/tour/`, `demo/tabs/tour.py`): every step's values against an
independent computation, the hand recomputations (a case that passes and a corrupted capture that
fails and shows its notice), the lesson texts, the code ranges, the toy, and bad input."""

import math
import textwrap
from dataclasses import replace

import numpy as np
import pytest
import torch

from classifier import ClassifierConfig
from demo.serving import LM, SENTIMENT, Checkpoint, DemoError, DemoService
from demo.tabs import tour as tour_tab
from demo.text import TOY_NOTE
from demo.tiny import REPO_ROOT, make_tiny_checkpoints, shared_tiny_checkpoints
from demo.views import tour
from demo.views.sentiment import labels_and_candidates, read_source, reader_of
from demo.views.tokens import EMPTY_TEXT
from demo.views.tour import lesson_text
from demo.views.toy import SHAPE, toy_checkpoint, toy_tokenizer
from inspection.experiments import classifier_experiment
from model import EncoderDecoder, EncoderDecoderConfig, current_names
from tokenization import read_review, source_ids

LM_KEYS = ["tokens", "embedding", "position", "norm", "qkv", "scores", "scaling", "mask", "softmax", "weighted_sum",
           "heads", "residual", "ffn", "stack", "logits", "probabilities", "sampling"]
LEARN_KEYS = ["loss", "gradient", "update"]
SENTIMENT_KEYS = ["source_tokens", "source_embedding", "qkv", "scores", "scaling", "padding_mask", "softmax", "memory",
                  "decoder_input", "cross", "label"]
FITTED = 0.932732880115509  # the shipped classifier's fitted temperature, as its classifier.json writes it
LABELS = ClassifierConfig(labels=["negative", "positive"])  # a test classifier's settings: nothing fitted
# what each step's source lines must hold: the computation the step names
COMPUTATION = {
    "tokens": "models.BPE()", "source_tokens": "cut_source(", "embedding": "self.lut(idx) * self.scale",
    "position": "torch.sin", "source_embedding": "self.src_pos(", "norm": "self.norm(x)", "qkv": "self.in_proj(x)",
    "scores": "q @ k.transpose", "scaling": "/ math.sqrt", "mask": ".tril(", "padding_mask": "mask & causal",
    "softmax": "softmax", "weighted_sum": "@ v", "heads": "self.out_proj(out)", "residual": "(kept + self.dropout",
    "ffn": "GELU", "stack": "layer(", "memory": "layer(", "logits": "lut.weight",
    "probabilities": "softmax(-1)", "sampling": "top_p", "decoder_input": "bos_token_id",
    "cross": "memory", "label": "log_softmax", "loss": "loss.backward()", "gradient": ".norm()",
    "update": "optimizer.step()",
}


@pytest.fixture(scope="module")
def service() -> DemoService:
    return DemoService(shared_tiny_checkpoints(), device="cpu")


def by_key(t: tour.Tour) -> dict[str, tour.Step]:
    return {s.key: s for s in t.steps}


def lm_ids(service: DemoService, text: str) -> list[int]:
    tok = service.lm.tokenizer
    return [tok.bos_id, *tok.encode(text)]


# -- the language model's track -------------------------------------------------------------------


@pytest.mark.parametrize("layer, head", [(0, 0), (1, 1)])
def test_lm_steps_equal_an_independent_computation(service: DemoService, layer: int, head: int) -> None:
    t = tour.tour(service, "This movie was", "lm", layer, head)
    steps = by_key(t)
    assert [s.key for s in t.steps] == LM_KEYS and len(t.steps) >= 14
    assert all(c.ok for s in t.steps for c in s.checks) and all(s.checks for s in t.steps if s.key in (
        "embedding", "position", "norm", "qkv", "mask", "softmax", "weighted_sum", "heads", "residual", "ffn", "stack",
        "logits", "probabilities", "sampling"))
    model = service.lm.model
    ids = lm_ids(service, "This movie was")
    with torch.inference_mode():
        out = model(torch.tensor([ids]), output_attentions=True)
    weights = out.attentions[layer].weights[0, head].numpy()
    np.testing.assert_allclose(steps["softmax"].panels[0].values, weights, atol=1e-5)
    np.testing.assert_allclose(steps["softmax"].panels[0].values.sum(-1), 1, atol=1e-6)  # rows sum to 1
    assert (steps["softmax"].panels[0].values[np.triu_indices(len(ids), 1)] == 0).all()  # the causal mask
    assert steps["mask"].panels[0].masked.tolist() == np.triu(np.ones((len(ids),) * 2, bool), 1).tolist()
    probs = torch.softmax(out.logits[0, -1].double(), -1).numpy()
    np.testing.assert_allclose(steps["probabilities"].panels[0].values, probs, atol=1e-6)
    lut = model.embed.lut.weight.detach().numpy()
    np.testing.assert_allclose(steps["embedding"].panels[0].values, lut[ids] * math.sqrt(model.config.d_model),
                               atol=1e-5)
    d_k = model.config.d_model // model.config.n_head
    q, k = (p.values for p in steps["qkv"].panels[:2])
    np.testing.assert_allclose(steps["scaling"].panels[0].values, q @ k.T / math.sqrt(d_k), atol=1e-5)
    assert t.layer == layer and t.head == head and f"layer {layer + 1}, head {head + 1}" in steps["qkv"].title
    c = model.config  # the feed-forward networks' share of the parameters, counted from the shapes
    ffn, total = c.n_layer * (2 * c.d_model * c.d_ff + c.d_ff + c.d_model), sum(p.numel() for p in model.parameters())
    assert f"hold {ffn / total:.0%} of the model's parameters ({ffn:,} of {total:,})" in steps["ffn"].explanation


def test_positional_encoding_matches_the_seed_table() -> None:
    """../shared/seeds/002_*.txt's table, its first two columns (sin p, cos p), to 4 decimals."""
    pe = tour.sinusoids(4, 6).numpy()
    np.testing.assert_allclose(pe[:, :2], [[0, 1], [0.8415, 0.5403], [0.9093, -0.4161], [0.1411, -0.9900]], atol=1e-4)
    np.testing.assert_allclose(pe[1, 2], math.sin(1 / 10000 ** (2 / 6)))


def test_masked_softmax_matches_the_seed_worked_example() -> None:
    """../shared/seeds/002_*.txt, sections 3-5: masked scores S -> weights W (printed to 3 decimals)."""
    s = torch.tensor([[0.20, 0.33, 0.37, 0.34], [0.22, 0.40, 0.42, 0.31],
                      [0.29, 0.40, 0.46, 0.22], [0.29, 0.37, 0.45, 0.23]], dtype=torch.float64)
    w = tour.softmax(s.masked_fill(~tour.allowed(4, 4, None, True), -math.inf))
    np.testing.assert_allclose(w.numpy(), [[1, 0, 0, 0], [0.455, 0.545, 0, 0], [0.303, 0.338, 0.359, 0],
                                           [0.238, 0.258, 0.280, 0.224]], atol=5e-4)
    assert tour.softmax(torch.full((1, 3), -math.inf)).tolist() == [[0, 0, 0]]  # a row that sees nothing: zeros


def test_sampling_step_is_the_samplers_distribution_and_its_draw(service: DemoService) -> None:
    from model.generation import sampling_distribution, select_token

    t = tour.tour(service, "The acting was", "lm")
    step = by_key(t)["sampling"]
    with torch.inference_mode():
        logits = service.lm.model(torch.tensor([lm_ids(service, "The acting was")])).logits[0, -1]
    expected = sampling_distribution(logits, tour.SAMPLING).double().numpy()
    np.testing.assert_allclose(step.panels[0].values, expected, atol=1e-6)
    kept = int((expected > 0).sum())
    assert kept <= tour.SAMPLING.top_k and f"{kept} tokens above 0" in step.shape
    drawn = select_token(logits, tour.SAMPLING, torch.Generator().manual_seed(tour.SAMPLING.seed))
    assert step.panels[0].rows[drawn].endswith("◀ drawn") and step.link == "sampling"
    assert by_key(t)["stack"].link == "lens"


# -- recomputation: a mismatch is shown and fails -------------------------------------------------


def test_a_corrupted_capture_fails_its_check_and_the_step_says_so(service: DemoService) -> None:
    p, _ = tour.lm_pass(service.lm, "This movie was", 0)
    good = tour.steps(p, 0)
    assert not [s.key for s in good if s.mismatches]
    weights = p.values["weights"].clone()
    weights[0, -1] = torch.eye(weights.size(-1))[0]  # head 1's last row on the first token: sums to 1, not the model's
    logits = p.values["logits"] + 0.01
    bad = by_key(tour.Tour(LM, False, "", 0, 0, 2, 2, tour.steps(
        replace(p, values={**p.values, "weights": weights, "logits": logits}), 0), [], []))
    assert [s.key for s in bad.values() if s.mismatches] == ["softmax", "heads", "stack", "logits"]  # and readers
    mismatch = bad["softmax"].mismatches[0]
    assert not mismatch.ok and mismatch.error > 0.01 and "attention weights" in mismatch.what
    t = tour.Tour(LM, False, "", 0, 0, 2, 2, list(bad.values()), [], [])
    words = tour_tab.step_markdown(t, LM_KEYS.index("softmax"), bad["softmax"])
    assert "⚠️ Mismatch" in words and "attention weights" in words
    assert "⚠️" not in tour_tab.step_markdown(t, 0, bad["tokens"])


def test_check_compares_values_and_shapes() -> None:
    mine = torch.tensor([1.0, -math.inf], dtype=torch.float64)
    ok = tour.check("x", mine, torch.tensor([1.0 + 1e-6, -math.inf], dtype=torch.float64))
    assert ok.ok and ok.error == pytest.approx(1e-6, rel=1e-6) and ok.sentence().startswith("✓")
    assert not tour.check("x", torch.tensor([1.0]), torch.tensor([1.1])).ok
    assert not tour.check("x", torch.zeros(2), torch.zeros(3)).ok


# -- the sentiment track --------------------------------------------------------------------------


def test_sentiment_track_pads_masks_and_cross_attends(service: DemoService) -> None:
    text = "A wonderful film, I loved it."
    t = tour.tour(service, text, "sentiment", 1, 1)
    steps = by_key(t)
    assert [s.key for s in t.steps] == SENTIMENT_KEYS and all(c.ok for s in t.steps for c in s.checks)
    model, tok = service.sentiment.require()
    labels, candidates = labels_and_candidates(service.sentiment)
    reader = reader_of(service.sentiment)  # at its temperature (classifier.json)
    with torch.inference_mode():  # the classifier's own reading in float32 (the Sentiment tab may run bf16)
        memory = model.encode(torch.tensor(source_ids([text], tok, reader.reading)))[0]
        expected = reader.log_probs(memory, candidates)[0].exp().tolist()
    classified = dict(zip(labels, expected, strict=True))
    assert t.label_probabilities == pytest.approx(classified, abs=1e-5)
    assert sum(t.label_probabilities.values()) == pytest.approx(1)
    tokens = steps["source_tokens"].panels[0].rows
    assert tokens[-tour.PADDING:] == ["<pad>"] * tour.PADDING and tokens[-tour.PADDING - 1] == "</s>"
    weights = steps["softmax"].panels[0].values  # encoder self-attention: padding keys get 0
    assert (weights[:, -tour.PADDING:] == 0).all() and np.allclose(weights.sum(-1), 1)
    cross = steps["cross"].panels[0]
    best = labels.index(max(classified, key=classified.get))
    assert cross.rows[0] == "<s>" and len(cross.rows) == len(candidates[best]) + 1  # queries: the label written
    assert cross.columns == tokens and (cross.values[:, -tour.PADDING:] == 0).all()  # keys: the review
    src = torch.tensor([steps["source_tokens"].panels[0].values[:-tour.PADDING].tolist()])
    with torch.inference_mode():  # the model's own cross-attention of the same review, unpadded
        memory, _ = model.encode(src)
        _, maps = model.decode(torch.tensor([model.config.decoder_input_ids(candidates[best])]), memory,
                               output_attentions=True)
    layer = min(1, model.config.n_decoder_layer - 1)
    expected = next(m for m in maps if m.kind == "cross" and m.layer == layer).weights[0, 1].numpy()
    np.testing.assert_allclose(cross.values[:, :-tour.PADDING], expected, atol=1e-5)


def test_label_words_of_different_lengths_are_toured_by_the_winners_own_rows(service, monkeypatch) -> None:
    """The decoder scores every label in one pass, the shorter ones padded to the longest (a tokenizer
    trained on other text can split "negative" into more pieces than "positive"): the cross-attention
    step shows the winning label's own rows, and its checks against the model still hold."""
    model, tok = service.sentiment.require()
    labels, _ = labels_and_candidates(service.sentiment)
    short, long = [tok.encode(" great")[0]], tok.encode(" not good at all")
    assert len(long) > 2
    # one token and its end cost far less log-probability than four and theirs: the short one wins
    monkeypatch.setattr(tour.sentiment, "label_words", lambda ckpt: (labels, [short, long]))
    t = tour.tour(service, "A fine film.", "sentiment", 0, 0)
    assert all(c.ok for s in t.steps for c in s.checks), [c for s in t.steps for c in s.checks if not c.ok]
    cross = by_key(t)["cross"].panels[0]
    assert max(t.label_probabilities, key=t.label_probabilities.get) == labels[0]
    assert cross.rows[0] == "<s>" and len(cross.rows) == 2  # <s> and the one piece written, not the padding


def test_a_causal_encoder_masks_the_future_too() -> None:
    """With `causal_encoder` the encoder keeps the LM's causal mask: the tour masks both, and says so."""
    torch.manual_seed(0)
    model = EncoderDecoder(EncoderDecoderConfig(vocab_size=toy_tokenizer().vocab_size, max_src_len=8, max_tgt_len=4,
                                                n_encoder_layer=1, n_decoder_layer=1, causal_encoder=True,
                                                **SHAPE)).eval()
    ckpt = Checkpoint(SENTIMENT, "test", "ready", model=model, tokenizer=toy_tokenizer(), classifier=LABELS)
    steps = by_key(tour.tour_of(ckpt, "this film was great"))
    assert all(c.ok for s in steps.values() for c in s.checks)
    masked = steps["padding_mask"].panels[0].masked
    assert masked[np.triu_indices(len(masked), 1)].all() and "causal mask" in steps["padding_mask"].explanation
    assert (steps["softmax"].panels[0].values[np.triu_indices(len(masked), 1)] == 0).all()
    # the memory: only the last token has read the whole review (a both-ways encoder: every token has)
    assert "only the last one, `</s>`, has read the whole review" in steps["memory"].explanation
    toy = by_key(tour.tour_of(toy_checkpoint(SENTIMENT), "this film was great"))  # the toy: the same causal encoder
    assert "causal" in toy["memory"].explanation
    assert (toy["softmax"].panels[0].values[np.triu_indices(len(masked), 1)] == 0).all()


# -- the toy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [LM, SENTIMENT])
def test_the_toy_is_small_enough_to_read_and_checks_like_the_real_model(service: DemoService, model: str) -> None:
    t = tour.tour(service, "This movie was not good", model, 0, 1, toy=True)
    ckpt = toy_checkpoint(model)
    assert ckpt.model.config.d_model == 8 and ckpt.model.config.n_head == 2 and t.toy and TOY_NOTE in t.notices
    assert all(c.ok for s in t.steps for c in s.checks)
    weights = torch.cat([p.flatten() for n, p in ckpt.model.named_parameters() if "norm" not in n and "bias" not in n])
    assert torch.equal(weights, (weights * 10).round() / 10)  # one decimal each: products a learner can redo
    qkv = by_key(t)["qkv"]
    assert qkv.panels[0].values.shape[1] == 4  # d_k = 8 / 2
    assert "+" in qkv.worked and "…" not in qkv.worked  # every product of the dot product written out
    figure = tour_tab.plots.tour_panel_figure(qkv.panels[0], numbers=True)
    assert figure.data[0].texttemplate == "%{z:.2f}"  # every number in its cell


# every config field that is not a size (widths, counts, lengths) or a training setting (dropout): what makes the
# architecture (the labels and temperatures are classifier.json's, compared apart); the model class and its
# parameters' names (tied embeddings: one table, no separate output matrix; pre-norm: a final norm on each stack)
# are compared too
SIZES = {"vocab_size", "n_head", "d_model", "d_ff", "block_size", "n_layer", "max_src_len", "max_tgt_len",
         "n_encoder_layer", "n_decoder_layer"}
NOT_ARCHITECTURE = {"dropout", "attention_dropout"}


def structure(config) -> dict:
    from dataclasses import asdict
    return {k: v for k, v in asdict(config).items() if k not in SIZES | NOT_ARCHITECTURE}


@pytest.mark.parametrize("model, folder", [(LM, "lm"), (SENTIMENT, "sentiment")])
def test_each_toy_has_its_shipped_models_architecture(model: str, folder: str) -> None:
    """Issue 50, finding 2: the toy is the shipped model at another size, the classifier's causal encoder included."""
    import json
    import re

    from safetensors import safe_open

    shipped = REPO_ROOT / "checkpoints" / folder
    if not (shipped / "model.safetensors").is_file():
        pytest.skip(f"no shipped {folder} checkpoint")
    toy = toy_checkpoint(model).model
    config = type(toy.config)(**{k: v for k, v in json.loads((shipped / "config.json").read_text()).items()
                                 if k != "model_type"})
    assert structure(toy.config) == structure(config)
    assert set(structure(config)) >= {"norm_first", "pad_token_id", "bos_token_id", "eos_token_id"}
    assert model == LM or {"causal_encoder", "reverse"} <= set(structure(config))
    with safe_open(shipped / "model.safetensors", "pt") as f:
        names = set(current_names(dict.fromkeys(f.keys())))  # the shipped file's names, as loading reads them

    def shape(keys):  # parameter names, layers counted once
        return {re.sub(r"\.\d+\.", ".N.", k) for k in keys}
    assert shape(toy.state_dict()) == shape(names)
    if model == SENTIMENT:  # the shipped labels; nothing fitted: the toy is untrained
        settings = ClassifierConfig.from_pretrained(shipped)
        assert toy_checkpoint(model).classifier == replace(settings, temperature=1.0, pair_temperature=1.0,
                                                          src_keep_tail=0)


def test_numbers_are_written_for_people_and_each_sentence_is_true_of_its_model(service: DemoService) -> None:
    """Issue 50, finding 3."""
    toy = by_key(tour.tour(service, "this movie was not good", "lm", toy=True))
    real = by_key(tour.tour(service, "This movie was not good", "lm"))
    for steps in (toy, real):
        assert "e^{" not in steps["probabilities"].worked and "exp(" in steps["probabilities"].worked
        assert " .." not in steps["sampling"].explanation
    vocab = toy_tokenizer().vocab_size
    assert tour.SAMPLING.top_k > vocab and "so top-k keeps them all" in toy["sampling"].explanation
    assert f"{vocab} tokens → top-k: {vocab} →" in toy["sampling"].worked
    assert f"keeps the {tour.SAMPLING.top_k} most likely tokens (top-k)" in real["sampling"].explanation
    assert "rare ones several" not in toy["tokens"].explanation and "<unk>" in toy["tokens"].explanation
    assert "rare ones several" in real["tokens"].explanation
    # the classifier: its temperature rounded, and called fitted only when it was
    fitted = EncoderDecoder(EncoderDecoderConfig(vocab_size=toy_tokenizer().vocab_size, max_src_len=8, max_tgt_len=4,
                                                 n_encoder_layer=1, n_decoder_layer=1, causal_encoder=True,
                                                 **SHAPE)).eval()
    label = by_key(tour.tour_of(Checkpoint(SENTIMENT, "test", "ready", model=fitted, tokenizer=toy_tokenizer(),
                                           classifier=replace(LABELS, temperature=FITTED)),
                                "this film was great"))["label"].explanation
    assert "T = 0.933 fitted on held-out reviews" in label and "0.932733" not in label
    untrained = by_key(tour.tour(service, "this film was great", "sentiment", toy=True))
    assert "T = 1: no temperature was fitted" in untrained["label"].explanation
    assert "fitted temperature 1" not in untrained["label"].explanation
    # the label word as the tokenizer's pieces, said so
    words = by_key(tour.tour(service, "A fine film.", "sentiment"))["decoder_input"]
    pieces = words.panels[0].rows[1:]
    assert ("is not one piece of its vocabulary" in words.explanation) == (len(pieces) > 1)
    assert "is one piece of the vocabulary" in untrained["decoder_input"].explanation


def test_every_heatmap_has_a_colour_scale_every_key_column_and_its_numbers_in_a_table(service: DemoService) -> None:
    """Issue 50, finding 5: no value only on hover, no key column hidden (the diagonal of the last rows); issue
    61, item 4: the pass reads every token, a picture draws the last `MAX_TOUR_TOKENS` and its subtitle says so."""
    text = "word " * 15  # more tokens than a picture draws, fewer than the tiny model's context
    t = tour.tour(service, text, "lm")
    attention = by_key(t)["softmax"].panels[0]
    n, window = len(attention.rows), tour.MAX_TOUR_TOKENS
    assert n == len(lm_ids(service, t.text)) > window
    figure = tour_tab.plots.tour_panel_figure(attention)
    assert figure.data[0].z.shape == (window, window)  # the last rows, and the same keys: their diagonal
    np.testing.assert_allclose(figure.data[0].z[-1], attention.values[-1, -window:], atol=1e-6)
    assert list(figure.layout.yaxis.ticktext) == attention.rows[-window:]
    assert figure.layout.title.subtitle.text == f"tokens {n - window + 1} to {n} of {n} (rows and keys)"
    assert tour_tab.plots.tour_panel_figure(attention, show_all=True).data[0].z.shape == (n, n)
    for s in t.steps:
        for panel in s.panels:
            if panel.kind in ("signed", "weights"):
                assert tour_tab.plots.tour_panel_figure(panel).data[0].showscale, (s.key, panel.name)
    table = tour_tab.plots.tour_numbers_html([attention])
    assert table.count("<tr>") == window + 1 and f"<td>{attention.values[-1, -1]:.3f}</td>" in table
    assert f"(tokens {n - window + 1} to {n} of {n} (rows and keys): tick" in table
    queries = by_key(t)["qkv"].panels[0]  # dimensions: the first 16 by default, every one on request
    assert tour_tab.plots.tour_panel_figure(queries).data[0].z.shape[1] == 16
    assert tour_tab.plots.tour_panel_figure(queries, show_all=True).data[0].z.shape[1] == queries.values.shape[1]
    assert f"{queries.values[-1, -1]:.3f}</td></tr>" in tour_tab.plots.tour_numbers_html([queries], show_all=True)
    view = tour_tab.show(t, LM_KEYS.index("softmax"), False)
    assert any("<table>" in str(v.get("value", "")) for v in view if isinstance(v, dict))
    assert "hover or tap" in view[0] and "hover for" not in view[0]


def test_toy_vocabulary_reads_words_and_unknowns() -> None:
    tok = toy_tokenizer()
    assert [p.text for p in tok.pieces("This movie, was great")] == ["this", "movie", "<unk>", "was", "great"]
    assert tok.vocab_size == 20


# -- the lesson texts ----------------------------------------------------------------------------------


def states(service: DemoService):
    """(track, state) for passes that between them take every branch of every step's text."""
    causal = EncoderDecoder(EncoderDecoderConfig(vocab_size=toy_tokenizer().vocab_size, max_src_len=8, max_tgt_len=4,
                                                 n_encoder_layer=1, n_decoder_layer=1, causal_encoder=True,
                                                 **SHAPE)).eval()
    settings = replace(LABELS, temperature=FITTED)
    for ckpt, layer, head in [(service.lm, 0, 0), (service.lm, 1, 1), (service.sentiment, 1, 1),
                              (toy_checkpoint(LM), 0, 1), (toy_checkpoint(SENTIMENT), 0, 0),
                              (Checkpoint(SENTIMENT, "test", "ready", model=causal, tokenizer=toy_tokenizer(),
                                          classifier=settings), 0, 0)]:
        track = tour.TRACKS[ckpt.name]
        p, _ = track.run(ckpt, "this film was not great", layer)
        yield track, track.state(p, head)


def test_every_step_has_its_text_and_fills_exactly_its_placeholders(service: DemoService) -> None:
    lessons = lesson_text.load(list(tour.REGISTRY))  # every registered step's file, well formed
    assert set(tour.REGISTRY) == {id for track in tour.TRACKS.values() for id in track.steps}
    assert all(spec.tracks for spec in tour.REGISTRY.values())
    parts_used = set()
    for track, state in states(service):
        for id in track.steps:
            built = tour.REGISTRY[id].build(state)
            assert lessons[id].placeholders() == set(built.fills), id  # each one filled, each fill used
            lesson_text.render(lessons[id], built.fills)
            parts_used |= {(id, v.name) for v in built.fills.values() if isinstance(v, lesson_text.Part)}
    assert parts_used == {(id, part) for id, lesson in lessons.items() for part in lesson.parts}  # none left unused


def test_the_lesson_loader_reports_every_problem_at_once(tmp_path) -> None:
    for path in lesson_text.FOLDER.glob("*.md"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "qkv.md").unlink()
    (tmp_path / "qvk.md").write_text("# Typo\n\nA paragraph.\n\n## Formula\n\n$$x$$\n\n## Tensor\n\nx\n")
    (tmp_path / "scores.md").write_text("# Scores\n\nA paragraph.\n\n## Tensor\n\n({{n}}, {{n}})\n")
    (tmp_path / "mask.md").write_text("No title.\n")
    text = (tmp_path / "softmax.md").read_text(encoding="utf-8")
    (tmp_path / "softmax.md").write_text(text + "\n## Notes\n\nmore\n", encoding="utf-8")
    with pytest.raises(lesson_text.LessonError) as error:
        lesson_text.load(list(tour.REGISTRY), tmp_path)
    message = str(error.value)
    for expected in ["lessons/qkv.md: missing", "lessons/qvk.md: no step is called 'qvk'",
                     "lessons/scores.md: no `## Formula` section", "lessons/mask.md: the first line must be the title",
                     "lessons/softmax.md: unknown section '## Notes'"]:
        assert expected in message, (expected, message)
    lesson, problems = lesson_text.parse("x", "# At {{where}}\n\nRow {{row}}.\n\n## Formula\n\n$$y$$\n\n"
                                              "## Tensor\n\n({{n}},)\n")
    assert not problems and lesson.placeholders() == {"where", "row", "n"}
    with pytest.raises(lesson_text.LessonError, match=r"fills no \{\{n\}\}, \{\{row\}\} \(it fills: where\)"):
        lesson_text.render(lesson, {"where": "layer 1"})
    with pytest.raises(lesson_text.LessonError, match="no `## Part: gone`"):
        lesson_text.render(lesson, {"where": "", "row": lesson_text.Part("gone"), "n": 3})
    shown = lesson_text.render(lesson, {"where": "", "row": 0, "n": 3})  # nothing filled: the space before goes too
    assert (shown.title, shown.explanation, shown.shape) == ("At", "Row 0.", "(3,)")


# -- the code each step shows -----------------------------------------------------------------------


def test_every_step_shows_the_lines_of_its_computation_read_from_the_file() -> None:
    assert set(tour.REGISTRY) == set(LM_KEYS) | set(SENTIMENT_KEYS) | set(LEARN_KEYS) == set(COMPUTATION)
    for key, needle in COMPUTATION.items():
        code = tour.code_range(key)
        where = "tokenization/" if key in ("tokens", "source_tokens") else "inspection/" if key in LEARN_KEYS \
            else "model/"
        assert code.path.startswith(where), key
        text = (REPO_ROOT / code.path).read_text(encoding="utf-8").splitlines()
        assert list(code.lines) == text[code.first_line - 1:code.last_line], key
        assert 1 <= code.first_line <= code.last_line and code.last_line - code.first_line < 20, key
        assert needle in "\n".join(code.lines), (key, needle)


def test_the_displayed_code_is_the_files_lines(service: DemoService) -> None:
    step = by_key(tour.tour(service, "This movie was", "lm"))["scaling"]
    code = step.code()
    shown = tour_tab.code_markdown(step)
    assert f"`{code.path}:{code.first_line}" in shown
    body = shown.split("```python\n")[1].split("\n```")[0].splitlines()
    numbers = [int(line.split()[0]) for line in body]
    assert numbers == list(range(code.first_line, code.last_line + 1))
    file_lines = (REPO_ROOT / code.path).read_text(encoding="utf-8").splitlines()[code.first_line - 1:code.last_line]
    assert [line[6:] for line in body] == textwrap.dedent("\n".join(file_lines)).split("\n")


def test_a_code_entry_that_no_longer_matches_is_reported(monkeypatch) -> None:
    spec = tour.REGISTRY["scaling"]
    monkeypatch.setitem(tour.REGISTRY, "scaling", replace(spec, code=tour.CodeRef("model.attention.attention", "nope")))
    with pytest.raises(LookupError, match="scaling"):
        tour.code_range("scaling")
    step = tour.Step("scaling", "", "", "", "", [])
    assert step.code() is None and "not found" in tour_tab.code_markdown(step)


# -- input and the JSON -------------------------------------------------------------------------------


def test_bad_input_is_one_line(service: DemoService) -> None:
    for text in ("", "   ", None):
        with pytest.raises(DemoError, match=EMPTY_TEXT):
            tour.tour(service, text, "lm")
    with pytest.raises(DemoError, match="Unknown model"):
        tour.tour(service, "This movie was", "gpt-5")
    long = tour.tour(service, "word " * 200, "lm", layer=99, head=-3)
    assert any("no layer 100" in n for n in long.notices)
    # issue 61, item 4: the pictures and the experiments read the same tokens, the whole text up to the context
    context = service.lm.model.config.block_size
    read = [service.lm.tokenizer.bos_id, *lm_ids(service, long.text)[-(context - 1):]]
    assert long.experiments.ids == read and len(long.steps[0].panels[0].rows) == context
    assert f"Your text is {len(lm_ids(service, long.text)) - 1:,} tokens, more than the model's context of " \
        f"{context}: every step and experiment reads its last {context - 1} (from “word" in long.notices[-2]
    assert long.notices[-1] == f"The pictures draw the last {tour.MAX_TOUR_TOKENS} of the {context} tokens; every " \
        f"step and experiment reads all {context}."
    short = tour.tour(service, "This movie was", "lm")
    assert short.experiments.ids == lm_ids(service, "This movie was") and not short.notices
    assert (long.layer, long.head) == (1, 0)
    toy = tour.tour(service, "this " * 50, "lm", toy=True)
    assert len(toy.steps[0].panels[0].rows) == toy_checkpoint(LM).model.config.block_size
    review = tour.tour(service, "fine " * 400, "sentiment")  # the encoder's window, the pads in it
    assert len(review.steps[0].panels[0].rows) == service.sentiment.model.config.max_src_len
    assert review.notices[-1].startswith(f"The pictures draw the last {tour.MAX_TOUR_TOKENS} of the ")


def test_tour_json_holds_the_steps_and_the_outcome(service: DemoService) -> None:
    lm = tour.tour_json(tour.tour(service, "This movie was", "lm"))
    assert len(lm["steps"]) >= 14 and "label_probabilities" not in lm
    for step in lm["steps"]:
        assert {"title", "explanation", "formula", "code", "shape"} <= step.keys()
        assert step["code"]["first_line"] <= step["code"]["last_line"]
    tokens = [token for token, _ in lm["top_tokens"]]
    assert tokens == [service.lm.tokenizer.decode_token(i) for i in torch.softmax(
        service.lm.model(torch.tensor([lm_ids(service, "This movie was")])).logits[0, -1], -1).topk(
        tour.TOP_TOKENS).indices.tolist()]
    sentiment = tour.tour_json(tour.tour(service, "A fine film.", "sentiment"))
    assert "top_tokens" not in sentiment and set(sentiment["label_probabilities"]) == {"negative", "positive"}


# -- the tab: one pass per text and settings, steps drawn from the session --------------------------


def test_moving_between_steps_does_not_run_the_model_again(service: DemoService, monkeypatch) -> None:
    calls = []
    real = tour_tab.tour
    monkeypatch.setattr(tour_tab, "tour", lambda *a, **k: calls.append(a) or real(*a, **k))
    out = tour_tab.run(service, "This movie was", "lm", 0, 0, False)
    shown, data, steps = out[0], out[1], out[2]
    assert len(calls) == 1 and data["steps"] and steps["value"] == 0
    for i in range(len(shown.steps)):
        view = tour_tab.show(shown, i, i % 2 == 0)
        assert view[0].startswith(f"### Step {i + 1} of {len(shown.steps)}")
        parts = view[-tour_tab.PARTS:]  # the overview: the part this step belongs to is highlighted
        here = [n for n, part in enumerate(parts) if part["variant"] == "primary"]
        assert here == [max(n for n, (_, first) in enumerate(shown.overview) if first <= i)]
    assert len(calls) == 1
    again = tour_tab.rerun(service, "This movie was", "lm", 1, 1, False, shown, 8)  # another head: same step
    assert again[2]["value"] == 8 and again[0].head == 1 and len(calls) == 2
    other = tour_tab.rerun(service, "This movie was", "sentiment", 0, 0, False, shown, 16)  # another track: step 1
    assert other[2]["value"] == 0
    failed = tour_tab.run(service, "  ", "lm", 0, 0, False)
    assert failed[3] == f"ℹ️ {EMPTY_TEXT}" and "Traceback" not in str(failed)


def test_an_experiment_runs_when_its_step_is_shown_and_the_api_runs_them_all(service: DemoService) -> None:
    """The page's pass runs no experiment; showing a step runs that step's, once; `/tour` (`run`) returns
    every one, each the experiment `inspection.experiments` runs on the same ids."""
    import gradio as gr

    from inspection.experiments import LM_EXPERIMENTS, lm_experiment

    text = "This movie was"
    out = tour_tab.open_tour(service, text, "lm", 1, 0, False)
    t = out[0]
    assert out[1] == gr.skip() and set(t.experiments.outcomes) == {"tokens"}  # no JSON; step 1's experiment only
    embedding = LM_KEYS.index("embedding")
    shown = tour_tab.show(t, embedding, False)
    assert set(t.experiments.outcomes) == {"tokens", "embedding"}
    expected = lm_experiment("embedding", *service.lm.require(), torch.tensor([lm_ids(service, text)]), 1, 0)
    assert t.experiments.outcomes["embedding"] == expected and shown[8] == tour_tab.experiment_markdown(expected)
    tour_tab.show(t, embedding, True)
    assert set(t.experiments.outcomes) == {"tokens", "embedding"}  # kept: drawn again without a pass
    data = tour.tour_json(t)
    assert set(t.experiments.outcomes) == set(LM_EXPERIMENTS)
    assert [s["experiment"]["verdict"] for s in data["steps"] if "experiment" in s] == \
        [t.experiments.outcomes[k].verdict for k in LM_KEYS if k in LM_EXPERIMENTS]
    api = tour_tab.run(service, text, "lm", 1, 0, False)[1]
    assert sum("experiment" in s for s in api["steps"]) == len(LM_EXPERIMENTS)


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.5, 0, 0.5), (0.5, 3, 0.9), (0.8, 40, 0.95)])
def test_the_sampling_steps_controls_recompute_its_experiment(service: DemoService, temperature, top_k,
                                                              top_p) -> None:
    """Issue 50: temperature, top-k and top-p live at the sampling step. What the draw chooses from after
    is the tour's by-hand recomputation (softmax(logits / T), the top-k, the nucleus) at those values."""
    import gradio as gr

    from demo.views.tour.recompute import sampled_by_hand
    from model import GenerationConfig
    from tokenization import token_label

    text = "The acting was"
    t = tour_tab.open_tour(service, text, "lm", 0, 0, False)[0]
    i = LM_KEYS.index("sampling")
    shown = tour_tab.show(t, i, False, temperature, top_k, top_p)
    assert shown[6] == gr.skip() and shown[7] == gr.update(visible=True)  # the box always in view, controls shown
    assert tour_tab.show(t, i - 1, False)[6:8] == (gr.skip(), gr.update(visible=False))
    words = tour_tab.resample(t, i, temperature, top_k, top_p)
    assert words == shown[8] and tour_tab.resample(t, i - 1, temperature, top_k, top_p) == gr.skip()
    with torch.inference_mode():
        logits = service.lm.model(torch.tensor([lm_ids(service, text)])).logits[0, -1].double()
    expected = sampled_by_hand(logits, GenerationConfig(temperature=temperature, top_k=top_k or None, top_p=top_p))
    best = int(expected.argmax())
    kept = int((expected > 0).sum())
    said = f"temperature {temperature:g}, {f'top-k {top_k}' if top_k else 'no top-k'}, top-p {top_p:g}"
    assert said in words and f"{kept:,} token{'s' if kept != 1 else ''} can still be drawn" in words
    first = words.split("| --- | --- |\n")[1].split("\n")[0]  # the table's first row: before | after
    assert first.split(" | ")[1].rstrip(" |") == f"`{token_label(service.lm.tokenizer, best)}` {expected[best]:.1%}"


def test_sampling_settings_are_read_as_the_chat_reads_them(service: DemoService) -> None:
    toy = tour_tab.open_tour(service, "this movie", "lm", 0, 0, True)[0]
    i = LM_KEYS.index("sampling")
    words = tour_tab.resample(toy, i, 0, 40, 1)
    vocab = toy_checkpoint(LM).model.config.vocab_size
    assert f"Top-k 40 exceeds the vocabulary ({vocab} tokens): top-k is off." in words
    assert "Temperature ≤ 0 means greedy decoding" in words and "1 token can still be drawn" in words
    assert "temperature 0 (greedy decoding)" in words


def test_every_step_of_the_three_tracks_carries_a_computed_experiment() -> None:
    """Issue 61: every step of the LM, sentiment and learning tracks has an experiment in the /tour JSON,
    with its loss before and after, its effect (|change| <= 0.01 nats: no change) and the position it
    talks about (what each experiment does is checked in tests/test_experiments.py)."""
    from demo.tabs.tour import experiment_markdown
    from inspection.experiments.common import effect

    shipped = DemoService(REPO_ROOT / "checkpoints", device="cpu")
    for model, text in (("lm", "The film was not good at all, and the acting was"),
                        ("sentiment", "A wonderful film, but far too long."), (tour.LEARN, "The acting was wooden")):
        t = tour.tour(shipped, text, model, 1, 0)
        steps = tour.tour_json(t)["steps"]
        assert all("experiment" in s for s in steps), [s["title"] for s in steps if "experiment" not in s]
        tried = [s["experiment"] for s in steps]
        assert len([e for e in tried if e["before"] != e["after"]]) == len(tried), model
        for e in tried:
            assert {"change", "before", "after", "verdict", "loss_before", "loss_after", "effect", "position"} <= set(e)
            if e["loss_after"] is not None:
                assert e["effect"] == effect(e["loss_before"], e["loss_after"])
            assert e["position"] and ("label" in e) == (model == "sentiment")
        first = t.experiment(t.steps[0].key)
        assert first.verdict in experiment_markdown(first)
    picked = tour.tour(shipped, "This movie was", "lm", 0, 1)  # the picker says what the head is (heads.json)
    from demo.tabs.tour import step_markdown
    assert picked.head_about == "layer 1, head 2: reads the token just before (previous score 0.68)."
    softmax = next(i for i, s in enumerate(picked.steps) if s.key == "softmax")
    said = step_markdown(picked, softmax, picked.steps[softmax])
    assert f"**The head you picked:** {picked.head_about}" in said
    row = picked.steps[softmax].panels[0].values[-1]  # issue 61, item 10: what the head does on this text, computed
    assert f"On your text its last row puts {row.max():.2f} of its weight on" in said
    assert ("the token just before" in said.split("On your text")[1]) == (int(row.argmax()) == len(row) - 2)
    assert tour.tour_json(picked)["head_about"] == picked.head_about
    lm_step = tour.tour_json(tour.tour(shipped, "This movie was", "lm"))["steps"][1]["experiment"]
    assert isinstance(lm_step["before"], list) and len(lm_step["before"][0]) == 2  # [[token, probability], …]


def test_the_learning_chapter_is_one_optimiser_step_on_the_visitors_last_token(service: DemoService) -> None:
    """`/tour(text, "learn")`: the loss, the gradient per part, one AdamW step on a copy; the probability
    after equals `inspection.learning_step` on the same ids (itself checked against Adam's first step
    by hand in tests/test_learning_step.py) and is higher than before; the served model is untouched."""
    from inspection.learning_step import learning_step

    model, tok = service.lm.require()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    text = "The acting was wooden and the plot was boring"
    t = tour.tour(service, text, tour.LEARN)
    out = tour.tour_json(t)
    assert [s.key for s in t.steps] == ["loss", "gradient", "update"] and out["model"] == tour.LEARN
    expected = learning_step(model, torch.tensor([lm_ids(service, text)]))
    assert out["target"] == tok.decode_token(expected.target)
    assert out["probability_before"] == pytest.approx(expected.probability_before, rel=1e-5)
    assert out["probability_after"] == pytest.approx(expected.probability_after, rel=1e-4)
    assert out["probability_after"] > out["probability_before"]
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
    assert f"{expected.loss_before:.3f}" in t.steps[0].worked
    from demo.tabs.tour import VIEW, show
    assert len(show(t, 0, False)) == VIEW  # every output of the tab, the overview's unused boxes hidden
    with pytest.raises(DemoError, match=EMPTY_TEXT):
        tour.tour(service, "   ", tour.LEARN)


# -- issue 61: every sentence true to its numbers --------------------------------------------------------


@pytest.mark.parametrize("model, text", [(LM, "The play was staged at a small theatre near the river last spring."),
                                         (SENTIMENT, "I wanted to like it, but the ending was a mess.")])
def test_the_softmax_step_measures_the_first_tokens_share_instead_of_claiming_a_sink(service, model, text) -> None:
    """Issue 61, item 2: no "many heads put most weight on the first token"; the share is this head's."""
    step = by_key(tour.tour(service, text, model, 1, 1))["softmax"]
    weights = step.panels[0].values
    assert f"{float(weights[:, 0].mean()):.0%} of a row's weight on average" in step.explanation
    assert f"{float(weights[-1 if model == LM else -tour.PADDING - 2, 0]):.0%} in the last row" in step.explanation \
        or model == SENTIMENT
    assert "Many heads" not in step.explanation and "a resting place when nothing else" not in step.explanation


def test_a_causal_maps_sink_is_read_from_the_rows_that_have_a_choice() -> None:
    """Issue 61, item 2: the Attention tab's 28% on `<s>` came from a 14-token map's early rows (from row 8
    on: 14%); past 8 rows the share is read from the rows that see 8 tokens or more."""
    from demo.tabs.attention import sink_sentence
    n = 14
    weights = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # each row spread evenly over what it sees
    weights[1:7, 0] += 1  # the early rows lean on <s>
    weights /= weights.sum(1, keepdims=True)
    keys = ["<s>", *[f"w{i}" for i in range(n - 1)]]
    assert weights[1:, 0].mean() > 0.25 and weights[7:, 0].mean() < 0.25
    text = sink_sentence(keys, weights, causal=True)
    assert "attention sink" not in text and "(over rows 8 to 14, which see 8 tokens or more)" in text
    assert f"{weights[7:].mean(0).max():.0%} on average" in text
    weights[7:, 0] += 2
    weights /= weights.sum(1, keepdims=True)
    assert "an *attention sink*" in sink_sentence(keys, weights, causal=True)


def test_the_default_text_is_a_passage_that_shows_each_effect() -> None:
    """Issue 61, item 6: the tour's default text is a real passage of 15 words or more, and on the shipped models
    at the default layer and head switching any part off makes the loss over it worse, in all three tracks; the
    sentiment track's comparisons (the backward reader, the temperature) show a change, and the padding mask,
    which in this causal encoder barely reaches the label, says what it guarantees instead."""
    from demo.text import TOUR_EXAMPLE

    assert len(TOUR_EXAMPLE.split()) >= 15
    shipped = DemoService(REPO_ROOT / "checkpoints", device="cpu")
    compared = ("source_tokens", "label", "padding_mask", "probabilities", "sampling")  # nothing switched off
    for model in (LM, SENTIMENT, tour.LEARN):
        t = tour.tour(shipped, TOUR_EXAMPLE, model, 0, 0)
        effects = {s.key: t.experiment(s.key).effect for s in t.steps}
        assert {e for key, e in effects.items() if key not in compared} == {"worse"}, (model, effects)
        assert all(effects[key] != "no change" for key in ("source_tokens", "label") if key in effects), effects
    padding = tour.tour(shipped, TOUR_EXAMPLE, SENTIMENT, 0, 0).experiment("padding_mask")
    assert "gets the label it gets alone" in padding.verdict and "try another" not in padding.verdict


# texts of kinds no other test reads: a recipe, a dialogue with numbers, and a passage past the LM's context
UNSEEN = ["Whisk two eggs with a pinch of salt, pour them into the hot pan and stir gently until just set.",
          "\"Where were you on the night of 12 March?\" the inspector asked. \"At home,\" she said, \"reading.\"",
          " ".join(["The river rose for three days and the village moved its cattle to the hills."] * 20)]


@pytest.mark.parametrize("text", UNSEEN, ids=["recipe", "dialogue", "long"])
def test_every_verdict_says_the_effect_its_own_losses_give_on_unseen_texts(text: str) -> None:
    """Issue 61: on texts the other tests do not use, every experiment of the three tracks (the shipped models,
    through `/tour`'s JSON) states one effect, the one its loss before and after give: a change of 0.01 nats
    or less is "no change", a rise "worse", a fall "better"; and the verdict names the position its table is
    about."""
    shipped = DemoService(REPO_ROOT / "checkpoints", device="cpu")
    said = {"worse": ": worse.", "better": ": better.", "no change": ": no change (within 0.01 nats)."}
    sure = {"worse": "it is less sure of", "better": "it is more sure of", "no change": "it is about as sure of"}
    for model in (LM, SENTIMENT, tour.LEARN):
        for layer, head in ((0, 0), (3, 2)):
            for s in tour.tour_json(tour.tour(shipped, text, model, layer, head))["steps"]:
                e = s["experiment"]
                if e["loss_after"] is None:  # the sampler cannot draw the text: said in words, no effect computed
                    assert "the loss is infinite" in e["verdict"], s["title"]
                    continue
                change = e["loss_after"] - e["loss_before"]
                expected = "no change" if abs(change) <= 0.01 else "worse" if change > 0 else "better"
                assert e["effect"] == expected, (model, s["title"], e["loss_before"], e["loss_after"])
                words = sure if model == SENTIMENT else said
                assert [effect for effect, w in words.items() if w in e["verdict"]] == [expected], \
                    (model, s["title"], e["verdict"])
                assert e["position"].lower() in (e["verdict"] + e["change"]).lower() or model == SENTIMENT, \
                    (model, s["title"])


def test_the_glossary_is_on_the_page_and_each_step_links_its_first_use_of_a_word(service: DemoService) -> None:
    """Issue 61: a short glossary (one line per word, lessons/GLOSSARY.md) on the page; each step's words link
    the first use of a glossary word to its line, once, never inside code or a formula."""
    import re

    from demo.views.tour.glossary import entries, glossary_html, link_first_uses

    glossary = entries()
    assert len(glossary) >= 25 and len({e.anchor for e in glossary}) == len(glossary)
    page = glossary_html()
    assert all(f'id="{e.anchor}"' in page for e in glossary) and page.count("<li") == len(glossary)
    t = tour.tour(service, "The film was not good at all, and the acting was", "lm")
    linked_steps = 0
    for i, step in enumerate(t.steps):
        words = tour_tab.step_markdown(t, i, step)
        links = re.findall(r"\]\(#(glossary-[a-z0-9-]+)\)", words)
        assert len(links) == len(set(links)), step.key  # each word linked once: its first use
        assert all(any(e.anchor == a for e in glossary) for a in links)
        linked_steps += bool(links)
    assert linked_steps == len(t.steps)
    text = "The `softmax` of $$softmax$$ scores is a softmax; the softmax again, and the padding mask, not the mask."
    assert link_first_uses(text) == ("The `softmax` of $$softmax$$ scores is a [softmax](#glossary-softmax); the "
                                     "softmax again, and the [padding mask](#glossary-padding-mask), not the "
                                     "[mask](#glossary-causal-mask).")


def test_a_review_that_fills_the_encoder_still_gets_every_experiment(service: DemoService) -> None:
    """The encoder has no position for pads after a review that fills it: the track cuts the review (as
    training cuts it, `PADDING` shorter), says so, and its steps and every experiment read that review; the
    padding experiment, given a review that fills the encoder, cuts its head to make room and says so."""
    t = tour.tour(service, "fine " * 400, "sentiment")
    n = service.sentiment.model.config.max_src_len
    assert len(t.experiments.ids) == n - tour.PADDING and t.experiments.ids == t.steps[0].panels[0].values.tolist()[
        :-tour.PADDING]
    assert f"The review and {tour.PADDING} pads do not fit the encoder's {n} positions: every step and experiment " \
        f"reads the first {n - tour.PADDING - 1} of its tokens and its end token." in t.notices
    assert "What this view shows is computed on the first window alone." in " ".join(t.notices)  # the model's cut
    assert all(c.ok for s in t.steps for c in s.checks)
    for step in t.steps:
        words = tour_tab.step_experiment(t, step.key)
        assert words.startswith("**What if this step were not there?"), (step.key, words)
    window = torch.tensor([read_review(t.text, service.sentiment.tokenizer, service.sentiment.reading).ids])
    padding = classifier_experiment("padding_mask", reader_of(service.sentiment), window)
    assert window.size(1) == n and "the whole review and the pads do not fit" in padding.verdict


def test_a_long_review_is_read_whole_and_drawn_in_a_window(tmp_path) -> None:
    """Issue 61: the sentiment track reads a 200-token review whole, as the classifier reads it (`read_source`
    with the model's own window, then the pads); its experiments' probabilities are the classifier's own on
    the text; its pictures draw the last `MAX_TOUR_TOKENS` tokens (the review's end and the pads), and a
    notice says so."""
    service = DemoService(make_tiny_checkpoints(tmp_path, max_src_len=256), device="cpu")
    ckpt = service.sentiment
    model, tok = ckpt.require()
    text = " ".join(["The acting was fine, but the story dragged on and on until the very end."] * 6)
    t = tour.tour(service, text, "sentiment", 1, 1)
    read = read_source(t.text, tok, ckpt.reading, "review", "cpu").ids[0].tolist()  # no tighter limit
    n = len(read)
    assert 180 <= n <= model.config.max_src_len - tour.PADDING  # whole: nothing cut (the notices below)
    assert t.steps[0].panels[0].values.tolist() == read + [model.config.pad_token_id] * tour.PADDING
    assert t.experiments.ids == read and all(c.ok for s in t.steps for c in s.checks)
    expected = reader_of(ckpt).read_texts([text])[0].exp().tolist()  # the classifier on the raw text
    labels = ckpt.reading.labels
    assert t.label_probabilities == pytest.approx(dict(zip(labels, expected, strict=True)), abs=1e-5)
    for key in SENTIMENT_KEYS:
        assert list(t.experiment(key).before.values()) == pytest.approx(expected, abs=1e-4), key
    drawn, total = tour.MAX_TOUR_TOKENS, n + tour.PADDING
    assert t.notices == [f"The pictures draw the last {drawn} of the {total} tokens (the review's end and the pads); "
                         f"every step and experiment reads all {n} tokens of the review."]
    for s in t.steps:
        for panel in s.panels:
            if panel.kind in ("signed", "weights"):
                z = tour_tab.plots.tour_panel_figure(panel).data[0].z
                assert z.shape[0] <= drawn and (not panel.columns or z.shape[1] <= drawn), (s.key, panel.name)
    mask = tour_tab.plots.tour_panel_figure(by_key(t)["padding_mask"].panels[0])
    assert list(mask.layout.xaxis.ticktext)[-tour.PADDING - 1:] == ["&lt;/s&gt;"] + ["&lt;pad&gt;"] * tour.PADDING
    assert mask.layout.title.subtitle.text == f"tokens {total - drawn + 1} to {total} of {total} (rows and keys)"


@pytest.mark.parametrize("layer, head", [(0, 0), (1, 1)])
def test_the_cross_attention_experiment_blocks_the_token_its_step_names(service: DemoService, layer, head) -> None:
    """Issue 61, item 10: the step's worked example and its experiment talk about the same review token."""
    t = tour.tour(service, "A wonderful film, but far too long and I was bored.", "sentiment", layer, head)
    cross = by_key(t)["cross"]
    top = int(cross.panels[0].values[0].argmax())
    assert f"(position {top + 1})" in t.experiment("cross").change
    assert f"head {head + 1} of decoder layer" in t.experiment("cross").change


def test_watch_it_learn_gives_the_validation_loss_in_the_tables_unit_too(service: DemoService, monkeypatch) -> None:
    """Issue 61, item 10: the step line said nats per token (5.518) and the table bits per byte (2.00), each
    unnamed; the line now names both units."""
    from demo.tabs.learning import learning

    entry = service.snapshots.entries[1]
    monkeypatch.setitem(entry, "val_bpb", 2.0)
    step, *_, heatmap, _, _ = learning(service, 1, "This movie was", "greedy", None)
    assert f"validation loss **{entry['val_loss']:.3f}** nats per token = **2.000** bits per byte" in step
    # issue 61, item 10: its key labels overlapped on a phone, tilted or not; one in k is labelled, and said
    keys = heatmap.layout.xaxis.ticktext
    n = len(heatmap.data[0].z[0])
    step = -(-n // tour_tab.plots.KEY_LABELS)
    assert len(keys) <= tour_tab.plots.KEY_LABELS and heatmap.layout.xaxis.tickvals[-1] == n - 1
    assert step == 1 or f"one key in {step} labelled" in heatmap.layout.title.subtitle.text


def test_a_step_whose_experiment_cannot_run_on_the_toy_says_why(service: DemoService) -> None:
    """The toy's word-level vocabulary has no byte tokens: its tokens step says so, in one true line."""
    t = tour.tour(service, "this movie was not good", "lm", toy=True)
    words = tour_tab.step_experiment(t, "tokens")
    assert words == ("This step's experiment cannot run on this model: a word-level vocabulary has no byte tokens "
                     "to read the text with.")
    assert tour_tab.step_experiment(t, "embedding").startswith("**What if this step were not there?")


def test_the_experiment_table_names_its_position(service: DemoService) -> None:
    """Issue 61, item 3: the mask experiment's table is one position's (the last whose next token is in
    the text), the others' the last position's, and the table's header says which."""
    t = tour.tour(service, "The film was not good at all", "lm")
    tok = service.lm.tokenizer
    ids = lm_ids(service, "The film was not good at all")
    for key, at in (("mask", len(ids) - 2), ("embedding", len(ids) - 1)):
        o = t.experiment(key)
        last = ", the last" if at == len(ids) - 1 else ""
        assert o.position == f"after “{tok.decode_token(ids[at])}” (position {at + 1}{last})"
        assert f"| next token {o.position}: before | after |" in tour_tab.experiment_markdown(o)
    newline = replace(o, before=[("\n", 0.5), *o.before[1:]])  # a newline token stays in its row, as "↵"
    assert "| `↵` 50.0% |" in tour_tab.experiment_markdown(newline)

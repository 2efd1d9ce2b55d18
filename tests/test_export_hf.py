"""`publishing.export_hf`: our LM opened by `transformers` as a plain GPT-2, no custom code, computing
our logits (within 1e-4 in float32) and our greedy tokens."""

import json
import sys
from pathlib import Path

import pytest
import torch

from model import DecoderOnlyConfig, DecoderOnlyLM, GenerationConfig
from publishing import export_hf
from storage import IN_PROGRESS_NAME, TOKENIZER_NAME, WEIGHTS_NAME
from tokenization import BPETokenizer, prompt_ids

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_LM = ROOT / "checkpoints" / "lm"
TEXTS = ["This movie was", "I watched it twice, and the ending still made no sense to me.",
         "Worst. Film. Ever!!! 1/10 👎", "A review that types <s> and </s> as plain text.",
         "The acting was superb, the plot thin. " * 30]  # the last fills the whole 256-token context
ATOL = 1e-4


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return export_hf.export(SHIPPED_LM, tmp_path_factory.mktemp("export") / "lm")


@pytest.fixture(scope="module")
def ours() -> tuple[DecoderOnlyLM, BPETokenizer]:
    return DecoderOnlyLM.from_pretrained(SHIPPED_LM), BPETokenizer.from_file(SHIPPED_LM)


@pytest.fixture(scope="module")
def theirs(exported):
    model = transformers.AutoModelForCausalLM.from_pretrained(exported).eval()
    return model, transformers.AutoTokenizer.from_pretrained(exported)


def test_the_folder_is_a_plain_gpt2(exported: Path, theirs) -> None:
    config = json.loads((exported / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert "auto_map" not in config  # no custom code to trust
    assert config["activation_function"] == "gelu" and config["tie_word_embeddings"] is False
    assert config["layer_norm_epsilon"] == 1e-5 and config["n_positions"] == 256
    model, tokenizer = theirs
    assert type(model).__name__ == "GPT2LMHeadModel"
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 0)
    card = (exported / "README.md").read_text()
    assert "same weights, laid out as GPT-2" in card and "stays the reference" in card
    from huggingface_hub import ModelCard

    assert ModelCard(card).data.library_name == "transformers"


def test_the_tokenizer_reads_a_text_as_ours(ours, theirs) -> None:
    _, tok = ours
    _, tokenizer = theirs
    for text in TEXTS:
        ids = tokenizer(text.strip()).input_ids
        assert ids == prompt_ids(text, tok)  # <s> first, a typed "<s>" as plain characters
        assert tokenizer.decode(ids, skip_special_tokens=True) == text.strip()


def test_logits_match_ours(ours, theirs) -> None:
    lm, tok = ours
    model, _ = theirs
    for text in TEXTS:
        ids = torch.tensor([prompt_ids(text, tok)[:256]])
        with torch.no_grad():
            diff = (lm(ids).logits - model(ids).logits).abs().max().item()
        assert diff <= ATOL, (text[:30], diff)


def test_padded_batch_matches_ours(ours, theirs) -> None:
    lm, tok = ours
    model, tokenizer = theirs
    batch = tokenizer(TEXTS[:4], padding=True, return_tensors="pt")
    with torch.no_grad():
        hf = model(**batch).logits
    for row, text in enumerate(TEXTS[:4]):  # right padding: each row's real positions are its text alone
        ids = prompt_ids(text, tok)
        with torch.no_grad():
            mine = lm(torch.tensor([ids])).logits[0]
        assert (mine - hf[row, : len(ids)]).abs().max().item() <= ATOL


def test_greedy_generation_is_ours(ours, theirs) -> None:
    lm, tok = ours
    model, _ = theirs
    for prompt in ("This movie was", "I expected nothing and"):
        ids = torch.tensor([prompt_ids(prompt, tok)])
        mine = lm.generate(ids, GenerationConfig(max_new_tokens=48, temperature=0.0, eos_token_id=tok.eos_id))
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=48, do_sample=False)
        assert out[0, ids.size(1):].tolist() == mine


def test_another_shape_exports_too(tmp_path: Path) -> None:
    """Nothing about the shipped shape is hard-wired: a random 2-layer LM of another width maps as well."""
    texts = ["The film was great, the cast was great.", "A dull film with a weak plot."] * 20
    folder = tmp_path / "lm"
    BPETokenizer.train(texts, vocab_size=300, min_frequency=1).save(folder)
    torch.manual_seed(0)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=300, block_size=32, n_layer=2, n_head=2, d_model=24, d_ff=40))
    lm.eval().save_pretrained(folder)
    out = export_hf.export(folder, tmp_path / "hf")
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(4, 300, (1, 32))
    with torch.no_grad():
        assert (lm(ids).logits - model(ids).logits).abs().max().item() <= 1e-5


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="only the language model"):
        export_hf.check_checkpoint(ROOT / "checkpoints" / "sentiment")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / IN_PROGRESS_NAME).write_text("{}")
    with pytest.raises(ValueError, match="still writing"):
        export_hf.check_checkpoint(busy)
    state = {"embed.lut.weight": torch.zeros(10, 4), "decoder.norm.weight": torch.ones(4)}
    with pytest.raises(ValueError, match="not the layout"):
        export_hf.gpt2_state_dict(state, {"n_layer": 0, "d_model": 4, "block_size": 8})
    full = {**state, "decoder.norm.bias": torch.zeros(4), "embed.extra": torch.zeros(1)}
    with pytest.raises(ValueError, match="no place for"):
        export_hf.gpt2_state_dict(full, {"n_layer": 0, "d_model": 4, "block_size": 8})
    assert (ROOT / "checkpoints" / "lm" / WEIGHTS_NAME).is_file() and (SHIPPED_LM / TOKENIZER_NAME).is_file()


def test_without_transformers_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(SystemExit) as exit_:
        export_hf.main(["--checkpoint", str(SHIPPED_LM), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pip install transformers" in err
    assert not (tmp_path / "out").exists()


def test_the_cli_writes_the_folder(tmp_path: Path, capsys) -> None:
    export_hf.main(["--checkpoint", str(SHIPPED_LM), "--out", str(tmp_path / "out")])
    assert "AutoModelForCausalLM.from_pretrained" in capsys.readouterr().out
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {
        p.name for p in (tmp_path / "out").iterdir()}
    with pytest.raises(SystemExit):  # a second time: the folder is not empty
        export_hf.main(["--checkpoint", str(SHIPPED_LM), "--out", str(tmp_path / "out")])


def test_push_format_transformers_uploads_the_export(monkeypatch, capsys) -> None:
    """Everything up to the Hub's own upload call, which is replaced: no network here."""
    import huggingface_hub

    from publishing import push

    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, private=False, exist_ok=False, **kwargs):
            calls["create"] = (repo_id, private, exist_ok)

        def upload_folder(self, repo_id, folder_path, commit_message, **kwargs):
            folder = Path(folder_path)
            calls["files"] = sorted(p.name for p in folder.iterdir())
            calls["config"] = json.loads((folder / "config.json").read_text())
            calls["card"] = (folder / "README.md").read_text()
            return type("Commit", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/0"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    push.main(["--checkpoint", str(SHIPPED_LM), "--repo-id", "someone/tiny-lm-gpt2", "--format", "transformers"])
    assert calls["create"] == ("someone/tiny-lm-gpt2", False, True)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md",
            "generation_config.json"} <= set(calls["files"])
    assert calls["config"]["model_type"] == "gpt2"
    assert 'from_pretrained("someone/tiny-lm-gpt2")' in calls["card"]
    assert "pushed" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:  # the classifier has no GPT-2 layout: one line, status 2
        push.main(["--checkpoint", str(ROOT / "checkpoints" / "sentiment"), "--repo-id", "a/b", "--format",
                   "transformers"])
    assert exit_.value.code == 2

"""`python -m training.sample`: continuations of a prompt by a tiny checkpoint, the same for the same
seed, each what the model's own generation writes."""

import pytest
import torch

from demo.tiny import shared_tiny_checkpoints
from model import GenerationConfig, load_pretrained
from tokenization import BPETokenizer
from training import sample


def test_samples_are_the_models_continuations_one_seed_each(capsys):
    lm = shared_tiny_checkpoints() / "lm"
    texts = sample.main(["--checkpoint", str(lm), "--num-samples", "2", "--seed", "5", "--max-new-tokens", "12",
                         "--temperature", "1.2", "--top-k", "20", "I loved"])
    printed = capsys.readouterr().out
    model, tokenizer = load_pretrained(lm), BPETokenizer.from_file(lm)
    prompt = torch.tensor([[tokenizer.bos_id, *tokenizer.encode("I loved")]])
    for i, text in enumerate(texts):
        cfg = GenerationConfig(max_new_tokens=12, temperature=1.2, top_k=20, seed=5 + i, eos_token_id=tokenizer.eos_id)
        assert text == "I loved" + tokenizer.decode(model.generate(prompt, cfg))
        assert f"--- sample {i + 1} (seed {5 + i}) ---\n{text}\n" in printed
    assert texts[0] != texts[1]  # two seeds, two draws (a 384-token vocabulary at temperature 1.2)
    assert sample.main(["--checkpoint", str(lm), "--num-samples", "2", "--seed", "5", "--max-new-tokens", "12",
                        "--temperature", "1.2", "--top-k", "20", "I loved"]) == texts


def test_greedy_sampling_and_the_default_prompt(capsys):
    texts = sample.main(["--checkpoint", str(shared_tiny_checkpoints() / "lm"), "--temperature", "0",
                         "--max-new-tokens", "5"])
    assert len(texts) == 3 and len(set(texts)) == 1 and texts[0].startswith(sample.SAMPLE_PROMPTS[0])


def test_a_checkpoint_that_is_not_a_language_model_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        sample.main(["--checkpoint", str(shared_tiny_checkpoints() / "sentiment")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "holds a 'encoder_decoder' model, not a language model" in err and "--checkpoint" in err

"""ULMFiT's backward models: an LM trained on reversed text (`DecoderOnlyConfig.reverse`) and a
classifier whose encoder reads each review last token first (`EncoderDecoderConfig.reverse`),
checked against the forward model run by hand on the reversed tokens."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from model import DecoderOnlyConfig, DecoderOnlyLM, EncoderDecoder, EncoderDecoderConfig
from model.reading_order import reading_order
from tokenization import BPETokenizer, clean_texts
from training import evaluate, run
from training.data import TokenStream
from training.transfer import init_encoder_from, shape_from

SHAPE = dict(n_head=2, d_model=32, d_ff=64, dropout=0.0, norm_first=True)


def classifier(reverse: bool, causal: bool = True) -> EncoderDecoder:
    torch.manual_seed(0)
    config = EncoderDecoderConfig(vocab_size=100, n_encoder_layer=2, n_decoder_layer=1, max_src_len=20,
                                  max_tgt_len=4, causal_encoder=causal, reverse=reverse, **SHAPE)
    return EncoderDecoder(config).eval()


def test_reading_order_reverses_the_real_tokens_in_place_and_is_its_own_inverse():
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 0]])
    order = reading_order(mask)
    assert order.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0], [0, 1, 4, 3, 2], [0, 1, 2, 3, 4]]
    assert order.gather(1, order).tolist() == [list(range(5))] * 4


@pytest.mark.parametrize("causal", [True, False])
def test_backward_memory_is_the_forward_encoder_on_the_reversed_review_put_back_in_order(causal):
    backward, forward = classifier(True, causal), classifier(False, causal)
    forward.load_state_dict(backward.state_dict())  # same weights: only the reading order differs
    lengths = [9, 6]
    src = torch.randint(3, 100, (2, 9))
    mask = torch.zeros(2, 9, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    memory, _ = backward.encode(src, mask)  # batched, the second row right-padded
    for b, n in enumerate(lengths):
        by_hand, _ = forward.encode(src[b : b + 1, :n].flip(1))  # (1, n, C), position 0 = the last token
        torch.testing.assert_close(memory[b, :n], by_hand[0].flip(0), atol=1e-5, rtol=1e-5)


def test_a_backward_causal_encoder_reads_each_token_with_the_tokens_after_it():
    """Put back in the source's order, the causal mask of reading backwards is upper-triangular:
    token i attends to i and the tokens after it, and a change at the end reaches every state."""
    model = classifier(True)
    src = torch.randint(3, 100, (1, 10))
    _, maps = model.encode(src, output_attentions=True)
    lower = torch.ones(10, 10, dtype=torch.bool).tril(-1)
    for m in maps:
        assert (m.weights[..., lower] == 0).all() and (m.weights[..., ~lower] > 0).all()
        torch.testing.assert_close(m.weights.sum(-1), torch.ones(1, 2, 10))
    changed = src.clone()
    changed[0, 6:] = torch.randint(3, 100, (4,))
    same = torch.isclose(model.encode(src)[0], model.encode(changed)[0], atol=1e-6).all(-1)[0]
    assert not same.any()  # position 0 reads 6..9 too
    changed = src.clone()
    changed[0, :3] = torch.randint(3, 100, (3,))
    same = torch.isclose(model.encode(src)[0], model.encode(changed)[0], atol=1e-6).all(-1)[0]
    assert same[3:].all() and not same[:3].any()  # positions 3.. never read 0..2


def test_backward_label_scores_do_not_depend_on_padding():
    model = classifier(True)
    src = torch.randint(3, 100, (1, 7))
    candidates = [[5], [6, 7]]
    alone = model.candidate_scores(model.encode(src)[0], candidates)[0]
    padded = torch.cat([src, torch.zeros(1, 4, dtype=torch.long)], 1)
    mask = torch.tensor([[1] * 7 + [0] * 4])
    torch.testing.assert_close(model.candidate_scores(model.encode(padded, mask)[0], candidates, mask)[0], alone,
                               atol=1e-5, rtol=1e-5)


def test_a_backward_lm_starts_only_a_backward_encoder():
    torch.manual_seed(1)
    lm = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=100, n_layer=2, block_size=32, reverse=True, **SHAPE)).eval()
    assert shape_from(EncoderDecoder, lm, 100)["reverse"] is True
    model = classifier(True)
    init_encoder_from(model, lm)
    src = torch.randint(3, 100, (1, 12))
    memory, _ = model.encode(src)  # the LM's states over the reversed review, in the review's order
    torch.testing.assert_close(model.embed.logits(memory).flip(1), lm(src.flip(1)).logits, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="reads text backwards, the encoder forwards"):
        init_encoder_from(classifier(False), lm)


def test_a_reversed_stream_is_every_document_backwards_with_the_same_bytes():
    stream = TokenStream(np.array([1, 10, 11, 2, 1, 12, 2], dtype=np.int32), n_bytes=9)
    back = stream.reversed()
    assert back.ids.tolist() == [2, 12, 1, 2, 11, 10, 1] and back.n_bytes == 9
    assert stream.ids.tolist() == [1, 10, 11, 2, 1, 12, 2]  # the original is untouched


IMDB = Path(__file__).resolve().parents[2] / "shared" / "data" / "imdb"


@pytest.mark.needs_imdb
def test_a_backward_lm_then_its_classifier_of_another_seed_on_the_same_held_out_rows(tmp_path):
    """`--set reverse=1` trains a backward LM; a classifier started from it reads backwards without
    being told; `--seed 7 --split-seed 1337` holds out the rows seed 1337 holds out, so
    `training.evaluate` (seed 1337) rescores the run's own selection rows."""
    data = tmp_path / "data"
    data.mkdir()
    pd.read_parquet(IMDB / "train.parquet").sample(200, random_state=3).to_parquet(data / "train.parquet")
    tokenizer = tmp_path / "tokenizer.json"
    BPETokenizer.train(clean_texts(pd.read_parquet(data / "train.parquet")["text"]), vocab_size=600).save(tokenizer)
    common = ["--preset", "tiny", "--data-dir", str(data), "--tokenizer", str(tokenizer), "--val-size", "30",
              "--max-steps", "4", "--eval-every", "4",
              "--precision", "fp32"]  # training.evaluate scores in float32; auto is bfloat16 on a CPU with its units
    lm = run.main(["--task", "lm", "--out", str(tmp_path / "lm"), "--set", "reverse=1", *common])
    assert lm["model_config"]["reverse"] is True and not lm.get("samples")
    lm_again = evaluate.main(["--checkpoint", str(tmp_path / "lm"), "--data-dir", str(data), "--val-size", "30"])
    assert lm_again["bpb"] == pytest.approx(lm["val_bpb"], rel=1e-6)  # evaluate reads it backwards too
    clf = run.main(["--task", "sentiment", "--out", str(tmp_path / "s"), "--init-from", str(tmp_path / "lm"),
                    "--seed", "7", "--split-seed", "1337", *common])
    assert clf["model_config"]["reverse"] is True
    again = evaluate.main(["--checkpoint", str(tmp_path / "s"), "--data-dir", str(data), "--val-size", "30"])
    assert again["accuracy"] == pytest.approx(clf["val_accuracy"], rel=1e-6)
    assert again["confusion"] == clf["val_confusion"]


def test_sampling_a_backward_lm_is_a_one_line_refusal(tmp_path, capsys):
    from training import sample

    torch.manual_seed(0)
    DecoderOnlyLM(DecoderOnlyConfig(vocab_size=300, n_layer=1, block_size=16, reverse=True, **SHAPE)).save_pretrained(
        tmp_path / "lm")
    BPETokenizer.train(["a backward language model reads text from its end"] * 20, vocab_size=300).save(
        tmp_path / "lm" / "tokenizer.json")
    with pytest.raises(SystemExit) as stop:
        sample.main(["--checkpoint", str(tmp_path / "lm"), "This movie"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "is a backward language model" in err and len(err.strip().splitlines()) == 1


def test_readers_combine_as_the_renormalised_mean_of_their_log_probabilities():
    from classifier import combine_readers

    forward, backward = torch.tensor([[0.8, 0.2]]).log(), torch.tensor([[0.6, 0.4]]).log()
    expected = torch.tensor([[0.48 ** 0.5, 0.08 ** 0.5]])
    torch.testing.assert_close(combine_readers([forward, backward]).exp(), expected / expected.sum())
    torch.testing.assert_close(combine_readers([forward]), forward)
    p = torch.rand(1000, 2, generator=torch.Generator().manual_seed(0)).softmax(-1)
    q = torch.rand(1000, 2, generator=torch.Generator().manual_seed(1)).softmax(-1)
    same = combine_readers([p.log(), q.log()]).argmax(-1) == ((p + q) / 2).argmax(-1)
    assert same.all()  # two labels: the same label as the mean of the probabilities, other probabilities


def test_a_cuda_device_keeps_fused_attention_off_cudnn(monkeypatch):
    """cuDNN's attention plans each new shape on the CPU (~16 ms a call on an H100): a CUDA device
    resolved for training or the app turns it off (the machine running this may have no GPU)."""
    from model import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        assert resolve_device("cpu") == "cpu" and torch.backends.cuda.cudnn_sdp_enabled()
        assert resolve_device("auto") == "cuda" and not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def test_the_pair_has_its_own_temperature_kept_by_its_last_reader():
    from classifier import ClassifierConfig, combine_readers, pair_temperature

    forward, backward = torch.tensor([[0.8, 0.2]]).log(), torch.tensor([[0.6, 0.4]]).log()
    sharpened = torch.tensor([[0.48 ** (0.5 / 0.5), 0.08 ** (0.5 / 0.5)]])  # mean of logs / T, T = 0.5
    torch.testing.assert_close(combine_readers([forward, backward], 0.5).exp(), sharpened / sharpened.sum())
    one = ClassifierConfig(labels=["negative", "positive"])
    two = ClassifierConfig(labels=["negative", "positive"], pair_temperature=0.87)
    assert pair_temperature([one, two]) == 0.87 and pair_temperature([two]) == 1.0

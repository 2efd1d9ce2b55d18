"""Our language model as a standard `transformers` GPT-2: the same weights, laid out as GPT-2.

    python -m publishing.export_hf --checkpoint checkpoints/lm --out exported/lm

writes a folder that `AutoModelForCausalLM.from_pretrained(DIR)` and `AutoTokenizer.from_pretrained(DIR)`
open with no custom code (no `trust_remote_code`): config.json (`GPT2Config`), model.safetensors,
generation_config.json, the tokenizer files and README.md, a model card. `publishing.push --format
transformers` uploads that folder. The from-scratch code (`model/`) stays the reference: the export is a
translation of its weights, checked by tests/test_export_hf.py (logits within 1e-4 in float32, the same
greedy tokens).

Why GPT-2's layout fits exactly (each line checked against `model/`):

- pre-norm blocks, x + Attn(LN(x)) then x + FFN(LN(x)), a final LayerNorm (`layers.SublayerConnection`,
  `Decoder.norm`) = GPT-2's ln_1, ln_2, ln_f; `nn.LayerNorm` default eps 1e-5 = `layer_norm_epsilon`;
- exact GELU (`nn.GELU()`, no tanh approximation) = `activation_function="gelu"` (not "gelu_new");
- Q, K, V in one (3C, C) `nn.Linear`, split q|k|v, heads as (C/H)-wide slices, scores scaled by
  1/sqrt(d_k), biases everywhere = GPT-2's `c_attn` (a `Conv1D`, whose weight is the transpose), the
  same head split and `scale_attn_weights=True`; `out_proj`, `w_1`, `w_2` = `c_proj`, `c_fc`, `mlp.c_proj`;
- token embeddings multiplied by sqrt(d_model) (`embeddings.Embeddings`): the scale is folded into
  `wte`, and the output projection, tied to the *unscaled* matrix in ours, becomes an untied
  `lm_head` holding that matrix (`tie_word_embeddings=False`);
- fixed sinusoidal positions added after the scaling (`embeddings.PositionalEncoding`, not saved in our
  checkpoint: a function of the shape) = GPT-2's learned `wpe`, filled with that table;
- dropout 0 at inference; GPT-2's context `n_positions` = our `block_size`.

The weights are read by key from model.safetensors: `gpt2_state_dict` is the one place the two layouts meet.
"""

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

from cli import Parser
from model.config import PARTS
from storage import (
    CARD_NAME,
    CONFIG_NAME,
    IN_PROGRESS_NAME,
    METRICS_NAME,
    TOKENIZER_NAME,
    WEIGHTS_NAME,
    is_being_written,
)

NO_TRANSFORMERS = ("the export needs `transformers`, which the app does not: "
                   "pip install transformers (or -r requirements-dev.txt)")

# ours -> GPT-2's, per block; "T": transposed (GPT-2's Conv1D stores (in, out), nn.Linear (out, in))
BLOCK_KEYS = [
    ("decoder.layers.{i}.sublayer.0.norm.weight", "transformer.h.{i}.ln_1.weight", ""),
    ("decoder.layers.{i}.sublayer.0.norm.bias", "transformer.h.{i}.ln_1.bias", ""),
    ("decoder.layers.{i}.self_attn.in_proj.weight", "transformer.h.{i}.attn.c_attn.weight", "T"),
    ("decoder.layers.{i}.self_attn.in_proj.bias", "transformer.h.{i}.attn.c_attn.bias", ""),
    ("decoder.layers.{i}.self_attn.out_proj.weight", "transformer.h.{i}.attn.c_proj.weight", "T"),
    ("decoder.layers.{i}.self_attn.out_proj.bias", "transformer.h.{i}.attn.c_proj.bias", ""),
    ("decoder.layers.{i}.sublayer.1.norm.weight", "transformer.h.{i}.ln_2.weight", ""),
    ("decoder.layers.{i}.sublayer.1.norm.bias", "transformer.h.{i}.ln_2.bias", ""),
    ("decoder.layers.{i}.feed_forward.w_1.weight", "transformer.h.{i}.mlp.c_fc.weight", "T"),
    ("decoder.layers.{i}.feed_forward.w_1.bias", "transformer.h.{i}.mlp.c_fc.bias", ""),
    ("decoder.layers.{i}.feed_forward.w_2.weight", "transformer.h.{i}.mlp.c_proj.weight", "T"),
    ("decoder.layers.{i}.feed_forward.w_2.bias", "transformer.h.{i}.mlp.c_proj.bias", ""),
]
FINAL_KEYS = [("decoder.norm.weight", "transformer.ln_f.weight", ""),
              ("decoder.norm.bias", "transformer.ln_f.bias", "")]
EMBEDDING_KEY = "embed.lut.weight"  # (vocab, C), unscaled: wte = it x sqrt(C), lm_head = it
LM_TYPE = "decoder_only_lm"


def _sinusoids(n: int, d: int) -> torch.Tensor:
    from model import sinusoidal_table  # the table our model adds, so the two cannot drift apart

    return sinusoidal_table(n, d)


def gpt2_state_dict(state: dict[str, torch.Tensor], config: dict) -> dict[str, torch.Tensor]:
    """Our LM's state dict (as saved in model.safetensors) -> `GPT2LMHeadModel`'s, in float32.
    Raises ValueError when a key is missing or left over (a layout this mapping does not know)."""
    state = {k: v.float() for k, v in state.items()}
    out, used = {}, set()

    def take(ours: str, theirs: str, how: str) -> None:
        if ours not in state:
            raise ValueError(f"no {ours} in the weights: not the layout this export knows (publishing/export_hf.py)")
        used.add(ours)
        out[theirs] = state[ours].t().contiguous() if how == "T" else state[ours]

    for i in range(config["n_layer"]):
        for ours, theirs, how in BLOCK_KEYS:
            take(ours.format(i=i), theirs.format(i=i), how)
    for ours, theirs, how in FINAL_KEYS:
        take(ours, theirs, how)
    if EMBEDDING_KEY not in state:
        raise ValueError(f"no {EMBEDDING_KEY} in the weights")
    used.add(EMBEDDING_KEY)
    lut = state[EMBEDDING_KEY]
    out["transformer.wte.weight"] = lut * math.sqrt(config["d_model"])  # ours: lut(idx) * sqrt(d_model)
    out["lm_head.weight"] = lut.clone()  # ours: F.linear(x, lut), the unscaled matrix
    out["transformer.wpe.weight"] = _sinusoids(config["block_size"], config["d_model"])
    left = sorted(set(state) - used)
    if left:
        raise ValueError(f"weights the GPT-2 layout has no place for: {left[:5]}")
    return out


def gpt2_config(config: dict):
    """The `GPT2Config` that reproduces our LM's shape and arithmetic."""
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=config["vocab_size"], n_positions=config["block_size"], n_embd=config["d_model"],
        n_layer=config["n_layer"], n_head=config["n_head"], n_inner=config["d_ff"],
        activation_function="gelu",  # exact GELU, as nn.GELU()
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,  # nn.LayerNorm's default
        scale_attn_weights=True, tie_word_embeddings=False,
        bos_token_id=config["bos_token_id"], eos_token_id=config["eos_token_id"], pad_token_id=config["pad_token_id"],
    )


def hf_tokenizer(tokenizer_file: Path, model_max_length: int):
    """Our byte-level BPE as a `PreTrainedTokenizerFast`: the same tokenizer.json, plus the start token
    our LM's documents begin with (`tokenization.prompt_ids`), added by the tokenizer, and "<s>" typed
    in a text read as plain characters, as ours reads it (`split_special_tokens`)."""
    from tokenizers import Tokenizer, processors
    from transformers import PreTrainedTokenizerFast

    from tokenization.bpe import SPECIAL_TOKENS

    backend = Tokenizer.from_file(str(tokenizer_file))
    bos = SPECIAL_TOKENS["bos"]
    backend.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B:1",
                                      special_tokens=[(bos, backend.token_to_id(bos))]),
    ])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=bos, eos_token=SPECIAL_TOKENS["eos"], pad_token=SPECIAL_TOKENS["pad"],
        additional_special_tokens=[SPECIAL_TOKENS["sep"]], split_special_tokens=True, add_prefix_space=False,
        model_max_length=model_max_length, clean_up_tokenization_spaces=False)


def check_checkpoint(checkpoint: Path) -> dict:
    """The checkpoint's config, after checking it is a finished language model of ours; ValueError if not."""
    if not checkpoint.is_dir():
        raise ValueError(f"--checkpoint {checkpoint}: no such folder")
    if is_being_written(checkpoint):
        raise ValueError(f"--checkpoint {checkpoint}: a training run is still writing into it ({IN_PROGRESS_NAME})")
    for name in (CONFIG_NAME, WEIGHTS_NAME, TOKENIZER_NAME):
        if not (checkpoint / name).is_file():
            raise ValueError(f"--checkpoint {checkpoint}: no {name}")
    config = json.loads((checkpoint / CONFIG_NAME).read_text(encoding="utf-8"))
    if config.get("model_type") != LM_TYPE:
        raise ValueError(f"--checkpoint {checkpoint}: a {config.get('model_type')!r} model; only the language "
                         f"model ({LM_TYPE}) has a GPT-2 layout")
    if not config.get("norm_first", True):
        raise ValueError(f"--checkpoint {checkpoint}: a post-norm model; GPT-2 is pre-norm")
    if off := [part for part in PARTS if not config.get(part, True)]:
        raise ValueError(f"--checkpoint {checkpoint}: a model trained without {', '.join(off)}; GPT-2 has every part")
    return config


def export(checkpoint: Path, out: Path, repo_id: str | None = None) -> Path:
    """Write the GPT-2 folder for `checkpoint` into `out` (created; must not hold files) and return it;
    `repo_id`: the Hub repo it goes to, named in the card's example (else the folder)."""
    try:
        from transformers import GenerationConfig, GPT2LMHeadModel
    except ImportError:
        raise ValueError(NO_TRANSFORMERS) from None
    from model import load_pretrained

    config = check_checkpoint(checkpoint)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out}: not empty")
    load_pretrained(checkpoint)  # the checkpoint loads in the reference code (shapes, config fields) first
    state = gpt2_state_dict(load_file(checkpoint / WEIGHTS_NAME), config)
    hf_config = gpt2_config(config)
    model = GPT2LMHeadModel(hf_config)
    model.load_state_dict(state, strict=True)
    model.generation_config = GenerationConfig(bos_token_id=config["bos_token_id"],
                                               eos_token_id=config["eos_token_id"],
                                               pad_token_id=config["pad_token_id"])
    metrics_path = checkpoint / METRICS_NAME
    metrics = json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.is_file() else {}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp", dir=out.parent))  # a failure leaves no half folder
    try:
        model.eval().save_pretrained(tmp)
        hf_tokenizer(checkpoint / TOKENIZER_NAME, config["block_size"]).save_pretrained(tmp)
        card = model_card(checkpoint, config, metrics, repo_id or out.as_posix())
        (tmp / CARD_NAME).write_text(card, encoding="utf-8")
        for path in tmp.iterdir():
            path.chmod(0o644)
        if out.exists():
            out.rmdir()  # empty, checked above
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def model_card(checkpoint: Path, config: dict, metrics: dict, where: str) -> str:
    from huggingface_hub import ModelCardData

    data = ModelCardData(license="mit", language="en", library_name="transformers", pipeline_tag="text-generation",
                         datasets=["stanfordnlp/imdb"], tags=["gpt2", "from-scratch", "imdb", "safetensors"],
                         model_name=f"tiny-transformers-{checkpoint.name}")
    held_out = metrics.get("data", {}).get("val_texts")
    figure = (f"\n{metrics['val_bpb']:.3f} bits per byte on {f'{held_out:,}' if held_out else 'the'} "
              "reviews held out of IMDB's train split, measured by the from-scratch code "
              f"(`python -m training.evaluate --checkpoint {checkpoint.as_posix()}`); the export computes the "
              "same logits.\n") if "val_bpb" in metrics else ""
    backward = ("\n**This LM reads text backwards** (trained on reversed reviews): it predicts the token *before* a "
                "text. Feed it reversed token ids; it is no chat model.\n") if config.get("reverse") else ""
    n, d = config["n_layer"], config["d_model"]
    return f"""---
{data.to_yaml().strip()}
---

# tiny-transformers `{checkpoint.name}`, as GPT-2

A {n}-layer × {config['d_model']} language model trained on IMDB reviews, written and trained **from scratch**
in the tiny-transformers project (its own PyTorch code, no `transformers`).
This folder is **the same weights, laid out as GPT-2**, so `transformers` opens it with no custom code:
`pipeline`, `generate`, the Hub's widget, evaluation harnesses. The from-scratch code stays the reference;
this is a translation of its weights, checked by a test (logits within 1e-4 in float32, identical greedy
generations).
{backward}{figure}
```python
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{where}")
model = AutoModelForCausalLM.from_pretrained("{where}")
ids = tokenizer("This movie was", return_tensors="pt").input_ids   # starts with <s>, as training did
out = model.generate(ids, max_new_tokens=30, do_sample=False)
print(tokenizer.decode(out[0], skip_special_tokens=True))
```

## How our model maps onto GPT-2

| ours (`model/`) | GPT-2 here |
| --- | --- |
| token embedding × √d_model (√{d}) | `wte` = our matrix × √d_model (the scale folded in) |
| output projection tied to the *unscaled* embedding | untied `lm_head` = our matrix |
| fixed sinusoidal positions, {config['block_size']} rows | `wpe` = that table |
| pre-norm blocks, `nn.LayerNorm` (eps 1e-5), final norm | `ln_1`, `ln_2`, `ln_f`, `layer_norm_epsilon` |
| Q, K, V in one linear layer; {config['n_head']} heads; scores / √d_k | `c_attn` (transposed), `scale_attn_weights` |
| feed-forward {d} → {config['d_ff']} → {d}, exact GELU | `mlp.c_fc`, `mlp.c_proj`, `activation_function: gelu` |

Differences to know:

- The context is {config['block_size']} tokens (`n_positions`); our `stream` slides its window past that,
  `generate` here stops with an error.
- The tokenizer is ours (byte-level BPE, {config['vocab_size']:,} tokens, `<pad>` `<s>` `</s>` `<sep>` = ids 0-3); it
  adds `<s>` in front of every text, as our LM's training documents begin, and reads a typed "<s>" as
  plain characters. Our clean-up of IMDB's `<br />` line breaks (`tokenization.clean_text`) is not in it.
- Weights are float32 (the checkpoint stores float16; `wte` holds the products in float32).

Written by `python -m publishing.export_hf --checkpoint {checkpoint.as_posix()} --out DIR`. License: MIT.
"""


def main(argv: list[str] | None = None) -> None:
    parser = Parser("python -m publishing.export_hf", __doc__)
    parser.add_argument("--checkpoint", type=Path, default=Path("checkpoints/lm"),
                        help="a language model's checkpoint folder (default: checkpoints/lm)")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (must be empty or absent)")
    args = parser.parse_args(argv)
    try:
        out = export(args.checkpoint, args.out)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    files = sorted(p for p in out.iterdir() if p.is_file())
    print(f"wrote {out} ({len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB): "
          f"AutoModelForCausalLM.from_pretrained({str(out)!r}) opens it")


if __name__ == "__main__":
    main()

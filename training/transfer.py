"""Starting a run from a trained checkpoint (`python -m training.run --init-from DIR`): which config
fields the new model takes from it, and which of its weights are copied where. This is run policy,
not architecture, so it lives with training rather than in `model/`.

- An LM from an LM (`--task lm --init-from checkpoints/lm`): every weight, the same shape; a
  continued pretraining on more steps or on your own text.
- A classifier from an LM: the encoder gets the LM's embeddings and its first `n_encoder_layer`
  blocks (self-attention + FFN have the same shapes), which is how the unlabeled reviews help the
  classifier; the decoder and cross-attention start fresh.
- An encoder-decoder from an encoder-decoder (a span-pretrained one): everything.
"""

from pathlib import Path

import torch

from model import DecoderOnlyLM, EncoderDecoder, PreTrainedModel, read_config

# what a run started from a trained LM takes from it: its whole shape (a continued pretraining)
LM_SHAPE = ("n_layer", "n_head", "d_model", "d_ff", "block_size", "norm_first", "reverse")
ENCODER_SHAPE = ("d_model", "n_head", "d_ff", "norm_first")
STARTS_FROM = {DecoderOnlyLM: "a language model", EncoderDecoder: "a language model or encoder-decoder"}


def require_same(mine, theirs, names: tuple[str, ...], source: str) -> None:
    """Raise unless two configs agree on `names`: a model starts from a trained one only where their
    weights have the same shapes, and the message says which field differs."""
    for name in names:
        if getattr(mine, name) != getattr(theirs, name):
            raise ValueError(f"cannot initialise from {source}: {name} is {getattr(theirs, name)} there, "
                             f"{getattr(mine, name)} here")


def _direction(reverse: bool) -> str:
    return "backwards" if reverse else "forwards"


def shape_from(model_class: type, pretrained: PreTrainedModel, vocab_size: int) -> dict | None:
    """The config fields a `model_class` started from `pretrained` (`init_from`) takes from it; None
    when `pretrained` cannot start one of `vocab_size` tokens (an LM of another tokenizer, a span
    model with fewer rows, a model of another kind)."""
    c = pretrained.config
    if model_class is DecoderOnlyLM:
        if isinstance(pretrained, DecoderOnlyLM) and c.vocab_size == vocab_size:
            return {k: getattr(c, k) for k in LM_SHAPE}
        return None
    if isinstance(pretrained, DecoderOnlyLM) and c.vocab_size == vocab_size:
        return {k: getattr(c, k) for k in (*ENCODER_SHAPE, "reverse")} | {"n_encoder_layer": c.n_layer}
    if isinstance(pretrained, EncoderDecoder) and c.vocab_size >= vocab_size:
        return {k: getattr(c, k) for k in (*ENCODER_SHAPE, "n_encoder_layer", "n_decoder_layer", "reverse")}
    return None


def planned_shape(model_class: type, checkpoint: str | None) -> dict:
    """What `shape_from` will take from the local checkpoint folder `checkpoint`, read from its config.json
    alone (`--print-config` reads no weights); {} when there is none to read (a Hub id: the run reads it)."""
    if not checkpoint or not Path(checkpoint).is_dir():
        return {}
    try:
        c = read_config(checkpoint)
    except (OSError, ValueError):
        return {}
    if c.get("model_type") == DecoderOnlyLM.model_type:
        if model_class is DecoderOnlyLM:
            return {k: c[k] for k in LM_SHAPE if k in c}
        return {k: c[k] for k in ENCODER_SHAPE if k in c} | {"n_encoder_layer": c.get("n_layer"),
                                                              "reverse": c.get("reverse", False)}
    if c.get("model_type") == EncoderDecoder.model_type and model_class is not DecoderOnlyLM:
        return {k: c[k] for k in (*ENCODER_SHAPE, "n_encoder_layer", "n_decoder_layer", "reverse") if k in c}
    return {}


@torch.no_grad()
def init_from(model: PreTrainedModel, pretrained: PreTrainedModel) -> None:
    """Copy `pretrained`'s weights into `model` (a new run's), as the module docstring says; a
    `ValueError` names the config field that makes the shapes differ."""
    if isinstance(model, DecoderOnlyLM):
        if not isinstance(pretrained, DecoderOnlyLM):
            raise ValueError(f"cannot initialise a language model from a {pretrained.model_type!r} checkpoint")
        require_same(model.config, pretrained.config, (*LM_SHAPE, "vocab_size"), "the language model")
        model.load_state_dict(pretrained.state_dict())
    elif isinstance(pretrained, DecoderOnlyLM):
        init_encoder_from(model, pretrained)
    elif isinstance(pretrained, EncoderDecoder):
        mine, theirs = model.config, pretrained.config
        require_same(mine, theirs, (*ENCODER_SHAPE, "n_encoder_layer", "n_decoder_layer", "reverse"),
                     "the encoder-decoder")
        if mine.vocab_size > theirs.vocab_size:
            raise ValueError(f"the checkpoint has {theirs.vocab_size} embedding rows, this model needs "
                             f"{mine.vocab_size}")
        state = pretrained.state_dict()
        state["embed.lut.weight"] = state["embed.lut.weight"][: mine.vocab_size]  # a classifier needs no sentinels
        model.load_state_dict(state)
    else:
        raise ValueError(f"cannot initialise an encoder-decoder from a {pretrained.model_type!r} checkpoint")


@torch.no_grad()
def init_encoder_from(model: EncoderDecoder, lm: DecoderOnlyLM) -> None:
    """Start the encoder from a trained decoder-only LM: its embeddings and its first n_encoder_layer
    blocks. The mask changes from causal to bidirectional unless the config's `causal_encoder` keeps
    it, and then the memory is the LM's final hidden states. A larger vocabulary (a span-corruption
    model's sentinel ids above the tokenizer's) takes the LM's rows as its first rows; the others keep
    their fresh initialisation."""
    c, lc = model.config, lm.config
    require_same(c, lc, ENCODER_SHAPE, "the LM")
    if c.vocab_size < lc.vocab_size:
        raise ValueError(f"cannot initialise from the LM: vocab_size is {lc.vocab_size} there, {c.vocab_size} here")
    if c.n_encoder_layer > lc.n_layer:
        raise ValueError(f"the LM has {lc.n_layer} layers, the encoder wants {c.n_encoder_layer}")
    if c.reverse != lc.reverse:  # its weights learned one reading order: the encoder must keep it
        raise ValueError(f"cannot initialise from the LM: it reads text {_direction(lc.reverse)}, the encoder "
                         f"{_direction(c.reverse)}")
    model.embed.lut.weight[: lc.vocab_size] = lm.embed.lut.weight
    for mine, theirs in zip(model.encoder.layers, lm.decoder.layers, strict=False):
        mine.load_state_dict(theirs.state_dict())
    model.encoder.norm.load_state_dict(lm.decoder.norm.state_dict())

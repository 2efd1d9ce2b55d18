"""Checkpoint I/O in the Hugging Face layout: `config.json` + `model.safetensors` in a directory.

Weights are read with `safetensors` only, never with pickle, so a checkpoint downloaded from
anywhere cannot run code on load. Every file is written with `storage.atomic_write`, so a process
killed mid-save leaves the previous checkpoint intact. A checkpoint is a local folder or a Hugging
Face Hub repo id (`storage.resolve_checkpoint`).
"""

import json
import math
import os
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from storage import CONFIG_NAME, WEIGHTS_NAME, atomic_write, atomic_write_text, resolve_checkpoint

from .hooks import attach, names

MODEL_TYPES: dict[str, type] = {}  # model_type -> class, filled by PreTrainedModel subclasses
# A module renamed since checkpoints were written keeps its old weights: each (old, new) piece of a
# parameter name is mapped when a checkpoint or a training state is read, and the shipped weight files
# are never rewritten. The decoder's cross-attention was `src_attn` until 2026-12-04 (one name now:
# `cross_attn`, its hook points `decoder.layers.N.cross_attn.hook_*`).
RENAMED = ((".src_attn.", ".cross_attn."),)
# A config field renamed since, old -> new: config.json (`read_config`) and a training state's model config
# (`training.trainer.resume_mismatches`) are read under today's names. The encoder-decoder's backward reading
# was `reverse_source` until 2026-12-04 (one name now: `reverse`, as the language model's).
RENAMED_FIELDS = {"reverse_source": "reverse"}


def current_fields(config: dict) -> dict:
    """A config dict with every field under the name today's configs give it (`RENAMED_FIELDS`)."""
    return {RENAMED_FIELDS.get(name, name): value for name, value in config.items()}


def current_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` (a state dict) with every parameter under the name today's modules give it (`RENAMED`)."""
    renamed = {}
    for name, tensor in state.items():
        for old, new in RENAMED:
            name = name.replace(old, new)
        renamed[name] = tensor
    return renamed


def read_json_object(path: Path) -> dict:
    """A checkpoint's JSON file as a dict; anything else is a `ValueError` naming the file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(raw).__name__}")
    return raw


def read_config(directory: str | os.PathLike) -> dict:
    """A checkpoint's config.json as a dict, its fields under today's names (`current_fields`)."""
    path = Path(directory) / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_NAME} in {directory!s} (expected {path})")
    return current_fields(read_json_object(path))


class PreTrainedModel(torch.nn.Module):
    """Base class giving a model its weight init and `save_pretrained` / `from_pretrained`.

    Subclasses set `model_type` (written into config.json, checked on load) and `config_class`
    (a dataclass whose fields are the whole architecture), and call `post_init()` once their
    modules exist.
    """

    model_type: str
    config_class: type

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        MODEL_TYPES[cls.model_type] = cls

    def post_init(self) -> None:
        """GPT-2's init for every submodule: N(0, 0.02) for linear and embedding weights, zero biases
        (LayerNorm keeps its ones and zeros), and the projections that write into the residual
        stream (attention `out_proj`, FFN `w_2`) at std 0.02/√(2·n_layer), n_layer counting the
        layers of their own stack: the residual's variance then stays put as layers add to it."""
        for module in self.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        for stack in self.modules():  # an Encoder or a Decoder: a `layers` list of residual blocks
            layers = getattr(stack, "layers", None)
            if isinstance(layers, torch.nn.ModuleList):
                for name, p in layers.named_parameters():
                    if name.endswith(("out_proj.weight", "w_2.weight")):
                        torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * len(layers)))

    def hooks(self, read=(), patch=None):
        """Read and replace named values for the passes run inside a `with` block (`model/hooks.py`):
        `with model.hooks(read=["decoder.layers.0.self_attn.hook_weights"]) as seen: model(ids)`."""
        return attach(self, read, patch)

    def point_names(self) -> list[str]:
        """Every named point of the model, by its module path (`model/hooks.py` says what each holds)."""
        return names(self)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def save_config(self, directory: str | os.PathLike) -> None:
        """Write config.json alone, the architecture (a classifier's own settings, which change
        without the weights, are `classifier.ClassifierConfig`'s classifier.json)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {"model_type": self.model_type, **asdict(self.config)}
        atomic_write_text(directory / CONFIG_NAME, json.dumps(config, indent=2) + "\n")

    def save_pretrained(self, directory: str | os.PathLike, dtype: torch.dtype | None = None) -> None:
        """Write config.json and model.safetensors; `dtype=torch.float16` halves the file size."""
        self.save_config(directory)
        state = {k: v.detach().to("cpu", dtype or v.dtype).contiguous() for k, v in self.state_dict().items()}
        atomic_write(Path(directory) / WEIGHTS_NAME, lambda tmp: save_file(state, tmp, metadata={"format": "pt"}))

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, device: str | torch.device = "cpu"):
        """Load a checkpoint folder or Hub repo id; the model comes back in eval mode, in float32."""
        directory = resolve_checkpoint(name_or_path)
        raw = read_config(directory)
        model_type = raw.pop("model_type", None)
        if model_type != cls.model_type:
            raise ValueError(f"{Path(directory) / CONFIG_NAME} describes a {model_type!r} model, "
                             f"not a {cls.model_type!r} ({cls.__name__})")
        for name in getattr(cls.config_class, "moved_to_classifier", ()):  # an older config.json's
            raw.pop(name, None)  # classifier settings: the classifier reads them, the architecture does not
        known = {f.name for f in fields(cls.config_class)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{Path(directory) / CONFIG_NAME} has unknown fields {unknown}")
        try:
            config = cls.config_class(**raw)  # every field type- and range-checked, before any allocation
        except ValueError as e:
            raise ValueError(f"{Path(directory) / CONFIG_NAME}: {e}") from None
        model = cls(config)
        path = Path(directory) / WEIGHTS_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no {WEIGHTS_NAME} in {directory!s} (expected {path})")
        try:
            state = current_names(load_file(path))
        except (SafetensorError, OSError, ValueError) as e:
            raise ValueError(f"{path} is not a readable safetensors file: {e}") from None
        expected = model.state_dict()
        missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
        if missing or unexpected:
            raise ValueError(f"{path} does not match config.json: missing {missing}, unexpected {unexpected}")
        for name, tensor in state.items():
            if tensor.shape != expected[name].shape:
                raise ValueError(f"{path}: {name} has shape {tuple(tensor.shape)}, "
                                 f"config.json implies {tuple(expected[name].shape)}")
        model.load_state_dict({k: v.float() for k, v in state.items()})
        return model.to(device).eval()


def load_pretrained(name_or_path: str | os.PathLike, device: str | torch.device = "cpu") -> PreTrainedModel:
    """Load any checkpoint of this library, choosing the class from config.json's model_type."""
    directory = resolve_checkpoint(name_or_path)
    model_type = read_config(directory).get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"{Path(directory) / CONFIG_NAME}: unknown model_type {model_type!r} "
                         f"(known: {sorted(MODEL_TYPES)})")
    return MODEL_TYPES[model_type].from_pretrained(directory, device)

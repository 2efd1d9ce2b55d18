"""Looking inside the trained models: which tokens made a prediction (six attribution methods, the
`ATTRIBUTIONS` registry, for the classifier's label and for any token the LM writes), how faithful
each explanation is (ERASER's deletion tests), what each attention head does when it is knocked
out (ablation), and what the LM would predict after each layer (the logit lens).

It stands above `model`: it reads the models through their public layers and their named points
(`model/hooks.py`: read a value, or patch one as the ablation does), and `model` never imports it.
"""

from .ablation import (
    MODES,
    Head,
    HeadEffects,
    ablate,
    all_heads,
    attention_layers,
    classifier_head_effects,
    lm_head_effects,
)
from .attribution import ATTRIBUTIONS, DESCRIPTIONS, METHODS, Attribution, attribute, attribute_methods
from .faithfulness import ERASER_FRACTIONS, erase, faithfulness, rank_correlation, top_count
from .logit_lens import LogitLens, layer_log_probs, logit_lens
from .token_attribution import TokenAttribution, attribute_token, token_faithfulness

__all__ = [
    "MODES", "Head", "HeadEffects", "ablate", "all_heads", "attention_layers", "classifier_head_effects",
    "lm_head_effects",
    "ATTRIBUTIONS", "DESCRIPTIONS", "METHODS", "Attribution", "attribute", "attribute_methods",
    "ERASER_FRACTIONS", "erase", "faithfulness", "rank_correlation", "top_count",
    "LogitLens", "layer_log_probs", "logit_lens",
    "TokenAttribution", "attribute_token", "token_faithfulness",
]

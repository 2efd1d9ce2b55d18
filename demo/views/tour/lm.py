"""The language model's track: from the visitor's text to the drawn next token, through one layer
and one head the visitor picks (the attention steps themselves: `demo.views.tour.attention`)."""

import math
from functools import cached_property

import torch

from demo.serving import LM, Checkpoint, DemoError
from demo.views.tour.capture import MAX_TOUR_TOKENS, Pass, capture, heads_to_rows, label, parameter_counts
from demo.views.tour.code import CodeRef
from demo.views.tour.experiments import SAMPLING
from demo.views.tour.lesson_text import Part
from demo.views.tour.recompute import (
    allowed,
    check,
    f64,
    gelu,
    head_attention,
    head_qkv,
    layer_norm,
    linear,
    masked,
    sampled_by_hand,
    sinusoids,
    softmax,
)
from demo.views.tour.registry import Built, State, Track, add_track, step
from demo.views.tour.show import bars, dot, heat, ids_worked, num, pieces, tok
from inspection.logit_lens import residual_stream_points
from model.generation import sampling_distribution, select_token
from tokenization import fit_context, prompt_ids

BYTES = 256  # a byte-level BPE vocabulary holds every byte: a smaller one is whole words (the toy's)
TOP_TOKENS = 10  # the JSON's top_tokens


def lm_pass(ckpt: Checkpoint, text: str, layer: int) -> tuple[Pass, list[str]]:
    """The LM's forward pass over `[bos] + encode(text)` (`prompt_ids`, the chat's reading) up to its
    context (the last `block_size` tokens: the ones the experiments read too), read at `layer`'s named
    points and along the residual stream. A notice says what a cut kept, and that a picture of more than
    `MAX_TOUR_TOKENS` tokens draws its last ones (`demo.plots.tour_window`)."""
    model, tokenizer = ckpt.require()
    c = model.config
    if not c.norm_first:
        raise DemoError("The tour follows pre-norm models (LayerNorm before each sublayer), as the shipped ones are.")
    notices = []
    whole = prompt_ids(text, tokenizer)
    ids = fit_context(whole, c.block_size, keep="end")
    if len(ids) < len(whole):
        start = tokenizer.decode(ids[1:6]).strip()
        notices.append(f"Your text is {len(whole) - 1:,} tokens, more than the model's context of {c.block_size}: "
                       f"every step and experiment reads its last {len(ids) - 1} (from “{start} …”).")
    if len(ids) > MAX_TOUR_TOKENS:  # short: step 1 stays on a phone's first screen
        notices.append(f"The pictures draw the last {MAX_TOUR_TOKENS} of the {len(ids)} tokens; every step and "
                       f"experiment reads all {len(ids)}.")
    at = f"decoder.layers.{layer}"  # the layer's modules, whose paths are its points' names
    attn, ffn, attn_sub, ffn_sub = f"{at}.self_attn", f"{at}.feed_forward", f"{at}.sublayer.0", f"{at}.sublayer.1"
    points = {"embedded": "pos.hook_embed", "positioned": "pos.hook_input", "norm_1": f"{attn_sub}.hook_in",
              "q": f"{attn}.hook_q", "k": f"{attn}.hook_k", "v": f"{attn}.hook_v", "weights": f"{attn}.hook_weights",
              "heads": f"{attn}.hook_heads", "attention": f"{attn}.hook_out", "norm_2_in": f"{attn_sub}.hook_resid",
              "norm_2": f"{ffn_sub}.hook_in", "ffn_hidden": f"{ffn}.hook_hidden", "ffn": f"{ffn}.hook_out",
              "final": "decoder.hook_norm", "logits": "embed.hook_logits"}
    streams = residual_stream_points(model)
    x = torch.tensor([ids], device=ckpt.device)
    seen, _ = capture(model, {**points, **{name: name for name in streams}}, lambda: model(x))
    with torch.inference_mode():
        next_logits = model.next_token_logits(x, None)  # the generation path: what the chat samples from
    values = {key: f64(seen[key][0]) for key in points}
    values["qkv"] = torch.cat([heads_to_rows(values.pop(part)) for part in "qkv"], -1)  # (T, 3C), as in_proj writes
    values["heads_in"] = heads_to_rows(values.pop("heads"))  # (T, C): what the output projection reads
    values["next_logits"] = f64(next_logits[0])
    values["stream"] = torch.stack([f64(seen[name][0]) for name in streams])  # (L+1, T, C)
    values["norm_1_in"] = values["stream"][layer]
    values["final_in"] = values["stream"][-1]
    module = model.get_submodule  # the module a point's name leads to computed its value
    modules = {"lookup": module("embed").lut, "norm_1": module(attn_sub).norm, "qkv": module(attn).in_proj,
               "heads": module(attn).out_proj, "norm_2": module(ffn_sub).norm, "ffn_1": module(ffn).w_1,
               "ffn_2": module(ffn).w_2, "final_norm": module("decoder").norm}
    counts = parameter_counts(model, [block.feed_forward for block in model.decoder.layers])
    p = Pass(LM, c, ids, [label(tokenizer, i) for i in ids], layer, values, modules,
             {"tokenizer": tokenizer, "ffn_parameters": counts[0], "parameters": counts[1]})
    return p, notices


class LMState(State):
    """What the LM's steps read: the pass, the head, and the values several steps share. The worked
    examples follow the last token, the one whose next token is predicted."""

    def __init__(self, p: Pass, head: int):
        super().__init__(p, head)
        self.tokenizer, self.last = p.extra["tokenizer"], self.n - 1
        self.at = tok(self.tokens[self.last])
        self.vocab = f"{self.c.vocab_size:,}"
        self.where, self.focus = f"layer {p.layer + 1}", self.last
        self.ok = allowed(self.n, self.n, None, True)
        self.attention_in, self.projection = self.v["norm_1"], self.m["qkv"]
        self.qkv_captured, self.weights = self.v["qkv"], self.v["weights"]
        self.attention = head_attention(self.attention_in, self.projection, head, self.c.n_head, self.ok)

    @cached_property
    def lookup(self) -> torch.Tensor:
        return f64(self.m["lookup"].weight)[torch.tensor(self.p.ids)]

    @cached_property
    def embedded(self) -> torch.Tensor:
        return self.lookup * math.sqrt(self.d)

    @cached_property
    def logits(self) -> torch.Tensor:
        """The final vectors through the tied projection: every position's logits."""
        return self.v["final"] @ f64(self.m["lookup"].weight).T

    @cached_property
    def probs(self) -> torch.Tensor:
        return softmax(self.logits[self.last])

    @cached_property
    def best(self) -> int:
        return int(self.probs.argmax())


# the pipeline `encode` runs (in the `tokenizers` library): bytes, GPT-2's split into words, the learned merges
@step("tokens", CodeRef("tokenization.bpe.BPETokenizer.train", r"tokenizer = Tokenizer\(models\.BPE",
                        r"pre_tokenizer = "))
def tokens(s: LMState) -> Built:
    words = s.c.vocab_size < BYTES  # the toy's word-level vocabulary: no word is split, any other is <unk>
    return Built([pieces(s.p)], vocab=s.vocab, n=s.n, ids=ids_worked(s.p), kind=Part("words" if words else "bpe"))


@step("embedding", CodeRef("model.embeddings.Embeddings.forward"))
def embedding(s: LMState) -> Built:
    row = s.lookup[s.last, 0]
    return Built([heat("token embeddings × √d_model", s.embedded, s.tokens)],
                 [check("the model's embeddings", s.embedded, s.v["embedded"])],
                 d=s.d, n=s.n, token=s.at, row=num(float(row)), sqrt_d=num(math.sqrt(s.d)),
                 embedded=num(float(s.embedded[s.last, 0])))


@step("position", CodeRef("model.embeddings.sinusoidal_table"))
def position(s: LMState) -> Built:
    pe = sinusoids(s.n, s.d)
    positioned = s.embedded + pe
    return Built([heat("PE: the sinusoids that are added", pe, [f"{i}: {t}" for i, t in enumerate(s.tokens)]),
                  heat("X = embeddings + PE", positioned, s.tokens)],
                 [check("the model's input to block 1", positioned, s.v["positioned"])],
                 n=s.n, d=s.d, position=s.last, token=s.at, pe=num(float(pe[s.last, 0])),
                 embedded=num(float(s.embedded[s.last, 0])), x=num(float(positioned[s.last, 0])))


@step("norm", CodeRef("model.layers.SublayerConnection.forward", r"if self\.norm_first",
                      r"sublayer\(self\.hook_in\(self\.norm\(x\)\)\)"))
def norm(s: LMState) -> Built:
    x, norm_1, last, layer = s.v["norm_1_in"], s.m["norm_1"], s.last, s.p.layer
    normed = layer_norm(x, norm_1)
    mu, sd = float(x[last].mean()), float(x[last].var(unbiased=False).add(norm_1.eps).sqrt())
    before = check("the embeddings + PE of the previous step", x, s.v["positioned"]) if layer == 0 else \
        check(f"block {layer}'s output", x, s.v["stream"][layer])
    return Built([heat("normalised vectors", normed, s.tokens)],
                 [check(f"the model's LayerNorm ({s.where})", normed, s.v["norm_1"]), before],
                 where=s.where, n_layer=s.c.n_layer, layer=layer + 1, n=s.n, d=s.d, token=s.at,
                 mean=num(mu), sd=num(sd), x=num(float(x[last, 0])), gamma=num(float(f64(norm_1.weight)[0])),
                 beta=num(float(f64(norm_1.bias)[0])), normed=num(float(normed[last, 0])))


@step("mask", CodeRef("model.masks.causal_mask"))  # where the triangle is built (the attention step applies it)
def mask(s: LMState) -> Built:
    weights, ok = s.weights, s.ok
    return Built([heat("QKᵀ / √d_k, masked", masked(s.attention.scaled, ok), s.tokens, s.tokens, masked=~ok)],
                 [check("the model's weight 0 on every masked cell", weights[:, ~ok],
                        torch.zeros_like(weights[:, ~ok]))],
                 n=s.n, first=tok(s.tokens[0]), token=s.at)


@step("weighted_sum", CodeRef("model.attention.attention", r"return F\.dropout\(weights.*@ v"))
def weighted_sum(s: LMState) -> Built:
    a, h, d_k = s.attention, s.head, s.d_k
    out = a.weights @ a.v
    return Built([heat(f"head {h + 1}'s output", out, s.tokens)],
                 [check(f"the model's head {h + 1} output", out, s.v["heads_in"][:, h * d_k:(h + 1) * d_k])],
                 head=h + 1, n=s.n, d_k=d_k, token=s.at, dot=dot(a.weights[s.last], a.v[:, 0]),
                 out=num(float(out[s.last, 0])))


@step("heads", CodeRef("model.attention.MultiHeadAttention.forward", r"out = self\.hook_heads\(out\)",
                       r"self\.out_proj\(out\)"))
def heads(s: LMState) -> Built:
    n_head = s.c.n_head
    all_heads = torch.cat([w @ head_qkv(s.qkv_captured, h, n_head)[2] for h, w in enumerate(s.weights)], dim=-1)
    projected = linear(all_heads, s.m["heads"].weight, s.m["heads"].bias)
    return Built([heat("attention output", projected, s.tokens)],
                 [check(f"the model's attention output ({s.where})", projected, s.v["attention"]),
                  check("the model's concatenated heads", all_heads, s.v["heads_in"])],
                 n_head=n_head, d_k=s.d_k, d=s.d, n=s.n)


@step("residual", CodeRef("model.layers.SublayerConnection.forward", r"kept = x if self\.residual",
                          r"return self\.hook_resid\(kept \+"))
def residual(s: LMState) -> Built:
    x, attention, last = s.v["norm_1_in"], s.v["attention"], s.last
    mid = x + attention
    normed = layer_norm(mid, s.m["norm_2"])
    return Built([heat("x + attention", mid, s.tokens), heat("LN₂(x)", normed, s.tokens)],
                 [check("the model's residual stream after attention", mid, s.v["norm_2_in"]),
                  check("the model's LayerNorm", normed, s.v["norm_2"])],
                 n=s.n, d=s.d, token=s.at, x=num(float(x[last, 0])),
                 attention=num(float(attention[last, 0])), sum=num(float(mid[last, 0])))


@step("ffn", CodeRef("model.layers.FeedForward", r"self\.w_1 = ", r"return self\.hook_out\(self\.w_2"))
def ffn(s: LMState) -> Built:
    c, m, layer = s.c, s.m, s.p.layer
    pre_gelu = linear(s.v["norm_2"], m["ffn_1"].weight, m["ffn_1"].bias)
    hidden = gelu(pre_gelu)  # each step from the model's previous values
    out = linear(hidden, m["ffn_2"].weight, m["ffn_2"].bias)
    pre = float(pre_gelu[s.last, 0])
    phi = 0.5 * (1 + math.erf(pre / math.sqrt(2)))  # Φ, the standard normal's distribution function
    ffn_parameters, parameters = s.p.extra["ffn_parameters"], s.p.extra["parameters"]
    return Built([heat("GELU activations", hidden, s.tokens), heat("FFN(h)", out, s.tokens)],
                 [check("the model's GELU activations", hidden, s.v["ffn_hidden"]),
                  check("the model's feed-forward output", out, s.v["ffn"]),
                  check(f"block {layer + 1}'s output", s.v["norm_2_in"] + out, s.v["stream"][layer + 1])],
                 d=s.d, d_ff=c.d_ff, n=s.n, n_layer=c.n_layer, share=f"{ffn_parameters / parameters:.0%}",
                 ffn_parameters=f"{ffn_parameters:,}", parameters=f"{parameters:,}", pre=num(pre), phi=num(phi),
                 hidden=num(float(hidden[s.last, 0])))


@step("stack", CodeRef("model.layers.Decoder.forward", r"for i, layer in enumerate", r"return self\.hook_norm\("),
      link="lens")
def stack(s: LMState) -> Built:
    stream, final_norm, table = s.v["stream"], s.m["final_norm"], f64(s.m["lookup"].weight)
    lens = [label(s.tokenizer, int(t)) for t in (layer_norm(stream[:, s.last], final_norm) @ table.T).argmax(-1)]
    depth = ["embeddings"] + [f"block {i + 1}" for i in range(s.c.n_layer)]
    return Built([heat(f"{s.tokens[s.last]}'s vector through depth", stream[:, s.last],
                       [f"{name} → {t}" for name, t in zip(depth, lens, strict=True)])],
                 [check("the model's logits for the last token (the last row)",
                        layer_norm(stream[-1, s.last], final_norm) @ table.T, s.v["logits"][s.last])],
                 n_layer=s.c.n_layer, n_rows=s.c.n_layer + 1, d=s.d, token=s.at,
                 lens="  ·  ".join(f"{name}: {tok(t)}" for name, t in zip(depth, lens, strict=True)))


@step("logits", CodeRef("model.embeddings.Embeddings.logits"))
def logits(s: LMState) -> Built:
    final = layer_norm(s.v["final_in"], s.m["final_norm"])
    z = s.logits[s.last]
    return Built([bars(f"logits after {s.tokens[s.last]}", z, s.tokenizer, s.c.vocab_size)],
                 [check("the model's logits (every position)", s.logits, s.v["logits"]),
                  check("the model's final LayerNorm", final, s.v["final"])],
                 vocab=s.vocab, n=s.n, token=s.at, best=tok(label(s.tokenizer, s.best)),
                 logit=num(float(z[s.best])))


# the model's own probabilities (T = 1, nothing filtered): the temperature and the sampler's cut are the next step's
@step("probabilities", CodeRef("model.generation.TokenStep", r"def probs", r"softmax\(-1\)"))
def probabilities(s: LMState) -> Built:
    z, t = s.logits[s.last], SAMPLING.temperature
    tempered = softmax(z / t)
    return Built([bars("T = 1: the model's own probabilities", s.probs, s.tokenizer, s.c.vocab_size),
                  bars(f"T = {t:g}", tempered, s.tokenizer, s.c.vocab_size)],
                 [check("the model's next-token distribution (its generation path)", s.probs,
                        torch.softmax(s.v["next_logits"], -1))],
                 vocab=s.vocab, temperature=f"{t:g}", best=tok(label(s.tokenizer, s.best)),
                 logit=num(float(z[s.best])), p=num(float(s.probs[s.best])), tempered=num(float(tempered[s.best])))


@step("sampling", CodeRef("model.generation.filter_logits"), link="sampling")
def sampling(s: LMState) -> Built:
    drawn_from = sampled_by_hand(s.v["next_logits"], SAMPLING)  # from the model's logits: the same cut at top-p
    drawn = select_token(s.v["next_logits"].float(), SAMPLING, torch.Generator().manual_seed(SAMPLING.seed))
    kept = int((drawn_from > 0).sum())
    return Built([bars("what the draw chooses from", drawn_from, s.tokenizer, s.c.vocab_size, mark=drawn)],
                 [check("the sampler's own distribution", drawn_from,
                        sampling_distribution(s.v["next_logits"].float(), SAMPLING).double())],
                 vocab=s.vocab, top_k=SAMPLING.top_k, top_p=f"{SAMPLING.top_p:g}", seed=SAMPLING.seed,
                 cut=Part("all" if SAMPLING.top_k >= s.c.vocab_size else "top_k"),
                 after_k=f"{min(SAMPLING.top_k, s.c.vocab_size):,}",
                 kept=kept, drawn=tok(label(s.tokenizer, drawn)), p=num(float(drawn_from[drawn])))


def outcome(p: Pass) -> dict:
    """The model's likeliest next tokens (its own distribution, before the sampler's cut)."""
    top = torch.softmax(p.values["next_logits"], -1).topk(TOP_TOKENS)
    return {"top_tokens": [(p.extra["tokenizer"].decode_token(int(i)), float(q))
                           for q, i in zip(top.values, top.indices, strict=True)]}


add_track(Track(
    LM, lm_pass, LMState,
    steps=("tokens", "embedding", "position", "norm", "qkv", "scores", "scaling", "mask", "softmax", "weighted_sum",
           "heads", "residual", "ffn", "stack", "logits", "probabilities", "sampling"),
    layers="n_layer",
    overview=(("Text → tokens", "tokens"), ("Embeddings + positions", "embedding"),
              ("{n} blocks: attention + feed-forward", "norm"), ("Output: logits → probabilities", "logits"),
              ("Next token", "sampling")),
    outcome=outcome))

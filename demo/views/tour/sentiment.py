"""The sentiment classifier's track: the review through the encoder (self-attention with the padding
mask, in the layer and head the visitor picks; the attention steps: `demo.views.tour.attention`),
the decoder's cross-attention from the label it writes, and the label's probability.

Every call that asks the classifier for label probabilities is in the first section below, so that
they can be swapped together."""

import math

import torch

from classifier import Reader
from demo.serving import SENTIMENT, Checkpoint
from demo.views.sentiment import cut_words, labels_and_candidates, read_source, reader_of
from demo.views.tour.capture import MAX_TOUR_TOKENS, Pass, capture, heads_to_rows, label
from demo.views.tour.code import CodeRef
from demo.views.tour.lesson_text import Part
from demo.views.tour.recompute import allowed, check, embed, f64, head_attention, layer_norm, linear, masked, softmax
from demo.views.tour.registry import Built, Panel, State, Track, add_track, step
from demo.views.tour.show import heat, ids_worked, num, pieces, tok
from model import residual_point
from tokenization import cut_source

PADDING = 2  # pad tokens added after a review, to show what the padding mask does


# -- the classifier's label probabilities: the tour asks for them here only ---------------------------


def label_words(ckpt: Checkpoint) -> tuple[list[str], list[list[int]]]:
    """The labels and each one's token ids, as the classifier scores them."""
    return labels_and_candidates(ckpt)


def classified(reader: Reader, memory: torch.Tensor, candidates: list[list[int]], real: torch.Tensor | None = None):
    """log P(label | review), (B, K), from the encoder's memory (`real`: 1 on the review's tokens, 0 on
    padding), as the classifier gives them (`classifier.Reader`)."""
    return reader.log_probs(memory, candidates, real)


def temperature(extra: dict) -> float:
    """The temperature the label scores are divided by before their softmax (`classifier.Reader`'s,
    from classifier.json), as the pass recorded it."""
    return extra["temperature"]


# -- the pass ---------------------------------------------------------------------------------------


def sentiment_pass(ckpt: Checkpoint, text: str, layer: int) -> tuple[Pass, list[str]]:
    """The classifier's pass over the review as it reads it (`read_source` at the model's own window, with
    its notice when the model cuts it), with `PADDING` pad tokens after it as a batch would add them, and
    the label words scored by the decoder; also the same review classified without the padding (the
    padding must change nothing). The encoder has no position past `max_src_len`: a review that fills it
    makes room for the pads by the cut training makes (`cut_source`), since the padding mask is what the
    track teaches. Every step and experiment reads all of it; a picture of more than `MAX_TOUR_TOKENS`
    tokens draws the last ones (`demo.plots.tour_window`): the review's end and the pads."""
    model, tokenizer = ckpt.require()
    c, reader = model.config, reader_of(ckpt)
    source = read_source(text, tokenizer, ckpt.reading, "review", ckpt.device)
    review, notices, room = source.ids[0].tolist(), source.notices, c.max_src_len - PADDING
    if len(review) > room:
        review = [*cut_source(review[:-1], ckpt.reading, room), review[-1]]
        notices.append(f"The review and {PADDING} pads do not fit the encoder's {c.max_src_len:,} positions: every "
                       f"step and experiment reads {cut_words(room - 1, min(ckpt.reading.src_keep_tail, room - 1))} "
                       "of its tokens and its end token.")
    ids = review + [c.pad_token_id] * PADDING
    if len(ids) > MAX_TOUR_TOKENS:  # short, as the LM track's: step 1 stays on a phone's first screen
        notices.append(f"The pictures draw the last {MAX_TOUR_TOKENS} of the {len(ids):,} tokens (the review's end "
                       f"and the pads); every step and experiment reads all {len(review):,} tokens of the review.")
    labels, candidates = label_words(ckpt)
    real = torch.tensor([[1] * len(review) + [0] * PADDING], device=ckpt.device)
    cross_layer = min(layer, c.n_decoder_layer - 1)
    at, cross = f"encoder.layers.{layer}", f"decoder.layers.{cross_layer}"  # paths: the points' names
    points = {"source_positioned": "src_pos.hook_input", "qkv_in": f"{at}.sublayer.0.hook_in",
              **{part: f"{at}.self_attn.hook_{part}" for part in ("q", "k", "v", "weights", "mask")},
              "memory_in": residual_point(model, "encoder", c.n_encoder_layer - 1),
              "decoder_positioned": "tgt_pos.hook_input", "cross_query_in": f"{cross}.sublayer.1.hook_in",
              "cross_weights": f"{cross}.cross_attn.hook_weights", "decoder_out": "decoder.hook_norm"}

    def run():
        memory, _ = model.encode(torch.tensor([ids], device=ckpt.device), real)
        return memory, classified(reader, memory, candidates, real)

    seen, (memory, log_probs) = capture(model, points, run)
    with torch.inference_mode():
        unpadded = classified(reader, model.encode(torch.tensor([review], device=ckpt.device))[0], candidates)
    best = int(log_probs[0].argmax())
    decoder_ids = c.decoder_input_ids(candidates[best])
    t = len(decoder_ids)  # the decoder pass padded every candidate to the longest: the winner's own rows
    values = {
        "source_positioned": f64(seen["source_positioned"][0]), "qkv_in": f64(seen["qkv_in"][0]),
        "qkv": torch.cat([heads_to_rows(f64(seen[part][0])) for part in "qkv"], -1),
        "weights": f64(seen["weights"][0]), "memory": f64(memory[0]),
        "decoder_positioned": f64(seen["decoder_positioned"][best][:t]),
        "cross_query_in": f64(seen["cross_query_in"][best][:t]), "cross_memory": f64(memory[0]),
        "cross_weights": f64(seen["cross_weights"][best][:, :t]), "decoder_out": f64(seen["decoder_out"]),
        "label_log_probs": f64(log_probs[0]), "unpadded": f64(unpadded[0]),
        "memory_in": f64(seen["memory_in"][0]),  # the last layer's output, before the final norm
    }
    n = len(ids)
    mask = seen["mask"].expand(1, 1, n, n)  # (1, 1, T, T) True where a query may look (padding: one row)
    module = model.get_submodule  # the module a point's name leads to computed its value
    modules = {"lookup": module("embed").lut, "qkv": module(f"{at}.self_attn").in_proj,
               "encoder_norm": module("encoder").norm, "cross": module(f"{cross}.cross_attn")}
    p = Pass(SENTIMENT, c, ids, [label(tokenizer, i) for i in ids], layer, values, modules, {
        "is_causal": c.causal_encoder, "mask": mask[0, 0].cpu(), "real": real[0].cpu().bool(), "labels": labels,
        "candidates": candidates, "best": best, "temperature": reader.temperature, "cross_layer": cross_layer,
        "decoder_ids": decoder_ids,
        "decoder_tokens": [label(tokenizer, i) for i in decoder_ids]})
    return p, notices


class SentimentState(State):
    """What the classifier's steps read; the worked examples follow the review's last piece, before `</s>`."""

    def __init__(self, p: Pass, head: int):
        super().__init__(p, head)
        self.real = p.extra["real"]
        self.key_mask = self.real[None, :]
        self.causal = p.extra["is_causal"]
        self.ok = allowed(self.n, self.n, self.key_mask, self.causal)
        self.where, self.focus = f"encoder layer {p.layer + 1}", max(int(self.real.sum()) - 2, 0)
        self.attention_in, self.projection = self.v["qkv_in"], self.m["qkv"]
        self.qkv_captured, self.weights = self.v["qkv"], self.v["weights"]
        self.attention = head_attention(self.attention_in, self.projection, head, self.c.n_head, self.ok)
        self.decoder_tokens = p.extra["decoder_tokens"]


@step("source_tokens", CodeRef("tokenization.review.read_review", r"text = review_text", r"return Review"))
def source_tokens(s: SentimentState) -> Built:
    return Built([pieces(s.p)], padding=PADDING, n=s.n, ids=ids_worked(s.p))


@step("source_embedding", CodeRef("model.encoder_decoder.EncoderDecoder.encode", r"x = self\.embed",
                                  r"self\.src_pos\("))
def source_embedding(s: SentimentState) -> Built:
    embedded = embed(s.m["lookup"].weight, s.p.ids, s.d)
    return Built([heat("embeddings + PE", embedded, s.tokens)],
                 [check("the model's encoder input", embedded, s.v["source_positioned"])],
                 d=s.d, n_layers=s.c.n_encoder_layer, layer=s.p.layer + 1, n=s.n)


@step("padding_mask", CodeRef("model.attention.full_mask"))  # the padding mask, and the causal one when it applies
def padding_mask(s: SentimentState) -> Built:
    ok, weights, real = s.ok, s.weights, s.real
    padded = ", ".join(tok(t) for t, r in zip(s.tokens, real.tolist(), strict=True) if not r)
    return Built([heat("QKᵀ / √d_k, masked", masked(s.attention.scaled, ok), s.tokens, s.tokens, masked=~ok)],
                 [check("the mask the model applied", ok.double(), s.p.extra["mask"].double()),
                  check("the model's weight 0 on every padding key", weights[:, :, ~real],
                        torch.zeros_like(weights[:, :, ~real]))],
                 padding=PADDING, causal=Part("causal") if s.causal else "", n=s.n, columns=padded)


@step("memory", CodeRef("model.layers.Encoder.forward", r"for layer in self\.layers", r"return self\.hook_norm\("))
def memory(s: SentimentState) -> Built:
    norm = s.m["encoder_norm"]
    memory = layer_norm(s.v["memory_in"], norm) if isinstance(norm, torch.nn.LayerNorm) else s.v["memory_in"]
    return Built([heat("memory", memory, s.tokens)], [check("the model's memory", memory, s.v["memory"])],
                 n_layers=s.c.n_encoder_layer, seen=Part("causal" if s.causal else "both_ways"),
                 n=s.n, d=s.d)


@step("decoder_input", CodeRef("model.encoder_decoder.EncoderDecoderConfig.decoder_input_ids"))
def decoder_input(s: SentimentState) -> Built:
    x = s.p.extra
    decoder_in = embed(s.m["lookup"].weight, x["decoder_ids"], s.d)
    return Built([heat("decoder input", decoder_in, s.decoder_tokens)],
                 [check("the model's decoder input", decoder_in, s.v["decoder_positioned"])],
                 label=tok(x["labels"][x["best"]]), pieces=" ".join(tok(t) for t in s.decoder_tokens),
                 t=len(s.decoder_tokens), d=s.d,
                 split=Part("one_piece" if len(s.decoder_tokens) == 2 else "split"),
                 word_pieces=" ".join(tok(t) for t in s.decoder_tokens[1:]), n_pieces=len(s.decoder_tokens) - 1)


@step("cross", CodeRef("model.attention.MultiHeadAttention.forward", r"else:  # cross-attention",
                       r"k, v = F\.linear"))
def cross(s: SentimentState) -> Built:
    d, d_k, h, n = s.d, s.d_k, s.head, s.n
    t = len(s.decoder_tokens)
    w, b = s.m["cross"].in_proj.weight, s.m["cross"].in_proj.bias
    q = linear(s.v["cross_query_in"], w[:d], b[:d])[:, h * d_k:(h + 1) * d_k]
    k = linear(s.v["cross_memory"], w[d:2 * d], b[d:2 * d])[:, h * d_k:(h + 1) * d_k]
    ok = allowed(t, n, s.key_mask, False)
    weights = softmax(masked((q @ k.T) / math.sqrt(d_k), ok))
    where = f"decoder layer {s.p.extra['cross_layer'] + 1}"
    top = int(weights[0].argmax())
    return Built([heat("cross-attention weights", weights, s.decoder_tokens, s.tokens, "weights", ~ok)],
                 [check(f"the model's cross-attention weights ({where}, head {h + 1})", weights,
                        s.v["cross_weights"][h])],
                 where=where, head=h + 1, t=t, n=n, top=tok(s.tokens[top]),
                 weight=num(float(weights[0, top])))


@step("label", CodeRef("model.encoder_decoder.EncoderDecoder.candidate_scores", r"logits, maps = self\.decode",
                       r"return \(log_probs"))
def label_step(s: SentimentState) -> Built:
    x, c = s.p.extra, s.c
    log_p = torch.log_softmax(s.v["decoder_out"] @ f64(s.m["lookup"].weight).T, -1)  # (K, T, V): every label's rows
    scores = torch.stack([sum(log_p[j, i, target] for i, target in enumerate([*cand, c.eos_token_id]))
                          for j, cand in enumerate(x["candidates"])])
    probs = softmax(scores / temperature(x))
    labels = x["labels"]
    return Built([Panel("P(label | review)", probs.numpy(), list(labels), kind="bars"),
                  Panel("log P(label words | review)", scores.numpy(), list(labels), kind="bars")],
                 [check("the classifier's probabilities", probs, s.v["label_log_probs"].exp()),
                  check("the same review classified without padding", probs, s.v["unpadded"].exp())],
                 temperature=f"{temperature(x):.3g}", k=len(labels),
                 fitted=Part("fitted" if temperature(x) != 1.0 else "unfitted"),  # 1.0 exactly: the default
                 labels=" · ".join(f"{name}: log P {num(float(score))} → **{num(float(pr))}**"
                                   for name, score, pr in zip(labels, scores, probs, strict=True)))


def outcome(p: Pass) -> dict:
    """The classifier's probability of each label."""
    return {"label_probabilities": dict(zip(p.extra["labels"], p.values["label_log_probs"].exp().tolist(),
                                            strict=True))}


add_track(Track(
    SENTIMENT, sentiment_pass, SentimentState,
    steps=("source_tokens", "source_embedding", "qkv", "scores", "scaling", "padding_mask", "softmax", "memory",
           "decoder_input", "cross", "label"),
    layers="n_encoder_layer",
    overview=(("Review → tokens", "source_tokens"), ("Embeddings + positions", "source_embedding"),
              ("Encoder: {n} blocks", "qkv"), ("Decoder: cross-attention", "cross"),
              ("Output: the label's probability", "label")),
    outcome=outcome))

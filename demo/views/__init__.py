"""The views: what each tab computes, as plain Python (no Gradio), so it can be unit-tested and
benchmarked without a server.

A view's computation takes the `DemoService` (`demo.serving`) and reads what it needs from it: a
served model (`service.lm`, `service.sentiment`, `service.checkpoint(name)`), the tokenizer or the
snapshots; it runs its model calls inside `service.compute()`, which says what the call costs (a
slot of the shared budget; `heavy`: seconds of work; `batched`: many positions in one pass), and
returns a dataclass that its tab draws. The building blocks that another view reuses on another
model (a snapshot, the tour's toy) take a `Checkpoint` instead.

- `tour` (with `toy`, its toy models): one forward pass, step by step ("How it works").
- `chat`: a continuation streamed token by token; `lens`, `sampling` and `token_explain` look
  inside it (the logit lens, how a token was drawn, why that token).
- `sentiment`: classify a review and explain the label; `compare`: two versions side by side.
- `attention`: every layer's and head's weights; `qk`: q·k/√d_k of one head; `ablation`: heads
  knocked out and ranked.
- `tokens`: the BPE pieces of a text; `learning`: a run's snapshots answering one prompt.
"""

from demo.serving import DemoService
from demo.views import chat, sentiment, tour


def warm_up(service: DemoService) -> None:
    """One pass through the views the page opens on and the ones visitors use first, so the first
    visitor pays for no lazy set-up (the tour's source lines and vocabulary labels are read once)."""
    if service.lm.ready:
        chat.continue_text(service, "This movie was", max_new_tokens=2, temperature=0)
        tour.tour(service, "This movie was")
    if service.sentiment.ready:
        sentiment.classify(service, "A fine film.")

"""The web demo: a Gradio app over the two shipped checkpoints (language model and sentiment model).

Layout, one idea per module:
- `demo.checkpoint`: one `Checkpoint` record per served model (model, tokenizer, config, metrics).
- `demo.tour`, `demo.chat`, `demo.sentiment`, `demo.attention`, `demo.tokens`, `demo.snapshots` (and the
  panels' `ablation`, `compare`, `export`, `lens`, `qk`, `sampling`, `token_explain`): each tab's
  computation, as plain Python (no Gradio), so it can be unit-tested and benchmarked without a server;
  `demo.toy` builds the tour's toy models; `demo.inputs` guards what visitors send and `demo.plots` draws.
- `demo.inference.DemoService`: the checkpoints loaded once, the shared compute budget
  (`demo.budget`), one method per tab.
- `demo.tabs.<tab>`: each tab's layout and its handlers, at module level; `demo.text` holds the
  page's words; `demo.app` assembles the page and serves it.

Nothing here imports `training`: the demo must start on a Space that ships checkpoints but no
training code dependencies.
"""

"""The web demo: a Gradio app over the two shipped checkpoints (language model and sentiment model).

Two parts, and the page on top of them; imports only go down this list:
- `demo.tabs.<tab>` and `demo.app`: the page. Each tab's layout and handlers, at module level;
  `demo.text` holds the page's words, `demo.plots` its figures, `demo.export` a view as one offline
  HTML file, and `demo/static/*.js` the little code that runs in the browser. `demo.app` assembles
  the tabs and serves them (`python -m demo`).
- `demo.views`: each tab's computation, as plain Python (no Gradio), so it can be unit-tested and
  benchmarked without a server. A view takes the service and returns a dataclass its tab draws.
- `demo.serving`: what every view runs on, and nothing of any view: the checkpoints loaded once
  (`DemoService`), the shared compute budget, visitor input made safe and failures made one line,
  streaming, Stop/Clear, sessions and Gradio's queue.

A new view = one computation module in `demo/views/` (a function of the service) + one tab module
in `demo/tabs/` (its `build(service, compute)`, mounted in `demo.app.build_app`). Nothing in
`demo.serving` changes. `demo.tiny` makes tiny checkpoints for the tests and benchmarks.

Nothing here imports `training`: the demo must start on a Space that ships checkpoints but no
training code dependencies.
"""

"""The web demo: a Gradio app over the two shipped checkpoints (language model and sentiment model).

`demo.inference` holds all the logic as plain Python (no Gradio), so it can be unit-tested and
benchmarked without a server; `demo.app` only wires it into a `gr.Blocks` page. Nothing here
imports `training`: the demo must start on a Space that ships checkpoints but no training code
dependencies.
"""

"""Publishing finished runs, which is not training: model cards and docs/results.md written from
metrics.json (`report`, `python -m publishing.report`), the frontier figure (`frontier`), and the
upload of a finished checkpoint to the Hugging Face Hub (`push`, `python -m publishing.push`), the app's
tree for a Hugging Face Space (`space`, `python -m publishing.space`) and the language model as a standard
`transformers` GPT-2 (`export_hf`, `python -m publishing.export_hf`).

A task's card text is part of its registration (`training.contract.Task.card`); this package fills it in.
"""

"""Measurements, each a script run from the repository root as `python -m benchmarks.NAME`: model
quality (faithfulness, calibration, the sentiment report), speed (training, generation,
attribution, ablation) and the app's own latency, load, start-up and serving device (only those import `demo`).
Each writes its figures with the command that made them to `benchmarks/results/`; what they
share (held-out rows, timing, the `--json` step) is in `benchmarks/common.py`.
"""

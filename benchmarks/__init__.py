"""Measurements, each a script run from the repository root as `python -m benchmarks.NAME`: model
quality (faithfulness, calibration, the sentiment report), speed (training, generation,
attribution, ablation) and the app's own latency, load, start-up and serving device. All take the
same shared options and write their figures the same way (`benchmarks/results/NAME.json`, with the
command, the machine and the precision they came from): `benchmarks/common.py` says how.
"""

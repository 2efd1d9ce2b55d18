"""Selection accuracy of the CPU run without attention-weight dropout beside the shipped forward
reader's (the same command with dropout 0.1 on the weights, on an H100), step by step, as Markdown.

    PYTHONPATH=. python docs/experiments/attention-dropout-cpu-2026-11-28/compare.py
"""
import json
from pathlib import Path

HERE = Path(__file__).parent
ours = {h["step"]: h["val_accuracy"] for h in json.loads((HERE / "fwd-fused" / "progress.json").read_text())["history"]}
shipped_metrics = json.loads((HERE.parents[2] / "checkpoints" / "sentiment" / "metrics.json").read_text())
shipped = {h["step"]: h["val_accuracy"] for h in shipped_metrics["history"]}
steps = sorted(ours)
rows = [("step", [f"{s:,}" for s in steps]),
        ("`attention_dropout=0`, this CPU", [f"{100 * ours[s]:.1f}" for s in steps]),
        ("shipped forward reader (0.1), H100", [f"{100 * shipped[s]:.1f}" if s in shipped else "" for s in steps])]
print("| " + " | ".join([rows[0][0]] + rows[0][1]) + " |")
print("|" + "---|" * (len(steps) + 1))
for name, cells in rows[1:]:
    print("| " + " | ".join([name] + cells) + " |")

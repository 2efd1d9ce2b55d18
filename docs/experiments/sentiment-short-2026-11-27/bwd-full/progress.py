"""Where a long CPU run stands, from its saved state: rewrites its progress.json and training_curve.png.

Why: the run spans sessions, and each stop must land its progress in the repository (its step, tokens,
curve and selection figures, the exact `--resume` command). The trainer's own state is the one
source; this reads it instead of copying figures by hand. A session's segment (its wall clock, the
steps and tokens it added, what ran beside it) is passed as JSON and appended. The record (`--record`,
a folder holding progress.json) names the run's folder (`out`) and the curve's title (`title`).

    PYTHONPATH=. python docs/experiments/sentiment-short-2026-11-27/bwd-full/progress.py \
        [--record docs/experiments/sentiment-selftrain-2026-11-27/bwd-pseudo] \
        --segment '{"session": "...", "steps": "373-690", "wall": "...", "note": "..."}'
"""

import argparse
import json
from pathlib import Path

import torch

from training.plots import plot_curve

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, default=HERE, help="the folder of the run's progress.json")
    parser.add_argument("--segment", help="this session's segment, JSON; tokens and elapsed are filled in")
    args = parser.parse_args()
    path = args.record / "progress.json"
    progress = json.loads(path.read_text())
    state = torch.load(Path(progress["out"]) / "trainer_state.pt", map_location="cpu", weights_only=False)
    before_tokens, before_elapsed = progress["tokens_seen"], progress["elapsed_s_in_state"]
    if args.segment:
        segment = json.loads(args.segment)
        tokens, elapsed = state["tokens_seen"] - before_tokens, state["elapsed"] - before_elapsed
        segment.update(tokens=tokens, elapsed_s=round(elapsed, 1), tokens_per_s_by_elapsed=round(tokens / elapsed))
        progress["segments"].append(segment)
    progress.update(step=state["step"], tokens_seen=state["tokens_seen"], elapsed_s_in_state=round(state["elapsed"], 1),
                    history=state["history"], commands=state["commands"])
    path.write_text(json.dumps(progress, indent=1) + "\n")
    title = progress.get("title", "backward reader, full schedule on a CPU")
    plot_curve(state["history"], args.record / "training_curve.png",
               f"{title}: step {state['step']} of {progress['max_steps']}")
    classifier = all("val_accuracy" in h for h in state["history"])  # else an LM: bits per byte held out
    what, figure = (("selection accuracy", lambda h: f"{100 * h['val_accuracy']:.1f}") if classifier else
                    ("held-out bits per byte", lambda h: f"{h['val_bpb']:.4f}"))
    figures = ", ".join(f"{h['step']}: {figure(h)}" for h in state["history"])
    print(f"step {state['step']}, {state['tokens_seen']:,} tokens; {what} by step: {figures}")


if __name__ == "__main__":
    main()

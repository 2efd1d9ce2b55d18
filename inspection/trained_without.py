"""The verdict on a part trained without (`python -m training.why`), from the numbers alone, so that
the run that writes it and the app that shows it can never disagree.

Each arm's final held-out loss is the mean over its seeds and its spread their range. A difference
counts only when it passes what changing the seed changes in *both* arms together, and `NO_CHANGE`
(0.01 nats, the tour's own threshold for "no change") when the seeds happen to agree exactly."""

NO_CHANGE = 0.01  # nats: below this a difference of final losses is no difference, whatever the seeds
WORSE, BETTER, WITHIN = "worse", "better", "within the seeds' spread"


def verdict(final: dict[str, float], spread: dict[str, float]) -> str:
    """WORSE when the without-arm's final loss is higher by more than both arms' spreads together (and
    by more than `NO_CHANGE`), BETTER when lower by as much, else WITHIN."""
    gap = final["without"] - final["with"]
    margin = max(spread["with"] + spread["without"], NO_CHANGE)
    return WORSE if gap > margin else BETTER if gap < -margin else WITHIN

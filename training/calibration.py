"""Calibration of a classifier's probabilities: temperature scaling and expected calibration error.

A classifier fine-tuned to low loss is overconfident: "not bad at all" read as 99% negative. Its
accuracy cannot say so; calibration can. Expected calibration error (Naeini et al. 2015; Guo et al.
2017, eq. 3) bins the predictions by confidence and averages |accuracy - confidence| over the bins,
weighted by their sizes. Temperature scaling (Guo et al. 2017, section 4.2) divides the label
scores by one number T > 0, fitted by minimising the negative log-likelihood on held-out rows: the
predicted labels do not change, only how sure the model says it is. A sentiment run fits T on its
selection rows (`SentimentTask.finalize`) and stores it in the checkpoint's classifier.json
(`classifier.ClassifierConfig`), which the app, `training.evaluate` and `/classify` read (`classifier.Reader`).
"""

import torch

ECE_BINS = 15


def fit_temperature(scores: torch.Tensor, labels: torch.Tensor, low: float = 1e-2, high: float = 100.0) -> float:
    """The T in [low, high] minimising mean NLL of softmax(scores / T) -> float.

    scores: (N, K) label scores (any additive shift per row), labels: (N,). The NLL is convex in
    1/T, so a golden-section search on log T finds the minimum to 1e-6 relative in ~60 steps."""
    scores, labels = scores.double(), labels.long()

    def nll(log_t: float) -> float:
        return torch.nn.functional.cross_entropy(scores / torch.exp(torch.tensor(log_t)), labels).item()

    a, b = torch.log(torch.tensor(low)).item(), torch.log(torch.tensor(high)).item()
    ratio = (5 ** 0.5 - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = nll(c), nll(d)
    while b - a > 1e-6:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = nll(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = nll(d)
    return float(torch.exp(torch.tensor((a + b) / 2)))


def reliability(probs: torch.Tensor, labels: torch.Tensor, bins: int = ECE_BINS) -> list[dict]:
    """The reliability diagram's bins: each of `bins` equal-width confidence intervals with the
    number of predictions in it, their mean confidence and their accuracy (empty bins included,
    with None). probs: (N, K) class probabilities, labels: (N,)."""
    confidence, predicted = probs.max(-1)
    correct = (predicted == labels).double()
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    # bin i holds confidences in (edge_i, edge_i+1]; a confidence of 0 cannot occur for K >= 1 classes
    index = (torch.bucketize(confidence.double(), edges, right=False) - 1).clamp(0, bins - 1)
    out = []
    for i in range(bins):
        inside = index == i
        n = int(inside.sum())
        out.append({"low": round(edges[i].item(), 4), "high": round(edges[i + 1].item(), 4), "count": n,
                    "confidence": confidence[inside].double().mean().item() if n else None,
                    "accuracy": correct[inside].mean().item() if n else None})
    return out


def expected_calibration_error(probs: torch.Tensor, labels: torch.Tensor, bins: int = ECE_BINS) -> float:
    """ECE = sum over bins of |bin| / N x |accuracy(bin) - confidence(bin)|."""
    n = len(labels)
    return sum(b["count"] / n * abs(b["accuracy"] - b["confidence"]) for b in reliability(probs, labels, bins)
               if b["count"])

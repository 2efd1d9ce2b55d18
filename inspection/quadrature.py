"""Quadrature rules on [0, 1]: how integrated gradients (`inspection/attribution.py`) turns its path
integral ∫₀¹ ∇f(x0 + α(x - x0)) dα into a few gradient evaluations, each one forward and backward
pass of the encoder. Fewer nodes for the same accuracy is the whole game.

- `gauss_legendre(n)`: n nodes, exact for polynomials of degree <= 2n - 1.
- `gauss_kronrod_15()`: the 15-point Kronrod extension of `gauss_7()` (Kronrod, 1965; the
  constants of QUADPACK's qk15, Piessens et al., 1983), exact to degree 22. Its 15 nodes include
  Gauss's 7, so going from the 7-point rule to it reuses those 7 evaluations and costs 8 more,
  where a fresh, finer Gauss-Legendre rule shares no node with a coarser one.
"""

from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class Rule:
    """∫₀¹ g(α) dα ≈ Σ weights[i] · g(nodes[i]); the weights sum to 1."""

    nodes: np.ndarray  # (n,) in (0, 1)
    weights: np.ndarray  # (n,)


@cache
def gauss_legendre(n: int) -> Rule:
    """Cached: every integrated-gradients call asks for its ladder again, and `leggauss(32)` takes
    ~0.5 ms. Callers only read a rule's arrays."""
    x, w = np.polynomial.legendre.leggauss(n)  # on [-1, 1]
    return Rule((x + 1) / 2, w / 2)


# QUADPACK qk15 on [-1, 1], the non-negative half, largest first (the rules are symmetric about 0):
# the Kronrod nodes and weights, and the Gauss weights of the 7-point rule whose nodes are
# _K15_NODES[1::2] (0.949..., 0.741..., 0.405..., 0).
_K15_NODES = np.array([
    0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
    0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
    0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
    0.207784955007898467600689403773245, 0.0])
_K15_WEIGHTS = np.array([
    0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
    0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
    0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
    0.204432940075298892414161999234649, 0.209482141084727828012999174891714])
_G7_WEIGHTS = np.array([
    0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
    0.381830050505118944950369775488975, 0.417959183673469387755102040816327])


def _symmetric(half_nodes: np.ndarray, half_weights: np.ndarray) -> Rule:
    """A rule given by its nodes >= 0 on [-1, 1] (the last one 0), mirrored, then mapped to [0, 1]."""
    x = np.concatenate([-half_nodes, half_nodes[-2::-1]])
    w = np.concatenate([half_weights, half_weights[-2::-1]])
    return Rule((x + 1) / 2, w / 2)


def gauss_7() -> Rule:
    """The 7-point Gauss-Legendre rule, its nodes computed exactly as `gauss_kronrod_15`'s, so the
    two share those 7 nodes bit for bit (a caller can reuse evaluations keyed by node)."""
    return _symmetric(_K15_NODES[1::2], _G7_WEIGHTS)


def gauss_kronrod_15() -> Rule:
    return _symmetric(_K15_NODES, _K15_WEIGHTS)

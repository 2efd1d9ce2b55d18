"""Quadrature rules (`inspection.quadrature`), checked against numpy's Gauss-Legendre and against exact
integrals: the Kronrod constants are typed in from QUADPACK, so every one of them is tested."""

import math

import numpy as np
import pytest

from inspection.quadrature import gauss_7, gauss_kronrod_15, gauss_legendre


def test_gauss_7_is_numpys_gauss_legendre_7():
    ours, theirs = gauss_7(), gauss_legendre(7)
    order, their_order = np.argsort(ours.nodes), np.argsort(theirs.nodes)
    np.testing.assert_allclose(ours.nodes[order], theirs.nodes[their_order], rtol=0, atol=1e-15)
    np.testing.assert_allclose(ours.weights[order], theirs.weights[their_order], rtol=0, atol=1e-15)


def test_kronrod_15_holds_the_gauss_7_nodes_bit_for_bit():
    kronrod = gauss_kronrod_15().nodes.tolist()
    assert len(kronrod) == 15 and len(set(kronrod)) == 15
    assert set(gauss_7().nodes.tolist()) < set(kronrod)  # evaluations keyed by node are reused exactly


@pytest.mark.parametrize("rule, degree", [(gauss_7(), 13), (gauss_kronrod_15(), 23), (gauss_legendre(12), 23)])
def test_each_rule_integrates_polynomials_up_to_its_degree_exactly(rule, degree):
    """(2α - 1)ᵈ: ∫₀¹ = 1 / (d + 1) for even d, 0 for odd d (degree 23 for Kronrod 15: 3·7 + 1, plus
    one by symmetry)."""
    assert np.all((rule.nodes > 0) & (rule.nodes < 1)) and rule.weights.sum() == pytest.approx(1, abs=1e-15)
    exact = lambda d: 1 / (d + 1) if d % 2 == 0 else 0.0  # noqa: E731
    for d in range(degree + 1):
        assert float(rule.weights @ (2 * rule.nodes - 1) ** d) == pytest.approx(exact(d), abs=1e-14)
    # one degree more is not exact any longer: the degree is the rule's, not luck
    assert abs(float(rule.weights @ (2 * rule.nodes - 1) ** (degree + 1)) - exact(degree + 1)) > 1e-9  # vs ~1e-16 below


def test_kronrod_15_is_more_accurate_than_gauss_7_on_a_smooth_integrand():
    exact = math.e - 1  # ∫₀¹ eᵅ dα
    gauss = float(gauss_7().weights @ np.exp(gauss_7().nodes))
    kronrod = float(gauss_kronrod_15().weights @ np.exp(gauss_kronrod_15().nodes))
    assert abs(kronrod - exact) < 1e-14 and abs(gauss - exact) < 1e-12
    exact_sharp = math.atan(20) / 20  # ∫₀¹ 1 / (1 + 400α²) dα: a peaked integrand separates them
    sharp = lambda rule: float(rule.weights @ (1 / (1 + 400 * rule.nodes**2)))  # noqa: E731
    assert abs(sharp(gauss_kronrod_15()) - exact_sharp) < abs(sharp(gauss_7()) - exact_sharp) / 10


def test_gauss_legendre_is_computed_once_per_size():
    """Every integrated-gradients call asks for its ladder again: the rule is cached, with numpy's values."""
    assert gauss_legendre(32) is gauss_legendre(32)
    x, w = np.polynomial.legendre.leggauss(32)
    np.testing.assert_array_equal(gauss_legendre(32).nodes, (x + 1) / 2)
    np.testing.assert_array_equal(gauss_legendre(32).weights, w / 2)

"""The baseline integrated gradients was before the Gauss-Kronrod ladder: Gauss-Legendre 16 nodes,
doubled to 32 while the completeness gap is over tolerance, on the shipped classifier as it is now.

    python docs/experiments/explanations-cpu-2026-11-25/ig_gauss_legendre_16.py   # from the repo root
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks import faithfulness  # noqa: E402
from inspection import attribution  # noqa: E402
from inspection.quadrature import gauss_legendre  # noqa: E402

attribution.ig_rules = lambda steps=None, max_steps=None: [gauss_legendre(16), gauss_legendre(32)]
faithfulness.main(["--limit", "100", "--tasks", "classifier", "--methods", "integrated_gradients",
                   "--json", str(Path(__file__).with_name("gauss_legendre_16.json"))])

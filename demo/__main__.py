"""`python -m demo [--host H] [--port P] [--share] [--checkpoints DIR] [--lm PATH] [--sentiment PATH]
[--device auto|cpu|cuda] [--precision auto|fp32|bf16]` (the precision also from $DEMO_PRECISION)."""

from demo.app import main

if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m demo [--host H] [--port P] [--share] [--checkpoints DIR] [--device auto|cpu|cuda]`."""

from demo.app import main

if __name__ == "__main__":
    raise SystemExit(main())

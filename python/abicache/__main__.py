"""``python -m abicache ARGS``: the ``abicache`` command line."""

from ._cli import run

if __name__ == "__main__":
    run()

"""``python -m t9k_jobs.cli``: the ``t9k-jobs`` program."""

from . import main

main()

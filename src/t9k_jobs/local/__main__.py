"""``python -m t9k_jobs.local RUN_DIR``: the runtime of a detached run (``t9k-jobs run -d``).

The parent (:func:`t9k_jobs.local.rundirs.start_detached`) parsed and checked the job and its
options once and prepared ``RUN_DIR`` (the run's copy of its manifest, ``options.json``); this
runs it (:func:`t9k_jobs.local.runtime.run_prepared`) and exits with its exit code: 0 Succeeded,
1 Failed (or a run of the same job already runs in the same runs dir), 2 cannot run here,
130/143 stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .runtime import run_prepared


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m t9k_jobs.local RUN_DIR (a run dir prepared by t9k-jobs run -d)", file=sys.stderr)
        return 2
    return run_prepared(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

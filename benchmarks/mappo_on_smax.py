"""Train coopsim's learners on JaxMARL's SMAX itself and measure the greedy win rate as they train.

Exactly ``smac_time_to_win.py`` (same arguments, run directory and ``time_to_win.json``; ``--help`` there), with
the scenario ids ``smac/smax-<map>-v0`` of ``smax_core.py`` registered first: SMAX 0.2 batched in a child process
of the peer venv ``bench-venvs/jaxmarl`` (built on first use). It answers whether a map is as hard to learn in
coopsim's SMAC-like core as in SMAX, with the learner and schedule held fixed (``--plot RUN_DIR OUT.png`` and
``--resume RUN_DIR`` as there; an interrupted run prints its ``--resume`` command)::

    .venv/bin/python benchmarks/mappo_on_smax.py benchmarks/on_smax/5m_vs_6m-mappo.yaml --seeds 0 \\
        --eval-every 1000000 --eval-episodes 256
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import smac_time_to_win  # noqa: E402
import smax_core  # noqa: E402
from coopsim.errors import run_script  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    smax_core.register()
    return smac_time_to_win.main(argv)


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(run_script(main, kept=smac_time_to_win.interrupted_kept))  # an interrupt names this script's --resume

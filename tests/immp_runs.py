"""Run directories as `coopsim run` writes them (config.yaml, metrics.jsonl), for the tests of
benchmarks/immp_compare.py: one MG-MAPF cell (random-32-32-10, N=64, K=1)."""
import json
from pathlib import Path

import yaml


def write_immp_run(root: Path, name: str, agent: str, checkpoint: str | None, rows: list[tuple[float, bool]],
                   agent_params: dict | None = None) -> Path:
    """``root/name`` with one episode per ``(soc, solved)`` of ``rows`` (scen files 1, 2, ...; lb 100, so SoC/LB =
    soc / 100 on solved episodes and nan on unsolved ones, as the scenario reports it)."""
    d = root / name
    d.mkdir(parents=True)
    params = {**({"checkpoint": checkpoint} if checkpoint else {}), **(agent_params or {})}
    cfg = {"scenario": {"params": {"map": "random-32-32-10", "num_agents": 64, "num_goals": 1}},
           "agents": {"id": agent, "params": params}}
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    (d / "metrics.jsonl").write_text("".join(json.dumps(
        {"episode_seed": i + 1, "success": float(ok), "soc": soc, "lb": 100.0,
         "soc_over_lb": soc / 100 if ok else float("nan"), "makespan": 50.0 if ok else 384.0}) + "\n"
        for i, (soc, ok) in enumerate(rows)))
    return d

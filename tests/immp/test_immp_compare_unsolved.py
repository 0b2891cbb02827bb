"""Fresh-user pass 35 (F1): since 2026-12-06 ``soc_over_lb`` is defined on solved episodes only; the IMMP table
nevertheless showed SoC/LB over zero solved instances (e.g. "5.105 ± 0.322 (0/15)"). ``immp_compare.py`` now
shows a dash for a SoC/LB over no solved instance, the mean alone over one, and says how many training seeds
solve anything."""
import json
from pathlib import Path

import yaml
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)
from immp_runs import write_immp_run  # noqa: E402


def _runs(root: Path) -> Path:
    def mk(name, aid, ck, rows):
        write_immp_run(root, name, aid, ck, rows)

    for t in (0, 1, 2):
        mk(f"immp-{t}", "mapf/immp-v0", f"runs/t/seed-{t}/policy.pt", [(110.0, 1), (120.0, 1)])
        # PPO: only training seed 2 solves one instance
        mk(f"dppo-{t}", "mapf/dppo-v0", f"runs/d/seed-{t}/policy.pt", [(150.0 if t == 2 else 900.0, t == 2), (900.0, 0)])
        # the ablation: nothing solved
        mk(f"nocs-{t}", "mapf/immp-v0", f"runs/t/seed-{t}/policy.pt", [(900.0, 0), (900.0, 0)])
        cfg = yaml.safe_load((root / f"nocs-{t}" / "config.yaml").read_text())
        cfg["agents"]["params"]["cs_pibt"] = False
        (root / f"nocs-{t}" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return root


def test_a_cell_without_solved_instances_shows_a_dash(tmp_path, capsys):
    mod = load_benchmark("immp_compare", "immp_compare_f35")
    mod.main([str(_runs(tmp_path / "runs")), "--out", str(tmp_path / "out")])
    lines = capsys.readouterr().out.splitlines()
    (nocs,) = [ln for ln in lines if ln.startswith("mapf/immp-v0-nocspibt ")]
    assert nocs.split()[1:3] == ["0/6", "\u2014"]
    assert nocs.endswith("(0 of 3 seeds solve)  s0:\u2014(0/2)  s1:\u2014(0/2)  s2:\u2014(0/2)")
    (dppo,) = [ln for ln in lines if ln.startswith("mapf/dppo-v0 ")]
    assert dppo.split()[1:3] == ["1/6", "1.500"]                       # one solved instance: the mean, no interval
    assert dppo.endswith("1.500         (1 of 3 seeds solve)  s0:\u2014(0/2)  s1:\u2014(0/2)  s2:1.500(1/2)")
    (immp,) = [ln for ln in lines if ln.startswith("mapf/immp-v0 ")]
    assert "(3 seeds)" in immp and "nan" not in immp
    cell = json.loads((tmp_path / "out" / "immp_eval.json").read_text())["table"]["random-32-32-10|64|1"]
    assert cell["mapf/immp-v0-nocspibt"]["train_seeds_solving"] == 0
    assert cell["mapf/dppo-v0"]["train_seeds_solving"] == 1 and cell["mapf/immp-v0"]["train_seeds_solving"] == 3

"""The README's issue-7 table for the smoothly changing network states what the committed compact results hold
(benchmarks/results/ns3_ddacom_smooth_{24,200}seeds.json, _fine45_12seeds.json), so a rerun that changes them cannot leave the README
behind unnoticed. No ns-3 needed."""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def row(name: str) -> dict:
    d = json.loads((ROOT / "benchmarks" / "results" / name).read_text())
    return d["summary"]["rows"]["ns3/ddacom"]


def test_readme_smooth_network_numbers_are_the_committed_results():
    readme = " ".join((ROOT / "README.md").read_text().split())
    r24, r200 = row("ns3_ddacom_smooth_24seeds.json"), row("ns3_ddacom_smooth_200seeds.json")
    util, util_ci = r24["utilization"]
    assert f"| utilization | {util:.3f} ± {util_ci:.3f}" in readme
    fine, fine_ci = row("ns3_ddacom_smooth_fine45_12seeds.json")["utilization"]  # a grid twice as fine (fresh35b N1)
    assert f"**{fine:.3f} ± {fine_ci:.3f}** against a grid twice as fine" in readme
    assert fine < 0.95 and "≥ 0.95: **not shown met**" in readme  # so the utilization target is not claimed
    loss, loss_ci = r200["loss"]
    assert f"| loss | {100 * loss:.3f}% ± {100 * loss_ci:.3f}" in readme
    nr, nr_ci = r200["normalized_return"]
    assert f"| normalized return | {nr:.3f} ± {nr_ci:.3f}" in readme
    assert f"lower end is {nr - nr_ci:.3f}" in readme
    assert f"| messages / full broadcast | {r200['messages_vs_broadcast'][0]:.3f}" in readme
    # the targets the table calls met are met by these numbers
    assert loss <= 0.003 and r200["messages_vs_broadcast"][0] <= 0.5 and nr >= 0.95


def test_a_committed_compact_copy_is_refused_as_out(tmp_path):
    """fresh35b N3: a compact copy (benchmarks/results/ns3_*.json) given as --out was 'a result with other settings,
    written before resuming existed', and a run with more seeds would have replaced it without a word."""
    import shutil

    import pytest

    from coopsim.comm.ns3.experiment import check_out, compact_copy, previous_result
    from coopsim.errors import ConfigError

    for f in sorted((ROOT / "benchmarks" / "results").glob("ns3_*.json")):
        assert compact_copy(previous_result(f)), f  # every committed copy is told apart
    copy = tmp_path / "copy.json"
    shutil.copy(ROOT / "benchmarks" / "results" / "ns3_ddacom_smooth_200seeds.json", copy)
    with pytest.raises(ConfigError) as ei:
        check_out(str(copy), str(ROOT / "configs" / "ns3" / "ddacom-spread-smooth.yaml"))
    assert "is a compact copy of a results file" in ei.value.message and ei.value.key == "--out"

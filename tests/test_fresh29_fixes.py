"""Fresh-user pass 29 (2026-12-06): a fixed-param hint names only registered ids (3), regret is exactly 0 where the
difference is float rounding (4), comparison table headers stay distinguishable and unset keys show "—" (6), errors
of a check across params name the command-line override or --grid value that set one of them (7), and report on a
run whose only metrics line is cut off says the line is not valid JSON (8)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from coopsim.errors import CoopsimError, ConfigError
from coopsim.platform import registry as reg

ROOT = Path(__file__).resolve().parents[1]
SAFETY = "configs/safety/coop-grid4x4-2ag-all.yaml"


from cli_helpers import _err, run_cli  # noqa: E402  (tests/ is on sys.path under pytest)


# --- 3. a param fixed by the id: the hint names registered ids only -------------------------------------------------

def _fixed_error(kind: str, id_: str, params: dict, key_prefix: str = "scenario.params.") -> str:
    with pytest.raises(ConfigError) as exc:
        reg.validate_params(kind, id_, params, key_prefix=key_prefix)
    return str(exc.value)


def test_grid_height_hint_names_grid_v0_and_the_registered_square_ids_not_grid_height_x4():
    msg = _fixed_error("scenario", "coop_game/Grid4x4-v0", {"height": 1})
    assert msg == ("key 'scenario.params.height': 'height' is fixed to 4 by id 'coop_game/Grid4x4-v0'; got 1. "
                   "Set any height with scenario.id=coop_game/Grid-v0 and scenario.params.height=1; ids that fix "
                   "height: coop_game/Grid16x16-v0 (height=16), coop_game/Grid32x32-v0 (height=32), "
                   "coop_game/Grid4x4-v0 (height=4), coop_game/Grid5x5-v0 (height=5)")
    assert "Grid<height>x4" not in msg
    msg = _fixed_error("scenario", "coop_game/Grid4x4-v0", {"width": 7})
    assert "Set any width with scenario.id=coop_game/Grid-v0 and scenario.params.width=7; ids that fix width: " in msg
    assert "Grid4x<width>" not in msg


def test_grid_width_of_another_square_id_says_that_id_also_fixes_the_height():
    msg = _fixed_error("scenario", "coop_game/Grid4x4-v0", {"width": 5})
    assert msg.endswith("got 5. To use width=5, choose its id: scenario.id=coop_game/Grid5x5-v0 (it also fixes "
                        "height=5), or set any width with scenario.id=coop_game/Grid-v0 and scenario.params.width=5")


def test_grid_height_from_the_cli_names_no_made_up_id():
    err = _err(run_cli("validate", SAFETY, "scenario.params.height=1"))
    assert "Set any height with scenario.id=coop_game/Grid-v0 and scenario.params.height=1" in err
    assert "Grid<height>x4" not in err and "heights: 16, 32, 4, 5" not in err


def test_other_fixed_params_name_the_open_id_or_each_id():
    assert _fixed_error("scenario", "mpe/simple_spread_n6-v0", {"num_agents": 3}).endswith(
        "got 3. Set any num_agents with scenario.id=mpe/simple_spread-v0 and scenario.params.num_agents=3; ids that "
        "fix num_agents: mpe/simple_spread_n6-v0 (num_agents=6)")
    assert _fixed_error("agent", "ppo/mappo-v0", {"critic": "foo"}, "agents.params.").endswith(
        "got 'foo'. Ids that fix critic: ppo/ippo-v0 (critic='local'), ppo/mappo-v0 (critic='central')")
    assert _fixed_error("agent", "mapf/immp-nointent-v0", {"intent": True}, "agents.params.").endswith(
        "got True. Set any intent with agents.id=mapf/immp-v0 and agents.params.intent=True; ids that fix intent: "
        "mapf/dppo-v0 (intent=False)")


ID_IN_TEXT = re.compile(r"[\w.-]+/[\w.+<>-]+-v\d+")


def test_every_fixed_param_hint_names_only_registered_ids():
    checked = 0
    for kind in ("scenario", "agent"):
        ids = set(reg.list_ids(kind))
        for s in reg.specs(kind):
            try:
                f = s.load()
            except CoopsimError:
                continue
            if not isinstance(f, reg.Variant):
                continue
            for k in f.fixed:
                for value in ("zz-unknown", 12345):
                    msg = _fixed_error(kind, s.id, {k: value}, f"{'scenario' if kind == 'scenario' else 'agents'}.params.")
                    hint = msg.split(f"got {value!r}. ", 1)[1]
                    named = ID_IN_TEXT.findall(hint)
                    assert named, msg
                    for n in named:  # a pattern (smac/<map_name>-v0) only when every id it stands for is registered
                        assert n in ids or "<" in n, (n, msg)
                    checked += 1
    assert checked >= 10


# --- 4. regret: float rounding is 0, a real negative regret is kept --------------------------------------------------

def test_regret_rounding_noise_is_exactly_zero_and_real_values_are_kept():
    from coopsim.scenarios.coop_game.core import regret

    ret = 7.05 + 1.776e-15
    assert 7.05 - ret != 0 and regret(7.05, ret) == 0.0
    assert regret(7.05, 7.05) == 0.0
    assert regret(7.05, 4.967) == pytest.approx(2.083)
    assert regret(1.0, 1.5) == -0.5  # a lucky episode beats V*: that is not noise
    assert regret(0.0, 1e-6) == -1e-6


def test_episode_metrics_regret_is_zero_when_the_return_equals_v_star_up_to_rounding():
    sc = reg.make_scenario("coop_game/Grid4x4-v0", num_envs=2, num_agents=2)
    sc._v_star = 7.05  # V* as the solver would give it (no solve needed)
    sc._ret[:] = [7.05 - 1.776e-16 * 10, 4.967]
    m = sc.episode_metrics()
    assert m[0]["regret"] == 0.0 and m[0]["optimal_return"] == 7.05
    assert m[1]["regret"] == pytest.approx(2.083)


def test_run_episode_regret_is_zero_when_v_star_equals_the_return_up_to_rounding():
    from coopsim.agents.graph_safe.train import run_episode

    def once(v_star):
        sc = reg.make_scenario("coop_game/Grid4x4-v0", num_envs=1, num_agents=2)
        agent = reg.make_component("agent", "random-v0", sc)
        shield = reg.make_component("shield", "passthrough-v0")
        return run_episode(sc, agent, shield, 3, v_star=v_star)

    ret = once(0.0)["episode/return"]
    assert once(ret + 1e-15)["regret"] == 0.0
    assert once(ret + 1.0)["regret"] == pytest.approx(1.0)


# --- 6. comparison table: distinguishable headers, "—" for an unset key ----------------------------------------------

def _table_text(table, width: int = 400) -> str:
    from rich.console import Console

    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()


def test_table_headers_are_the_shortest_unambiguous_key_ends():
    from coopsim.platform.report import table_headers

    keys = ["agents.id", "agents.params.delta", "agents.params.num_runs", "max_steps"]
    assert table_headers(keys) == {"agents.id": "agents.id", "agents.params.delta": "delta",
                                   "agents.params.num_runs": "num_runs", "max_steps": "max_steps"}
    # another differing key ends the same way (even one not shown): the header keeps enough parts to tell them apart
    assert table_headers(keys, ["shield.params.delta"])["agents.params.delta"] == "agents.params.delta"
    assert table_headers(["agents.params.seed", "scenario.params.seed"]) == {
        "agents.params.seed": "agents.params.seed", "scenario.params.seed": "scenario.params.seed"}


def test_comparison_table_prints_dash_for_an_unset_key_and_no_cut_header():
    from coopsim.platform.report import comparison_table

    st = {"mean": 1.0, "ci95_low": None, "ci95_high": None}
    keys = ["agents.id", "agents.params.delta", "agents.params.num_runs", "agents.params.p_min", "max_steps"]
    result = {"x_key": None, "line_keys": keys, "shown_line_keys": keys, "metrics": ["episode_return"],
              "table": [{"line": {"agents.id": "graph_safe-v0", "agents.params.delta": "0.01",
                                  "agents.params.num_runs": "360", "agents.params.p_min": "0.05", "max_steps": "None"},
                         "x": 0, "summary": {"episode_return": st}, "seeds": [0]},
                        {"line": {"agents.id": "safe_baselines/iql-v0", "agents.params.delta": "None",
                                  "agents.params.num_runs": "None", "agents.params.p_min": "None", "max_steps": "8"},
                         "x": 0, "summary": {"episode_return": st}, "seeds": [0]}]}
    text = _table_text(comparison_table(result))
    lines = text.splitlines()
    header = next(ln for ln in lines if "agents.id" in ln)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == ["agents.id", "delta", "num_runs", "p_min",
                                                                  "max_steps", "episode_return"]
    rows = [[c.strip() for c in ln.strip()[1:-1].split("│")] for ln in lines if ln.startswith("│")]
    assert rows == [["graph_safe-v0", "0.01", "360", "0.05", "—", "1"],
                    ["safe_baselines/iql-v0", "—", "—", "—", "8", "1"]]
    assert "None" not in text and "…" not in text
    assert "config key columns are headed by the ends of their keys (compare.csv has the full keys)" in " ".join(text.split())
    assert "— = a key the run does not set" in " ".join(text.split())


def test_report_of_the_safety_comparison_keeps_full_keys_in_compare_csv(tmp_path):
    from coopsim.platform.config import load_config
    from coopsim.platform.report import compare_runs, comparison_table
    from coopsim.platform.runner import run_config

    over = ["seeds=[0]", "episodes=1", f"out_dir={tmp_path}"]
    a = run_config(load_config(ROOT / SAFETY, over), progress=False)
    b = run_config(load_config(ROOT / "configs/safety/baselines/coop-grid4x4-2ag-all-iql-noshield.yaml",
                               [*over, "max_steps=8"]), progress=False)
    res = compare_runs([a, b], out_dir=tmp_path)
    header = (tmp_path / "compare.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == ["agents.id", "agents.params.delta", "agents.params.num_runs", "agents.params.p_min",
                          "max_steps"]
    assert (tmp_path / "compare.csv").read_text().splitlines()[1].split(",")[4] == "None"  # compare.csv as before
    text = _table_text(comparison_table(res), width=120)
    assert "agents.params…" not in text and "agents.param…" not in text and "None" not in text
    # shield.params.delta differs too, so the agent's delta column keeps its whole key: wrapped, never cut to "…"
    head_lines = [ln.strip()[1:-1].split("┃") for ln in text.splitlines() if ln.startswith("┃")]
    heads = ["".join(ln[i].strip() for ln in head_lines) for i in range(len(head_lines[0]))]
    assert heads[:6] == ["agents.id", "shield.id", "max_steps", "agents.params.delta", "agents.params.num_runs",
                         "agents.params.p_min"], text
    rows = [[c.strip() for c in ln.strip()[1:-1].split("│")] for ln in text.splitlines() if ln.startswith("│")]
    assert [r[2:6] for r in rows if r[3]] == [["—", "0.01", "360", "0.05"], ["8", "—", "—", "—"]], text


# --- 7. a check across params names the override / --grid value that set one of them ------------------------------

RING_MAP = "type octile\nheight 3\nwidth 5\nmap\n.....\n.@@@.\n.....\n"


@pytest.fixture()
def ring(tmp_path):
    (tmp_path / "ring.map").write_text(RING_MAP)
    cfg = {"name": "ring", "scenario": {"id": "mapf/MGMAPF-v0", "params": {"map": str(tmp_path / "ring.map"),
                                                                          "num_agents": 2, "num_goals": 1}},
           "agents": {"id": "mapf/prioritized-v0"}, "seeds": [0], "episodes": 1, "max_steps": 64,
           "out_dir": str(tmp_path / "runs")}
    (tmp_path / "ring.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "ring.yaml"


def test_too_many_agents_for_the_goals_blames_the_num_agents_override(ring):
    err = _err(run_cli("run", str(ring), f"scenario.params.map={ring.parent / 'ring.map'}",
                       "scenario.params.scen=null", "scenario.params.num_agents=12"))
    assert err == (f"error: command-line override 'scenario.params.num_agents=12' (config {ring}): key "
                   f"'scenario.params.num_goals': cannot sample 1 goal(s) for each of the 12 agents of a region with "
                   f"only 0 free cells left after their starts (every start and goal is a distinct cell: num_agents x "
                   f"(1 + num_goals) = 24 > 12 free cells of the region); use fewer agents or goals, or a larger map")
    # num_goals set on the command line: that override, as before
    err = _err(run_cli("validate", str(ring), "scenario.params.num_goals=6"))
    assert err.startswith(f"error: command-line override 'scenario.params.num_goals=6' (config {ring}): key "
                          f"'scenario.params.num_goals': cannot sample 6 goal(s)")


def test_a_placement_refused_for_min_dist_blames_the_min_dist_override():
    err = _err(run_cli("validate", SAFETY, "scenario.params.min_dist=100"))
    assert err == (f"error: command-line override 'scenario.params.min_dist=100' (config {SAFETY}): key "
                   f"'scenario.params.num_agents': could not place 2 agents satisfying ['separation', 'resource', "
                   f"'connectivity'] (min_dist=100.0, comm_range=3.0, load_frac=0.25); use a larger world or looser "
                   f"constraints")


def test_scenario_error_keeps_the_other_keys_of_a_check_across_params():
    from coopsim.platform.runner import scenario_error

    exc = scenario_error(ConfigError("x", key="num_goals", value=1, also=("num_agents", "scenario.id")), "c.yaml")
    assert (exc.file, exc.key, exc.also) == ("c.yaml", "scenario.params.num_goals",
                                             ("scenario.params.num_agents", "scenario.id"))


def test_sweep_names_the_grid_value_of_an_agent_that_cannot_act_on_the_scenario(tmp_path):
    err = _err(run_cli("sweep", "configs/mapf/random-32-32-10.yaml", "--grid",
                       "agents.id=mapf/prioritized-v0,smac/focus-fire-v0", "seeds=[0]", f"out_dir={tmp_path}"))
    assert err.startswith("error: --grid value 'agents.id=smac/focus-fire-v0' (config "
                          "configs/mapf/random-32-32-10.yaml): key 'agents.id': agent 'smac/focus-fire-v0' cannot act "
                          "on scenario 'mapf/MGMAPF-v0'"), err
    assert not list(tmp_path.iterdir())  # nothing ran


def test_sweep_names_a_fixed_override_of_a_check_across_params(ring):
    err = _err(run_cli("sweep", str(ring), "--grid", "seeds=0,1", "scenario.params.num_agents=12"))
    assert err.startswith(f"error: command-line override 'scenario.params.num_agents=12' (config {ring}): key "
                          f"'scenario.params.num_goals': cannot sample 1 goal(s)"), err
    err = _err(run_cli("sweep", str(ring), "--grid", "scenario.params.num_agents=2,12"))
    assert err.startswith(f"error: --grid value 'scenario.params.num_agents=12' (config {ring}): key "
                          f"'scenario.params.num_goals': cannot sample 1 goal(s)"), err


# --- 8. report: the only metrics line is cut off -------------------------------------------------------------------

def test_report_of_a_run_whose_only_metrics_line_is_cut_off_says_it_is_not_valid_json(tmp_path):
    from coopsim.platform.report import load_run

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"name": "r", "scenario": {"id": "line/LineWalk-v0"},
                                                     "agents": {"id": "random-v0"}}))
    line = json.dumps({"seed": 0, "episode": 0, "episode_return": 1.5, "steps": 12, "violations": 0.0})
    (run / "metrics.jsonl").write_text(line[:50])
    with pytest.raises(CoopsimError) as exc:
        load_run(run)
    want = (f"{run}: no usable episode: {run / 'metrics.jsonl'}: line 1 is not valid JSON (cut off: the file is "
            f"damaged, or the run was killed while writing that episode)")
    assert str(exc.value) == want
    assert "stopped before its first episode" not in str(exc.value)
    assert _err(run_cli("report", str(run))) == f"error: {want}"
    (run / "metrics.jsonl").write_text("")  # an empty file: still the run that finished no episode
    with pytest.raises(CoopsimError, match="no finished episode in metrics.jsonl"):
        load_run(run)

"""fresh33b findings: ``immp_compare.py`` on a folder holding non-MAPF runs (N3), agent ``seed`` bounds (N4), a
lagrangian-v0 cost table from other constraints (N6), direct construction checks num_envs / quoted numbers / a
Variant's fixed params (N7), ``count_violations`` with an agent index >= N (N8), a tabular Q-table shape mismatch
naming the param (N9), ``immp_learning_curve.py`` labels on a non-IMMP run (N12)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coopsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _bench(tmp_path, script, *args):
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=120)


# --- N3: immp_compare.py on non-MAPF runs ----------------------------------------------------------------------------

def _run_dir(root: Path, name: str, scenario: dict, agent: str, rows: list[dict]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"scenario": scenario, "agents": {"id": agent, "params": {}}}))
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


LINE = {"id": "line/LineWalk-v0", "params": {"num_agents": 2, "length": 5}}
LINE_ROW = {"episode_seed": 0, "return": -3.0, "success": 1.0}


def test_immp_compare_only_non_mapf_runs_is_one_error_line(tmp_path):
    """Used to be ``KeyError: 'map'`` (a traceback, exit 1)."""
    _run_dir(tmp_path / "runs", "lw", LINE, "random-v0", [LINE_ROW])
    r = _bench(tmp_path, "immp_compare.py", tmp_path / "runs")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: key 'roots': no MG-MAPF (mapf/*) run under") and "line/LineWalk-v0" in last, last
    assert r.stdout == ""


def test_immp_compare_skips_non_mapf_runs_with_a_note(tmp_path):
    root = tmp_path / "runs"
    _run_dir(root, "lw", LINE, "random-v0", [LINE_ROW])
    # a MAPF run whose config leaves num_goals out: the scenario default (3) is taken
    _run_dir(root, "pibt", {"id": "mapf/MGMAPF-v0", "params": {"map": "random-32-32-10", "num_agents": 8}},
             "mapf/pibt-v0", [{"episode_seed": 1, "success": 1.0, "soc": 110.0, "lb": 100.0, "soc_over_lb": 1.1,
                               "makespan": 20.0}])
    r = _bench(tmp_path, "immp_compare.py", root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "note: skipped 1 run not of an MG-MAPF (mapf/*) scenario" in r.stderr and "line/LineWalk-v0" in r.stderr
    assert "== random-32-32-10  N=8  K=3" in r.stdout


def test_immp_compare_unreadable_config_is_one_error_line(tmp_path):
    d = _run_dir(tmp_path / "runs", "bad", LINE, "random-v0", [LINE_ROW])
    (d / "config.yaml").write_text("a: [1, 2\n")
    r = _bench(tmp_path, "immp_compare.py", tmp_path / "runs")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "is not a readable YAML file" in r.stderr.strip().splitlines()[-1]


# --- N4: agent seed params are bounded --------------------------------------------------------------------------------

from coopsim.platform import registry  # noqa: E402
from coopsim.platform.agent import AGENT_SEED_MAX  # noqa: E402

def _seeded_agents():
    out = []
    for s in registry.specs("agent"):
        try:
            model = s.Params
        except Exception:  # an optional component that cannot be loaded here
            continue
        if "seed" in model.model_fields:
            out.append(s.id)
    return out


SEEDED = _seeded_agents()


def test_some_agents_have_a_seed_param():
    assert {"smac/random-valid-v0", "safe_baselines/lagrangian-v0", "mapf/pibt-v0", "ppo/mappo-v0"} <= set(SEEDED)


@pytest.mark.parametrize("aid", SEEDED)
@pytest.mark.parametrize("seed", [-5, 2**64])
def test_agent_seed_out_of_range_is_a_config_error_naming_the_key(aid, seed):
    """smac/random-valid-v0 with seed -5 used to pass validation and fail in numpy's default_rng (a traceback in
    validate and run); 2**64 passed every agent's params and failed in torch's manual_seed (ppo, immp)."""
    with pytest.raises(ConfigError) as e:
        registry.validate_params("agent", aid, {"seed": seed}, key_prefix="agents.params.")
    assert e.value.key == "agents.params.seed" and str(seed) in str(e.value), str(e.value)
    # the edges are accepted by the params (the generators take them; see AGENT_SEED_MAX)
    lo = registry.validate_params("agent", aid, {"seed": 0})
    les = [m.le for m in registry.spec("agent", aid).Params.model_fields["seed"].metadata if hasattr(m, "le")]
    assert les and les[0] <= AGENT_SEED_MAX
    hi = registry.validate_params("agent", aid, {"seed": les[0]})
    assert lo.seed == 0 and hi.seed > 0


def test_generators_take_the_largest_agent_seed():
    import numpy as np
    import torch

    np.random.default_rng([AGENT_SEED_MAX, 17])
    np.random.RandomState(AGENT_SEED_MAX)
    torch.Generator().manual_seed(AGENT_SEED_MAX)


def test_random_valid_negative_seed_validate_is_one_error_line(tmp_path):
    cfg = tmp_path / "rv.yaml"
    cfg.write_text("name: rv\nscenario: {id: smac/3m-v0}\nagents: {id: smac/random-valid-v0, params: {seed: -5}}\n"
                   "seeds: [0]\nepisodes: 1\n")
    r = subprocess.run([sys.executable, "-m", "coopsim", "validate", str(cfg)], capture_output=True, text=True,
                       env=ENV, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "agents.params.seed" in r.stderr and "-5" in r.stderr


# --- N6: lagrangian-v0 refuses a cost table learned under other constraints ------------------------------------------

ALL3 = ["separation", "resource", "connectivity"]


def _tab(agent_id: str, **params):
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=1, **{"num_agents": 2, "constraints": ALL3, **params})
    return registry.make_component("agent", agent_id, sc)


@pytest.mark.parametrize("saved, key", [({"constraints": ["separation"]}, "constraints"), ({"cap": 2.0}, "cap"),
                                        ({"min_dist": 2.0}, "min_dist"), ({"margin": 0.5}, "margin"),
                                        ({"comm_range": 2.0}, "comm_range"), ({"start_spacing": 2.0}, "start_spacing")])
def test_lagrangian_refuses_a_file_from_other_constraints_naming_the_key(tmp_path, saved, key):
    """Its cost table qc is the expected constraint cost under the file's constraints: it used to load silently."""
    path = tmp_path / "policy.pt"
    _tab("safe_baselines/lagrangian-v0", **saved).save(path)
    with pytest.raises(ConfigError) as e:
        _tab("safe_baselines/lagrangian-v0").load(path)
    assert e.value.key == f"scenario.params.{key}", str(e.value)
    assert f"scenario.params.{key}={saved[key]!r}" in str(e.value) and "cost table" in str(e.value)
    _tab("safe_baselines/lagrangian-v0", **saved).load(path)  # the same constraints load


@pytest.mark.parametrize("agent_id", ["safe_baselines/iql-v0", "graph_safe-v0"])
def test_iql_and_graph_safe_still_take_a_file_from_other_constraints(tmp_path, agent_id):
    """Their values do not depend on the constraints (graph-safe's certificate reads them from this run's scenario;
    IQL's team reward does not read them): unchanged."""
    path = tmp_path / "policy.pt"
    _tab(agent_id, constraints=["separation"], cap=2.0).save(path)
    _tab(agent_id).load(path)
    with pytest.raises(ConfigError) as e:  # the world itself is still compared
        _tab(agent_id, world_seed=3).load(path)
    assert e.value.key == "scenario.params.world_seed"


# --- N9: a table shape mismatch names the scenario param that differs -------------------------------------------------

@pytest.mark.parametrize("agent_id", ["safe_baselines/iql-v0", "safe_baselines/lagrangian-v0"])
@pytest.mark.parametrize("here, key", [({"max_steps": 12}, "scenario.params.max_steps"),
                                       ({"num_agents": 3}, "scenario.params.num_agents")])
def test_tabular_shape_mismatch_names_the_param(tmp_path, agent_id, here, key):
    """Used to be "policy Q table has shape (9, 2, 16, 5) but this scenario gives (13, 2, 16, 5)", no key."""
    path = tmp_path / "policy.pt"
    _tab(agent_id).save(path)
    with pytest.raises(ConfigError) as e:
        _tab(agent_id, **here).load(path)
    assert e.value.key == key, str(e.value)
    k = key.rsplit(".", 1)[1]
    default = 8 if k == "max_steps" else 2  # Grid4x4-v0: max_steps 8
    assert f"{key}={default!r} (this run: {here[k]!r})" in str(e.value) and "Q table shape" in str(e.value)


def test_tabular_shape_mismatch_other_scenario_id_is_keyed_scenario_id(tmp_path):
    path = tmp_path / "policy.pt"
    _tab("safe_baselines/iql-v0").save(path)
    sc = registry.make_scenario("coop_game/Grid5x5-v0", num_envs=1, num_agents=2, constraints=ALL3)
    with pytest.raises(ConfigError) as e:
        registry.make_component("agent", "safe_baselines/iql-v0", sc).load(path)
    assert e.value.key == "scenario.id" and "coop_game/Grid4x4-v0" in str(e.value), str(e.value)


def test_graph_safe_shape_mismatch_names_the_param(tmp_path):
    path = tmp_path / "policy.pt"
    _tab("graph_safe-v0").save(path)
    sc = registry.make_scenario("coop_game/Grid-v0", num_envs=1, num_agents=2, constraints=ALL3, height=4, width=5)
    with pytest.raises(ConfigError) as e:
        registry.make_component("agent", "graph_safe-v0", sc).load(path)
    assert e.value.key in ("scenario.id", "scenario.params.width"), str(e.value)
    assert "scenario.params.width=4 (this run: 5)" in str(e.value), str(e.value)


# --- N8: count_violations with an agent index >= N ---------------------------------------------------------------------

def test_count_violations_agent_index_out_of_range_names_constraint_and_n():
    """Used to be a raw 'IndexError: index 5 is out of bounds for axis 1 with size 3'."""
    import numpy as np

    from coopsim.safety.constraints import KeepConnected, Separation, count_violations

    p = np.zeros((2, 3, 2))
    p[:, :, 0] = np.arange(3)
    for c in (Separation(min_dist=1.0, agents=(0, 5)), KeepConnected(range_m=2.0, agents=(1, 3))):
        with pytest.raises(ValueError) as e:
            count_violations([c], p, p, np.zeros((2, 3)))
        msg = str(e.value)
        assert f"'{c.name}'" in msg and "N=3" in msg and type(c).__name__ in msg, msg
    # in range: counted as before
    got = count_violations([Separation(min_dist=1.5, agents=(0, 2)), Separation(min_dist=1.5, agents=(0, 1))],
                           p, p, np.zeros((2, 3)))
    assert got["separation"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="a sequence of constraints"):
        count_violations(Separation(min_dist=1.0), p, p, np.zeros((2, 3)))


# --- N7: direct construction checks num_envs, quoted numbers and a variant's fixed params -----------------------------

def _cores():
    from coopsim.scenarios.coop_game.core import CoopGameCore
    from coopsim.scenarios.line import LineWalkCore
    from coopsim.scenarios.mapf.core import MGMAPFCore
    from coopsim.scenarios.mpe.tasks import SimpleSpreadCore

    return [MGMAPFCore, LineWalkCore, CoopGameCore, SimpleSpreadCore]


@pytest.mark.parametrize("num_envs", [2.5, 0, -1, True, "2"])
def test_core_built_directly_refuses_a_bad_num_envs(num_envs):
    """MGMAPFCore(num_envs=2.5) built 2 envs, num_envs=0 failed in numpy; LineWalkCore(num_envs=0) built a 0-env core."""
    for cls in _cores():
        with pytest.raises(ConfigError, match=r"num_envs must be an integer >= 1") as e:
            cls(num_envs=num_envs)
        assert repr(num_envs) in str(e.value), (cls, str(e.value))


def test_core_built_directly_takes_an_integer_num_envs():
    import numpy as np

    for cls in _cores():
        assert cls(num_envs=2).num_envs == 2 and cls(num_envs=np.int64(3)).num_envs == 3


def test_mapf_from_instance_refuses_a_bad_num_envs():
    from coopsim.scenarios.mapf.core import MGMAPFCore

    with pytest.raises(ConfigError, match="num_envs must be an integer >= 1"):
        MGMAPFCore.from_instance(object(), num_envs=0)  # checked before the instance is read


@pytest.mark.parametrize("build, key", [
    (lambda: _cores()[0](max_steps="3"), "max_steps"),
    (lambda: _cores()[1](num_agents="3"), "num_agents"),
    (lambda: _cores()[2](slip="0.1"), "slip"),
])
def test_core_built_directly_refuses_a_quoted_number(build, key):
    """The same value in a config is refused ('an integer is required, not a string'); directly it was taken."""
    with pytest.raises(ConfigError, match=r"is required, not a string \(remove the quotes") as e:
        build()
    assert e.value.key == key


def test_channel_built_directly_refuses_a_quoted_number():
    from coopsim.comm.ideal import IdealChannel

    with pytest.raises(ConfigError, match="not a string") as e:
        IdealChannel(header_bytes="3")
    assert e.value.key == "header_bytes"


def test_variant_built_directly_refuses_a_fixed_param_that_differs():
    """Grid4x4(height=5).params.height was 5: a 'Grid4x4' of height 5. make_scenario refused it."""
    from coopsim.scenarios.coop_game import Grid4x4

    with pytest.raises(ConfigError) as e:
        Grid4x4(height=5)
    assert e.value.key == "height" and "'height' is fixed to 4 by id 'coop_game/Grid4x4-v0'; got 5" in str(e.value)
    assert "coop_game/Grid-v0" in str(e.value)  # what to use instead
    assert Grid4x4(height=4).params.height == 4 and Grid4x4(num_agents=3).params.height == 4
    # the registry's message is unchanged
    with pytest.raises(ConfigError) as e2:
        registry.make_scenario("coop_game/Grid4x4-v0", height=5)
    assert str(e2.value) == str(e.value)


def test_unregistered_variant_built_directly_names_its_class():
    from coopsim.platform.registry import Variant
    from coopsim.scenarios.line import LineWalkCore

    v = Variant(LineWalkCore, {"num_agents": 2}, fixed=("num_agents",))
    with pytest.raises(ConfigError, match="'num_agents' is fixed to 2 by this LineWalkCore variant; got 3"):
        v(num_agents=3)
    assert v(num_envs=2).num_envs == 2


# --- N12 (the brief's N10): immp_learning_curve.py labels on a non-IMMP run ------------------------------------------

def _curve_run(root: Path, name: str, agent: str, header: str, rows: list[str]) -> None:
    seed = root / name / "seed-0"
    seed.mkdir(parents=True)
    (seed.parent / "config.yaml").write_text(yaml.safe_dump({"agents": {"id": agent}}))
    (seed / "metrics.csv").write_text("\n".join([header, *rows]) + "\n")


def test_immp_learning_curve_labels_on_a_non_immp_run(tmp_path):
    """Used to print '== ppo/mappo-v0: runs seed-0 ...' (no run named), an 'intent acc' column of nan, and bins
    '1-768', '1001-1792', '2001-2048' (nominal start, the data's end)."""
    root = tmp_path / "runs"
    _curve_run(root, "lw-a", "ppo/mappo-v0", "iteration,env_steps,time/wall_s,reward/extrinsic,loss/entropy",
               [f"{i},{i * 256},{i},-1.0,1.0" for i in range(1, 9)])
    r = _bench(tmp_path, "immp_learning_curve.py", root, "--bin", "1000")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "== ppo/mappo-v0: 1 run: lw-a/seed-0 8 s (2048 env steps)", lines
    assert "intent acc" not in r.stdout and "nan" not in r.stdout
    assert [ln.split()[0] for ln in lines[2:]] == ["1-768", "769-1792", "1793-2048"]


def test_immp_learning_curve_keeps_intent_accuracy_for_immp(tmp_path):
    root = tmp_path / "runs"
    _curve_run(root, "immp", "mapf/immp-v0",
               "iteration,env_steps,time/wall_s,reward/extrinsic,loss/entropy,aux/IntentLoss/accuracy",
               ["1,1024,1,-1.0,1.0,0.5", "2,2048,2,-0.5,0.9,0.75"])
    r = _bench(tmp_path, "immp_learning_curve.py", root)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "intent acc" in r.stdout and "0.625" in r.stdout and " 1-2048 " in r.stdout


def test_immp_learning_curve_run_without_ppo_metrics_is_noted(tmp_path):
    root = tmp_path / "runs"
    _curve_run(root, "tab", "safe_baselines/iql-v0", "iteration,env_steps,episode/return,time/wall_s", ["1,8,0.0,0.1"])
    r = _bench(tmp_path, "immp_learning_curve.py", root)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == "", (r.stdout, r.stderr[-2000:])
    assert "note: skipped 1 metrics.csv without reward/extrinsic" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: key 'roots': no metrics.csv under")

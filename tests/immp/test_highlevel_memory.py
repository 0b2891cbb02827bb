"""Fresh-user pass 35 (F8): the high level (IMMP's, and the baselines' one that PIBT follows) allocated a density
map of ``(max_steps + horizon + 2) x H*W`` float32 per env: GBs on large maps, and the MemoryError surfaced as
"agent cannot act" blaming agents.id. The map is now a window of the steps it reads (independent of max_steps),
with the same actions, and arrays that would not fit are refused up front with a ConfigError naming the map."""
import numpy as np
import pytest

from coopsim.agents.immp import highlevel
from coopsim.agents.immp.highlevel import HighLevelParams, TeamPlanner, density_rows, planner_bytes
from coopsim.errors import ConfigError
from coopsim.platform import memory, registry
from coopsim.scenarios.mapf import MGMAPFCore


def test_the_density_window_does_not_grow_with_max_steps():
    p = HighLevelParams()
    blocked = np.zeros((12, 12), bool)
    starts = np.array([[0, 0], [11, 11]])
    goals = np.array([[[11, 0], [5, 5]], [[0, 11], [6, 6]]])
    for max_steps in (200, 100_000):
        env = TeamPlanner(p).reset_env(0, blocked, starts, goals, np.zeros((2, 2), bool), "free", max_steps)
        assert env.counts.shape == (p.horizon + 2 * p.time_window + 1 + highlevel.DENSITY_SLACK, 144) == (86, 144)
    assert density_rows(64, 2, 10) == 10 + 64 + 2                    # a short episode: the whole episode, as before


def _episode_actions(agent_id, params, max_steps=200):
    core = MGMAPFCore(2, map="room-32-32-4", num_agents=24, num_goals=3, obs_radius=3, goal_order="free",
                      max_steps=max_steps)
    agent = registry.make_component("agent", agent_id, core, **params)
    obs = core.reset(seed=3)
    agent.reset(3)
    acts, bases = [], set()
    while not core.done.all():
        a, _ = agent.act(obs)
        acts.append(a)
        bases.add(agent.hl.planner.envs[0].t_base)
        obs = core.step(a).obs
    return np.stack(acts), bases


@pytest.mark.parametrize("agent_id, params", [
    ("mapf/immp-v0", {"highlevel": {"horizon": 12, "time_window": 3}}),   # untrained policy; congestion term on
    ("mapf/pibt-v0", {}),
])
def test_the_window_gives_the_actions_of_the_full_map(monkeypatch, agent_id, params):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    windowed, bases = _episode_actions(agent_id, params)
    assert len(bases) > 3                                             # the window slid several times
    monkeypatch.setattr(highlevel, "DENSITY_SLACK", 10**6)            # a window over the whole episode: the old map
    torch.manual_seed(0)
    full, full_bases = _episode_actions(agent_id, params)
    assert full_bases == {0}
    np.testing.assert_array_equal(windowed, full)


def test_planner_arrays_that_do_not_fit_are_a_config_error_naming_the_map(monkeypatch):
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 2 * 2**30)   # limit: 1 GiB
    blocked = np.zeros((2048, 2048), bool)                             # 86 x 4M cells x 4 bytes = 1.3 GiB of density alone
    tp = TeamPlanner(HighLevelParams(), horizon_key="agents.params.highlevel.horizon")
    with pytest.raises(ConfigError) as exc:
        tp.reset_env(0, blocked, np.array([[0, 0]]), np.array([[[5, 5]]]), np.zeros((1, 1), bool), "free", 1024)
    msg = str(exc.value)
    assert exc.value.key == "scenario.params.map"
    assert "2048x2048 map (4194304 cells)" in msg and "agents.params.highlevel.horizon (now 64)" in msg
    need = planner_bytes(2048, 2048, 1, 1, HighLevelParams(), 1024)
    assert need > 4 * 86 * 2048**2 and f"needs {memory.gib(need)}" in msg and "(1.0 GiB of 2.0 GiB)" in msg
    # the baselines' planner (PIBT: no horizon to set) names what the user can lower
    with pytest.raises(ConfigError, match="lower scenario.params.num_agents or num_goals, or use a smaller map"):
        TeamPlanner(HighLevelParams(ordering="nearest", order_weight=0.0, path_weight=0.0, rounds=0)).reset_env(
            0, blocked, np.array([[0, 0]]), np.array([[[5, 5]]]), np.zeros((1, 1), bool), "free", 1024)
    assert tp.envs == []                                               # nothing was allocated


def test_immp_names_its_horizon_key():
    core = MGMAPFCore(1, map="random-32-32-10", num_agents=4, num_goals=2, obs_radius=3, max_steps=64)
    assert registry.make_component("agent", "mapf/immp-v0", core).hl.planner.horizon_key == \
        "agents.params.highlevel.horizon"
    assert registry.make_component("agent", "mapf/pibt-v0", core).hl.planner.horizon_key is None


@pytest.mark.parametrize("d", [1, 2, 17, 40, 60, 80, 200])
def test_the_density_window_slides_in_place_by_any_step(d):
    """fresh35b N8: sliding copied the whole window first (a second window's memory, 1 GiB on a 2048x2048 map,
    raised mid-run). Rows now move in blocks; the result is the same shift, zeros behind."""
    from coopsim.agents.immp.highlevel import EnvPlan, TeamPlanner

    tp = TeamPlanner()
    rows = tp.p.horizon + tp.p.time_window + 1  # short enough that a move to step d + time_window slides by d
    a = np.random.default_rng(d).random((rows, 7)).astype(np.float32)
    env = EnvPlan.__new__(EnvPlan)
    env.counts, env.t_base = a.copy(), 0
    tp._advance(env, d + tp.p.time_window)  # the window's new first row is step d
    want = np.zeros_like(a)
    if d < rows:
        want[:rows - d] = a[d:]
    assert env.t_base == d and np.array_equal(env.counts, want)

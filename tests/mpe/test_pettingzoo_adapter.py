import numpy as np
import pytest

pytest.importorskip("mpe2")
from mpe2 import simple_speaker_listener_v4, simple_spread_v3  # noqa: E402

from coopsim.errors import ConfigError  # noqa: E402
from coopsim.platform.registry import make_scenario  # noqa: E402
from coopsim.scenarios.pettingzoo_adapter import PettingZooCore  # noqa: E402
from coopsim.testing import check_scenario  # noqa: E402


def test_check_scenario_on_wrapped_mpe2():
    check_scenario("pettingzoo/adapter-v0", params={"env": "mpe2.simple_spread_v3:parallel_env", "env_kwargs": {"N": 3}})


def test_adapter_equals_the_env_it_wraps():
    core = make_scenario("pettingzoo/adapter-v0", num_envs=2, env="mpe2.simple_spread_v3:parallel_env",
                         env_kwargs={"N": 3, "max_cycles": 25})
    obs = core.reset(seed=4)
    ref = simple_spread_v3.parallel_env(N=3, max_cycles=25)
    s1 = int(np.random.default_rng([4, 1]).integers(2**31))
    ro, _ = ref.reset(seed=s1)
    np.testing.assert_array_equal(obs[1], np.stack([ro[a] for a in ref.possible_agents]))
    rng = np.random.default_rng(0)
    for t in range(25):
        a = rng.integers(0, 5, (2, 3))
        res = core.step(a)
        ro, rr, *_ = ref.step({ag: int(a[1, i]) for i, ag in enumerate(ref.possible_agents)})
        np.testing.assert_array_equal(res.obs[1], np.stack([ro[ag] for ag in ref.possible_agents]))
        assert res.reward[1].tolist() == pytest.approx([rr[ag] for ag in ref.possible_agents])
    assert core.done.all() and res.truncated.all()


def test_heterogeneous_spaces_are_padded_and_masked():
    core = PettingZooCore.from_envs([simple_speaker_listener_v4.parallel_env()])
    obs = core.reset(seed=0)
    assert obs.shape == (1, 2, 11) and core.action_space.n == 5
    assert core.action_masks()[0].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    assert (obs[0, 0, 3:] == 0).all()


def test_bad_env_path():
    with pytest.raises(ConfigError, match="module:callable"):
        make_scenario("pettingzoo/adapter-v0", env="mpe2.simple_spread_v3")

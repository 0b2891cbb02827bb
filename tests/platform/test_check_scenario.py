"""coopsim.testing.check_scenario: passes a correct scenario, and fails broken ones with the exact message."""
import numpy as np
import pytest

from coopsim.errors import ScenarioCheckError
from coopsim.platform import registry
from coopsim.platform.scenario import StepResult
from coopsim.scenarios.line import LineWalkCore
from coopsim.testing import check_scenario


@pytest.mark.parametrize("scenario_id", registry.list_ids("scenario"))
def test_every_registered_scenario_conforms(scenario_id):
    factory = registry.spec("scenario", scenario_id).load()
    check_scenario(scenario_id, params=dict(getattr(getattr(factory, "cls", factory), "example_params", {})))


class GlobalRngLineWalk(LineWalkCore):
    """Broken: draws targets from numpy's global generator, so two instances with one seed differ."""

    def reset(self, seed=None, env_ids=None):
        super().reset(seed=seed, env_ids=env_ids)
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        self._target[ids] = np.random.randint(0, self.params.length, (len(ids), self.num_agents))
        self._alive[ids] = self._pos[ids] != self._target[ids]
        return self._obs()


class RewardsTheDead(LineWalkCore):
    """Broken: keeps paying -1 to agents that already left the episode."""

    def step(self, actions):
        res = super().step(actions)
        return StepResult(res.obs, np.full_like(res.reward, -1.0), res.terminated, res.truncated, res.info)


class WrongDtype(LineWalkCore):
    """Broken: observations in float64 while the space says float32."""

    def _obs(self):
        return super()._obs().astype(np.float64)


def test_checker_catches_global_rng():
    with pytest.raises(ScenarioCheckError, match=r"^determinism \(two instances, same seed\): at step 0 'obs' differs$"):
        check_scenario(lambda n: GlobalRngLineWalk(num_envs=n, num_agents=8, length=50))


def test_checker_catches_reward_to_dead_slots():
    with pytest.raises(ScenarioCheckError, match=r"core contract: at step \d+ a slot that was not alive got a non-zero reward"):
        check_scenario(lambda n: RewardsTheDead(num_envs=n, num_agents=3, length=3), api_cycles=5)


def test_checker_catches_obs_dtype():
    with pytest.raises(ScenarioCheckError, match=r"pettingzoo parallel_api_test failed|observation 'obs' has dtype float64, space says float32"):
        check_scenario(lambda n: WrongDtype(num_envs=n))


def test_batch_env0_equals_single_env():
    batch, single = LineWalkCore(num_envs=3, num_agents=5, length=20), LineWalkCore(num_envs=1, num_agents=5, length=20)
    np.testing.assert_array_equal(batch.reset(seed=11)[:1], single.reset(seed=11))

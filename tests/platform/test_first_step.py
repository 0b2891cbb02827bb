"""`check_first_step` (validate, sweep) and the checked first step of `run_episode` (run) go through the same
checks: for every way an agent can fail to act on a scenario they raise the same ConfigError, and a valid agent
passes both."""
from pathlib import Path

import numpy as np
import pytest

from coopsim.errors import ConfigError, CoopsimError
from coopsim.platform.config import load_config
from coopsim.platform.runner import FirstStep, RunParts, check_first_step, run_episode

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"
WHAT = "agent 'random-v0' cannot act on scenario 'line/LineWalk-v0'"


def _act_raises(obs, inbox):
    raise RuntimeError("boom")


def _coopsim_error(obs, inbox):
    raise CoopsimError("a user error of the agent's own")


BAD_AGENTS = {  # name: (act, the expected message after "<WHAT>: ", or the exception type passed through)
    "act raises": (_act_raises, "its first act() raised RuntimeError: boom"),
    "wrong shape": (lambda obs, inbox: (np.zeros((1, 3), np.int64), None),
                    "the agent's joint action at step 0 is not valid for the scenario: shape (1, 3) (int64), values "
                    "[0, 0]; needed: integers 0..2 (Discrete(3)), shape (1, 4)"),
    "out of range": (lambda obs, inbox: (np.full((1, 4), 3, np.int64), None),
                     "the agent's joint action at step 0 is not valid for the scenario: shape (1, 4) (int64), values "
                     "[3, 3]; needed: integers 0..2 (Discrete(3)), shape (1, 4)"),
    "floats": (lambda obs, inbox: (np.zeros((1, 4), np.float32), None),
               "the agent's joint action at step 0 is not valid for the scenario: shape (1, 4) (float32), values "
               "[0.0, 0.0]; needed: integers 0..2 (Discrete(3)), shape (1, 4)"),
    "coopsim error": (_coopsim_error, CoopsimError),
}


def _parts(tmp_path):
    cfg = load_config(CFG, [f"out_dir={tmp_path}", "seeds=[0]", "episodes=1"])
    return cfg, RunParts(cfg)


def _errors(tmp_path, patch):
    """The exception of check_first_step and that of run_episode's checked step, each on fresh parts."""
    out = []
    for call in ("check_first_step", "run_episode"):
        cfg, parts = _parts(tmp_path)
        patch(parts)
        with pytest.raises(Exception) as info:
            if call == "check_first_step":
                check_first_step(parts, cfg, file="cfg.yaml")
            else:
                run_episode(parts, 0, check=FirstStep(cfg, file="cfg.yaml"))
        out.append(info.value)
        parts.close()
    return out


@pytest.mark.parametrize("name", sorted(BAD_AGENTS))
def test_the_same_error_from_validate_and_run(tmp_path, name):
    act, expected = BAD_AGENTS[name]
    a, b = _errors(tmp_path, lambda parts: setattr(parts.agent, "act", act))
    assert type(a) is type(b) and str(a) == str(b)
    if isinstance(expected, str):
        assert isinstance(a, ConfigError) and a.key == b.key == "agents.id" and a.file == b.file == "cfg.yaml"
        assert str(a).endswith(f"{WHAT}: {expected}"), str(a)
    else:
        assert type(a) is expected


def test_a_scenario_that_cannot_step_is_the_same_error(tmp_path):
    def patch(parts):
        def step(actions):
            raise IndexError("no such cell")
        parts.scenario.step = step

    a, b = _errors(tmp_path, patch)
    assert isinstance(a, ConfigError) and str(a) == str(b)
    assert str(a).endswith(f"{WHAT}: the scenario could not step with its joint action (IndexError: no such cell)")


def test_a_valid_agent_passes_both_and_later_steps_are_not_the_first_step_error(tmp_path):
    cfg, parts = _parts(tmp_path)
    check_first_step(parts, cfg)
    passed = []
    metrics, _ = run_episode(parts, 0, check=FirstStep(cfg, passed=lambda: passed.append(1)))
    assert passed == [1] and metrics["steps"] == cfg.max_steps
    # an invalid action after the first step: the runner's plain ConfigError, not the first-step one
    real, calls = parts.agent.act, []

    def act(obs, inbox):
        calls.append(1)
        a, out = real(obs, inbox)
        return (a if len(calls) < 3 else a + 7), out

    parts.agent.act = act
    with pytest.raises(ConfigError) as info:
        run_episode(parts, 1, check=FirstStep(cfg))
    assert info.value.key == "agents.id" and info.value.file is None
    assert "the agent's joint action at step 2 is not valid for the scenario" in str(info.value)
    assert "cannot act on scenario" not in str(info.value)
    parts.close()

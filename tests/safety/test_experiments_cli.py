"""The graph-safe experiment script refuses bad counts and never replaces a result of another budget silently."""
from __future__ import annotations

import json

import pytest

from coopsim.agents.graph_safe.experiments import main
from coopsim.errors import ConfigError


@pytest.mark.parametrize("argv", [
    ["violations", "--train-episodes", "-1"],
    ["violations", "--eval-episodes", "0"],
    ["regret", "--episodes", "-5"],
    ["regret", "--seeds", "-1"],
    ["regret", "--cases", "nosuchcase"],
    ["regret", "--p-min", "0"],
    ["regret", "--agent-params", "[1]"],
])
def test_bad_arguments_exit_2_before_anything_runs(argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv + ["--out", str(tmp_path)])
    assert e.value.code == 2
    assert "error: argument" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_result_of_another_budget_is_not_replaced_without_replace(tmp_path):
    path = tmp_path / "regret-grid4x4-2ag-all-seed0.json"
    kept = {"episodes": 600, "agent_params": {"num_runs": 360, "p_min": 0.1}, "cumulative_regret": [1.0]}
    path.write_text(json.dumps(kept))
    with pytest.raises(ConfigError, match="holds a run of 600 episodes.*not 7.*--replace"):
        main(["regret", "--cases", "grid4x4-2ag-all", "--episodes", "7", "--seeds", "0", "--out", str(tmp_path)])
    assert json.loads(path.read_text()) == kept
    vpath = tmp_path / "violations-coop-grid4x4-2ag-all.json"
    vkept = {"learner": "x", "train_episodes": 100, "eval_episodes": 10, "rows": []}
    vpath.write_text(json.dumps(vkept))
    with pytest.raises(ConfigError, match="holds 100 \\+ 10 episodes.*--replace"):
        main(["violations", "--configs", "configs/safety/coop-grid4x4-2ag-all.yaml", "--train-episodes", "3",
              "--eval-episodes", "1", "--seeds", "0", "--out", str(tmp_path)])
    assert json.loads(vpath.read_text()) == vkept


def test_the_same_setting_resumes_as_done(tmp_path, capsys):
    path = tmp_path / "regret-grid4x4-2ag-all-seed0.json"
    path.write_text(json.dumps({"episodes": 7, "agent_params": {"num_runs": 360, "p_min": 0.1}}))
    main(["regret", "--cases", "grid4x4-2ag-all", "--episodes", "7", "--seeds", "0", "--out", str(tmp_path)])
    assert f"done already ({path})" in capsys.readouterr().out


def test_results_are_written_with_the_platform_atomic_writer(tmp_path, monkeypatch):
    """Result JSON files go through coopsim.platform.recorder.atomic_write_json (fsync, unique temporary file)."""
    from coopsim.agents.graph_safe import experiments
    from coopsim.platform import recorder

    calls = []

    def spy(path, obj, **kwargs):
        calls.append(path)
        recorder.atomic_write_json(path, obj, **kwargs)

    monkeypatch.setattr(experiments, "atomic_write_json", spy)
    path = tmp_path / "sub" / "r.json"
    experiments._atomic_json({"a": [1, 2]}, path)
    assert calls == [path] and json.loads(path.read_text()) == {"a": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]

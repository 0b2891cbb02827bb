"""`python -m coopsim.agents.ddacom.evaluate` reruns and CLI checks (fresh28 items 3, 10, 18, 23): a rerun into the
same --out reuses its finished seeds (same settings) and never replaces a file with more finished seeds by fewer;
duplicate senders or sender params are refused; spaces in --senders are stripped; a radius that hides nothing is
named as the cause of a zero anchor gap."""
import json

import pytest

from coopsim.agents.ddacom import evaluate
from coopsim.errors import run_script

FAST = ["--num-envs", "2", "--episodes", "1", "--senders", "none,broadcast"]
PER_SEED = 2 + 3 * 2  # two anchors + 3 channels x 2 senders


class _Stop:
    """A stand-in for evaluate.run that raises Ctrl-C at its ``at``-th call (1-based)."""

    def __init__(self, at):
        self.at, self.calls, self.real = at, 0, evaluate.run

    def __call__(self, *args, **kw):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.real(*args, **kw)


def _interrupted(monkeypatch, capsys, argv, at):
    """Run ``argv`` as the CLI does, with Ctrl-C at the ``at``-th run; returns (runs called, exit code, output)."""
    stop = _Stop(at)
    monkeypatch.setattr(evaluate, "run", stop)
    code = 0
    try:
        run_script(evaluate.main, argv, kept=evaluate.kept_on_interrupt)
    except SystemExit as exc:
        code = exc.code
    monkeypatch.setattr(evaluate, "run", stop.real)
    return stop.calls, code, capsys.readouterr()


def test_an_interrupted_rerun_never_replaces_more_finished_seeds_by_fewer(tmp_path, monkeypatch, capsys):
    out = tmp_path / "e.json"
    evaluate.main(["--seeds", "2", *FAST, "--out", str(out)])
    first = capsys.readouterr().out
    before = out.read_bytes()
    assert json.loads(before)["seeds_done"] == 2

    # the same command again, stopped in its second seed: it reuses both seeds and runs nothing
    calls, code, cap = _interrupted(monkeypatch, capsys, ["--seeds", "2", *FAST, "--out", str(out)], at=PER_SEED + 1)
    assert calls == 0 and code == 0, "a finished seed was computed again"
    assert f"reusing 2 finished seed(s) from {out}" in cap.out
    assert out.read_bytes() == before
    assert cap.out.split("channel/sender", 1)[1] == first.split("channel/sender", 1)[1]  # the same table

    # other settings (--episodes 2), stopped in the second seed: --out keeps its 2 seeds, the 1 new goes aside
    argv = ["--seeds", "2", *FAST[:2], "--episodes", "2", *FAST[4:], "--out", str(out)]
    _, code, cap = _interrupted(monkeypatch, capsys, argv, at=PER_SEED + 1)
    assert code == 130 and out.read_bytes() == before
    (partial,) = tmp_path.glob("e.partial-*.json")
    assert json.loads(partial.read_text())["seeds_done"] == 1
    # (fresh36b N4: the rule, kept, is said in full once: the other settings, that the result is deleted, and when)
    assert f"note: {out} holds a result of 2 seed(s) with other settings (differs in: episodes); by the rule of " \
           f"coopsim.comm.ns3.experiment that result is DELETED, replaced by this run's, once this run has finished " \
           f"more seeds than it holds (this run asks for 2, so not in this run); until then this run's result goes " \
           f"to {partial}. Give another --out to keep both" in cap.out
    assert "partial result goes to" not in cap.out  # the same thing once, not twice
    (line,) = [ln for ln in cap.err.splitlines() if ln.startswith("interrupted; kept: ")]
    assert line == (f"interrupted; kept: {partial} with 1 of 2 seed(s) (seeds 0..0), a valid JSON file; {out} kept as "
                    f"it was, with its 2 finished seed(s)")

    # the same command again: resumes from the partial file; as many seeds as --out's result of other settings do not
    # replace it (fresh36 F11, coopsim.comm.ns3.experiment's rule): the partial file holds both seeds, as it says
    evaluate.main(argv)
    out_text = capsys.readouterr().out
    assert f"reusing 1 finished seed(s) from {partial}" in out_text and "seed 0 done" not in out_text
    assert out.read_bytes() == before
    assert json.loads(partial.read_text())["seeds_done"] == 2
    assert f"this run's result (2 seed(s)) is in {partial}; {out} kept as it was (2 seed(s), other settings)" in out_text

    # one seed more than --out holds: resumes from the partial file, replaces --out and says so
    argv3 = ["--seeds", "3", *argv[2:]]
    evaluate.main(argv3)
    out_text = capsys.readouterr().out
    assert f"reusing 2 finished seed(s) from {partial}" in out_text
    assert "so --out is replaced when its seed 2 is done" in out_text
    assert f"{out} held 2 seed(s) of other settings; deleted and replaced by this run's result (3 seed(s)), as the " \
           "note at the start said" in out_text
    d = json.loads(out.read_text())
    assert d["seeds_done"] == 3 and d["settings"]["episodes"] == 2 and not partial.exists()
    assert sorted({r["seed"] for r in d["runs"]}) == [0, 1, 2]


def test_a_run_of_other_settings_and_as_many_seeds_does_not_replace_out(tmp_path, capsys):
    """fresh36 F11: N=3 with two senders, then N=4 with one sender and the same seed count into the same --out."""
    out = tmp_path / "r2.json"
    evaluate.main(["--seeds", "1", "--num-envs", "2", "--episodes", "1", "--senders", "none,broadcast", "--out", str(out)])
    before = out.read_bytes()
    capsys.readouterr()
    evaluate.main(["--seeds", "1", "--num-envs", "2", "--episodes", "1", "--senders", "broadcast", "--num-agents", "4",
                   "--out", str(out)])
    text = capsys.readouterr().out
    assert out.read_bytes() == before  # the N=3 table is still there
    (partial,) = tmp_path.glob("r2.partial-*.json")
    d = json.loads(partial.read_text())
    assert d["settings"]["num_agents"] == 4 and d["seeds_done"] == 1
    assert f"note: {out} holds a result of 1 seed(s) with other settings (differs in: channels, num_agents, senders)" in text
    assert text.count(str(partial)) == 2  # the note and the end: no line in between repeating the note
    assert f"this run's result (1 seed(s)) is in {partial}; {out} kept as it was (1 seed(s), other settings)" in text


def test_a_rerun_with_more_seeds_computes_only_the_missing_ones(tmp_path, monkeypatch, capsys):
    out, fresh = tmp_path / "e.json", tmp_path / "fresh.json"
    evaluate.main(["--seeds", "1", *FAST, "--out", str(out)])
    capsys.readouterr()
    stop = _Stop(at=0)  # counts only
    monkeypatch.setattr(evaluate, "run", stop)
    evaluate.main(["--seeds", "2", *FAST, "--out", str(out)])
    assert stop.calls == PER_SEED  # seed 1 only
    assert "reusing 1 finished seed(s)" in capsys.readouterr().out
    evaluate.main(["--seeds", "2", *FAST, "--out", str(fresh)])
    a, b = json.loads(out.read_text()), json.loads(fresh.read_text())
    assert a["summary"] == b["summary"] and a["runs"] == b["runs"]  # reuse gives what a fresh run gives
    # fewer seeds than the file holds: the table of the seeds asked for, and the file kept
    before = out.read_bytes()
    evaluate.main(["--seeds", "1", *FAST, "--out", str(out)])
    assert f"{out} kept: it holds 2 finished seeds with these settings, more than the 1 asked for" in \
        capsys.readouterr().out
    assert out.read_bytes() == before


def test_seeds_of_other_code_are_not_reused(tmp_path, monkeypatch, capsys):
    """A changed sender (or channel, scenario, ...) gives other results: the file's seeds are not reused then."""
    out = tmp_path / "e.json"
    evaluate.main(["--seeds", "1", *FAST, "--out", str(out)])
    assert json.loads(out.read_text())["settings"]["code"] == evaluate.code_fingerprint()
    old = out.read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(evaluate, "code_fingerprint", lambda: "0123456789abcdef")  # as after an edit of the code
    stop = _Stop(at=0)  # counts only
    monkeypatch.setattr(evaluate, "run", stop)
    evaluate.main(["--seeds", "1", *FAST, "--out", str(out)])
    assert stop.calls == PER_SEED and "reusing" not in capsys.readouterr().out
    # other code is other settings: as many seeds go beside --out, which keeps its result (fresh36 F11)
    assert out.read_bytes() == old
    (partial,) = tmp_path.glob("e.partial-*.json")
    assert json.loads(partial.read_text())["settings"]["code"] == "0123456789abcdef"
    evaluate.main(["--seeds", "2", *FAST, "--out", str(out)])  # more seeds: the new code's result replaces it
    assert json.loads(out.read_text())["settings"]["code"] == "0123456789abcdef" and not partial.exists()


@pytest.mark.parametrize("argv, message", [
    (["--senders", "ddacom,ddacom"], "error: key '--senders': sender 'ddacom' given twice; give each sender once"),
    (["--senders", "ddacom, none,ddacom "], "error: key '--senders': sender 'ddacom' given twice"),
    (["--senders", "ddacom", "--sender-param", "ddacom.margin=0.5", "--sender-param", "ddacom.margin=0.7"],
     "error: key '--sender-param': ddacom.margin given twice (0.5 and 0.7); give each sender param once"),
])
def test_duplicates_are_refused_in_one_line(argv, message, tmp_path, capsys):
    out = tmp_path / "e.json"
    with pytest.raises(SystemExit) as ei:
        run_script(evaluate.main, [*argv, "--seeds", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and err.startswith(message) and len(err.splitlines()) == 1
    assert not out.exists()


def test_spaces_in_senders_are_stripped(tmp_path, capsys):
    out = tmp_path / "e.json"
    evaluate.main(["--seeds", "1", "--num-envs", "2", "--episodes", "1", "--senders", "broadcast, none",
                   "--out", str(out)])
    rows = json.loads(out.read_text())["summary"]["rows"]
    assert {"markov/broadcast", "markov/none"} <= set(rows)


def test_a_radius_that_hides_nothing_is_named_as_the_cause(tmp_path, capsys):
    assert evaluate.radius_sees_all(2.9) and evaluate.radius_sees_all(None) and not evaluate.radius_sees_all(2.8)
    evaluate.main(["--seeds", "1", *FAST, "--radius", "1e308", "--out", str(tmp_path / "e.json")])
    out = capsys.readouterr().out
    (warning,) = [ln for ln in out.splitlines() if ln.startswith("warning: ")]
    assert "the radius is the cause, not the size of the run: --radius 1e+308 is at least the arena's diagonal " \
           "(2.83 m)" in warning and "give a smaller --radius" in warning
    assert "give more envs or episodes" not in out and "--num-envs or --episodes" not in out
    # at the default radius the advice is still the size of the run
    evaluate.main(["--seeds", "1", *FAST, "--out", str(tmp_path / "d.json")])
    out = capsys.readouterr().out
    assert "--num-envs or --episodes" in out and "radius is the cause" not in out


@pytest.mark.parametrize("value", ["1", "65"])
def test_num_agents_below_and_above_the_range_get_the_same_message(value, capsys):
    """fresh36 F13: N=1 said 'an integer >= 2', N=65 'an integer in 2..64' (two checks in two places)."""
    with pytest.raises(SystemExit):
        evaluate.main(["--num-agents", value])
    assert f"argument --num-agents: invalid value '{value}': an integer in 2..64 is required" in capsys.readouterr().err


def test_help_says_a_result_of_other_settings_is_deleted_once_this_run_has_more_seeds(capsys):
    """fresh36b N4: the rule (the ns-3 experiment's) is kept and said where a user looks."""
    with pytest.raises(SystemExit):
        evaluate.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "is DELETED, replaced by this run's, once this run has finished more seeds than it holds" in text
    assert "give each setting its own --out to keep it" in text

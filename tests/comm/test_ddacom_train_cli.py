"""`python -m coopsim.agents.ddacom.train` reruns and CLI (fresh28 items 4, 5, 10, 11, 12, 16): a rerun into an
existing --out with other settings is refused before any training (also for a checkpoint-only run, which used to
crash in numpy); a rerun with fewer seeds or variants keeps the evals results.json holds; duplicate variants are
refused; the normalized return comes with the anchor-gap warning, or a line saying it needs both anchors; --help
names the module, the defaults and the variants; --radius is checked at parse time."""
import contextlib
import io
import json
import shutil
import subprocess
import sys

import pytest

from cli_helpers import run_main  # noqa: E402  (tests/ is on sys.path under pytest)
from coopsim.agents.ddacom import train
from coopsim.errors import run_script

TINY = ["--steps", "200", "--num-envs", "2", "--eval-envs", "2", "--eval-episodes", "1"]
ANCHORS = ["--variants", "no_comm,broadcast_ideal"]


def _main(argv):
    """The train script run in-process: (exit code, stdout, stderr)."""
    return run_main(train.main, argv)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A finished 2-seed run of the two anchor variants, and what it printed."""
    out = tmp_path_factory.mktemp("ddacom_train") / "base"
    code, stdout, err = _main(["--seeds", "2", *TINY, *ANCHORS, "--out", str(out)])
    assert code == 0, err
    return out, stdout


@pytest.fixture
def copy(base, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(base[0], out)
    return out


@pytest.mark.parametrize("change, said", [(["--radius", "2"], "--radius 0.5 (now 2.0)"),
                                          (["--num-envs", "4"], "--num-envs 2 (now 4)"),
                                          (["--policy-reads", "slots"], "--policy-reads attention (now slots)"),
                                          (["--steps", "100"], "--steps 200 (now 100, fewer"),
                                          (["--task", "speaker_listener"], "--task spread (now speaker_listener);")])
def test_other_settings_are_refused_before_any_training(copy, change, said, monkeypatch):
    before = (copy / "results.json").read_bytes()
    argv = ["--seeds", "1", *TINY, *ANCHORS, "--out", str(copy)]
    i = argv.index(change[0]) if change[0] in argv else None
    if i is not None:
        argv[i + 1] = change[1]
    else:
        argv[:0] = change
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("trained although the settings differ"))
    code, _, err = _main(argv)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {copy / 'no_comm' / 'seed-0'} (a finished run) was trained with {said}")
    assert "use another --out" in err
    assert (copy / "results.json").read_bytes() == before  # and no new provenance recorded


def test_a_checkpoint_only_run_with_other_num_envs_is_refused_not_a_traceback(tmp_path):
    out = tmp_path / "o"
    code, _, err = _main(["--seeds", "1", *TINY, "--variants", "raw_ddacom", "--out", str(out)])
    assert code == 0, err
    run = out / "raw_ddacom" / "seed-0"
    (run / "policy.pt").unlink()
    (run / "train_summary.json").unlink()  # as an interrupted run leaves it: checkpoint.pt only
    # (DDACOM's sender state has the checkpoint's env count: resuming it with 4 envs was a numpy broadcast error)
    code, _, err = _main(["--seeds", "1", "--steps", "400", "--num-envs", "4", *TINY[4:], "--variants", "raw_ddacom",
                          "--out", str(out)])
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {run} (the checkpoint of an unfinished run) was trained with --num-envs 2 (now 4)")
    assert "use another --out" in err


def test_a_larger_steps_continues_training(copy):
    code, out, err = _main(["--seeds", "1", "--steps", "300", *TINY[2:], "--variants", "no_comm", "--out", str(copy)])
    assert code == 0, err
    summary = json.loads((copy / "no_comm" / "seed-0" / "train_summary.json").read_text())
    assert summary["env_steps"] == 300 and summary["resumed"] is True
    assert json.loads((copy / "no_comm" / "seed-0" / train.SETTINGS_NAME).read_text())["steps"] == 300
    assert "not kept, the evals of no_comm (made with --steps 200 (now 300)); broadcast_ideal (made with" in out


def test_fewer_seeds_keep_the_evals_of_results_json(copy, base):
    old = json.loads((copy / "results.json").read_text())
    code, _, err = _main(["--seeds", "1", *TINY, *ANCHORS, "--out", str(copy)])
    assert code == 0, err
    new = json.loads((copy / "results.json").read_text())
    assert new["evals"] == old["evals"] and new["seeds_done"] == 2  # seed 1 kept; seed 0 evaluated the same again
    assert new["summary"]["seeds"] == [0, 1] and new["summary"] == old["summary"]


def test_a_subset_of_variants_keeps_the_anchors_and_the_summary(copy):
    old = json.loads((copy / "results.json").read_text())
    code, out, err = _main(["--seeds", "1", *TINY, "--variants", "raw_ddacom", "--out", str(copy)])
    assert code == 0, err
    new = json.loads((copy / "results.json").read_text())
    for v in ("no_comm", "broadcast_ideal"):
        assert new["evals"][v] == old["evals"][v]
    assert set(new["evals"]["raw_ddacom"]) == {"0"} and "raw_ddacom" in new["summary"]["rows"]
    assert "keeping its evals of 4 run(s) of the same settings" in out


def test_without_the_anchors_it_says_a_normalized_return_needs_both(tmp_path):
    code, out, err = _main(["--seeds", "1", *TINY, "--variants", "no_comm", "--out", str(tmp_path / "o")])
    assert code == 0, err
    assert "{}" not in out.splitlines()
    assert "no normalized return: it needs both anchor variants, no_comm (R_no_comm) and broadcast_ideal " \
           "(R_broadcast_ideal); broadcast_ideal not in --variants" in out
    assert '"return"' in out  # the evals that ran


def test_the_normalized_return_comes_with_the_anchor_warning(base, tmp_path):
    out = base[1]
    (warning,) = [ln for ln in out.splitlines() if ln.startswith("warning: ")]
    assert warning.startswith("warning: the normalized_return above is not meaningful at this size: the anchor gap "
                              "R_broadcast_ideal - R_no_comm = ")
    assert "over 2 seeds" in warning and "give more --seeds" in warning
    check = json.loads((base[0] / "results.json").read_text())["summary"]["anchor_check"]
    assert check["meaningful"] is False and check["over"] == "seeds"
    # one seed: no CI over seeds, always the warning; a gap well above 3 half-widths: none
    ev = {"no_comm": {0: {"return": -10.0}}, "broadcast_ideal": {0: {"return": -5.0}}}
    assert train.summarize(ev)["anchor_check"]["meaningful"] is False
    ev = {"no_comm": {s: {"return": -10.0} for s in range(3)},
          "broadcast_ideal": {s: {"return": -5.0 + 0.1 * s} for s in range(3)}}
    assert train.summarize(ev)["anchor_check"]["meaningful"] is True


def test_duplicate_variants_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:
        train.main(["--variants", "no_comm, no_comm", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and "argument --variants: variant 'no_comm' given twice; give each variant once" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["-1", "0", "nan", "abc"])
def test_bad_radius_is_caught_at_parse_time(value, capsys):
    with pytest.raises(SystemExit) as ei:
        train.main(["--radius", value])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and f"argument --radius: invalid value '{value}': a number > 0 is required" in err
    assert "obs_radius_m" not in err


def test_help_names_the_module_defaults_and_variants():
    r = subprocess.run([sys.executable, "-m", "coopsim.agents.ddacom.train", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m coopsim.agents.ddacom.train ")
    text = " ".join(r.stdout.split())
    for opt, default in [("--seeds", "5"), ("--steps", "60000"), ("--num-envs", "16"), ("--radius", "0.5"),
                         ("--eval-envs", "32"), ("--eval-episodes", "10"),
                         ("--variants", "no_comm,broadcast_ideal,learned_ddacom,raw_ddacom"), ("--out", "runs/ddacom_gen")]:
        entry = text.split(f" {opt} {opt.lstrip('-').replace('-', '_').upper()} ", 1)[1].split(" --", 1)[0]
        assert f"(default {default}" in entry, (opt, entry)
    assert "rounded up to whole rollouts of num_envs x 25 steps" in text
    assert "of no_comm, broadcast_ideal, learned_ddacom, raw_ddacom" in text


def test_an_interrupt_names_the_run_its_checkpoint_and_the_evals_kept(copy, monkeypatch):
    """Ctrl-C in the third seed's first run (seeds 0-1 are done): the run being trained (no checkpoint yet: it starts
    over), the evals results.json holds, and that the same command resumes."""
    real = train.train_one

    def stop_at_seed_2(variant, seed, *args, **kw):
        if seed == 2:
            raise KeyboardInterrupt
        return real(variant, seed, *args, **kw)

    monkeypatch.setattr(train, "train_one", stop_at_seed_2)
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e), pytest.raises(SystemExit) as info:
        run_script(train.main, ["--seeds", "3", *TINY, *ANCHORS, "--out", str(copy)], kept=train.kept_on_interrupt)
    assert info.value.code == 130
    evals = sum(len(per) for per in json.loads((copy / "results.json").read_text())["evals"].values())
    assert evals == 4  # seeds 0-1 of both anchors, kept
    assert e.getvalue().strip().splitlines()[-1] == (
        f"interrupted; kept: {copy / 'no_comm' / 'seed-2'} without a checkpoint yet (it starts over); "
        f"{copy / 'results.json'} with {evals} eval(s); the same command resumes (finished runs are reused)")


def test_speaker_listener_radius_is_refused_at_parse_time(tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:
        train.main(["--task", "speaker_listener", "--radius", "0.5", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and "argument --radius: the speaker_listener task has no observation radius" in err
    assert not (tmp_path / "o").exists()


def test_speaker_listener_goal_reaches_the_listener_only_through_messages():
    """The mute speaker-listener of --task speaker_listener: without messages the listener's observation holds no
    goal colour (its word slots read 0); with the raw broadcast the speaker's message to it is the goal colour."""
    import numpy as np

    from coopsim.scenarios.mpe.tasks import LANDMARK_COLORS_SL

    quiet = train.make_agent("no_comm", 4, None, task="speaker_listener")
    obs = quiet.scenario.reset(seed=5)
    goal = quiet.scenario.goal.copy()
    assert quiet.comm is None and (obs[:, 1, 8:] == 0).all()
    res = quiet.scenario.step(np.zeros((4, 2), np.int64))  # the speaker says word 0: nobody hears it
    assert (res.obs[:, 1, 8:] == 0).all()
    raw = train.make_agent("broadcast_ideal", 4, None, task="speaker_listener")
    obs = raw.scenario.reset(seed=5)
    np.testing.assert_array_equal(raw.scenario.goal, goal)
    _, out = raw.act(obs, None)
    to_listener = (out.src == 0) & (out.dst == 1)
    assert to_listener.sum() == 4  # one copy per env, speaker -> listener
    np.testing.assert_allclose(out.payload[to_listener][:, :3], LANDMARK_COLORS_SL[goal[out.env[to_listener]]])
    ch = train.make_channel("learned_ddacom", raw)  # the spread experiment's network: 3840-12800 bit/s per sender
    assert ch is not None


def test_speaker_listener_run_records_its_task(tmp_path):
    out = tmp_path / "sl"
    code, stdout, err = _main(["--task", "speaker_listener", "--seeds", "1", *TINY, *ANCHORS, "--out", str(out)])
    assert code == 0, err
    settings = json.loads((out / "no_comm" / "seed-0" / train.SETTINGS_NAME).read_text())
    assert settings["task"] == "speaker_listener" and settings["radius"] is None and settings["num_agents"] == 2
    res = json.loads((out / "results.json").read_text())
    assert res["args"]["task"] == "speaker_listener" and set(res["evals"]) == {"no_comm", "broadcast_ideal"}
    assert "radius" not in stdout.split("warning:", 1)[-1]  # no radius to blame for a small anchor gap
    code, _, err = _main(["--seeds", "1", *TINY, *ANCHORS, "--out", str(out)])  # spread into the same --out
    assert code == 2 and "--task speaker_listener (now spread)" in err


def test_encoder_params_are_recorded_for_learned_runs_only(tmp_path):
    """--cf-objective / --cf-coef shape only the encoder: a learned run records them and a rerun with others is
    refused; the anchors (no encoder) are reused whatever they are."""
    out = tmp_path / "enc"
    argv = ["--task", "speaker_listener", "--seeds", "1", *TINY, "--out", str(out)]
    code, _, err = _main([*argv, "--variants", "no_comm,learned_ddacom", "--cf-objective", "error", "--cf-coef", "0.5"])
    assert code == 0, err
    rec = json.loads((out / "learned_ddacom" / "seed-0" / train.SETTINGS_NAME).read_text())
    assert rec["cf_objective"] == "error" and rec["cf_coef"] == 0.5
    assert "cf_objective" not in json.loads((out / "no_comm" / "seed-0" / train.SETTINGS_NAME).read_text())
    code, _, err = _main([*argv, "--variants", "no_comm", "--cf-coef", "0"])  # anchors: reused
    assert code == 0, err
    code, _, err = _main([*argv, "--variants", "learned_ddacom"])
    assert code == 2 and "--cf-coef 0.5 (now 0.1), --cf-objective error (now value)" in err


def test_inbox_hold_is_recorded_for_ddacom_sent_runs_only(tmp_path):
    out = tmp_path / "hold"
    argv = ["--task", "speaker_listener", "--seeds", "1", *TINY, "--policy-reads", "slots", "--out", str(out)]
    code, stdout, err = _main([*argv, "--variants", "no_comm,broadcast_ideal,raw_ddacom", "--inbox", "hold"])
    assert code == 0, err
    rec = lambda v: json.loads((out / v / "seed-0" / train.SETTINGS_NAME).read_text())  # noqa: E731
    assert rec("raw_ddacom")["inbox"] == "hold" and "inbox" not in rec("broadcast_ideal")
    agent = train.make_agent("raw_ddacom", 2, None, policy_reads="slots", task="speaker_listener",
                             encoder={"inbox": "hold"})
    assert agent.comm.p.inbox == "hold" and agent.comm.p.sender_params == train.HOLD_SENDER
    ev = json.loads((out / "results.json").read_text())["evals"]["raw_ddacom"]["0"]
    assert ev["messages_vs_broadcast"] < 0.5  # the speaker's unchanged goal colour goes once per episode
    code, _, err = _main([*argv, "--variants", "raw_ddacom"])
    assert code == 2 and "--inbox hold (now step)" in err


def test_an_anchor_rerun_with_other_encoder_or_inbox_flags_keeps_the_learned_evals(tmp_path):
    """Rerunning only the anchors with other --cf-* / --inbox flags (which change nothing for them) keeps the evals of
    the learned run in results.json with the settings it was evaluated with (fresh29b #2: they were dropped)."""
    out = tmp_path / "keep"
    argv = ["--task", "speaker_listener", "--seeds", "1", *TINY, "--out", str(out)]
    code, _, err = _main([*argv, "--variants", "no_comm,broadcast_ideal,learned_ddacom", "--inbox", "hold",
                          "--cf-objective", "error"])
    assert code == 0, err
    before = json.loads((out / "results.json").read_text())
    code, stdout, err = _main([*argv, "--variants", "no_comm", "--cf-coef", "3"])
    assert code == 0, err
    after = json.loads((out / "results.json").read_text())
    assert after["evals"] == before["evals"] and "not kept" not in stdout
    assert after["eval_settings"]["learned_ddacom"]["cf_objective"] == "error"
    assert after["eval_settings"]["learned_ddacom"]["inbox"] == "hold" and after["args"]["cf_coef"] == 3
    assert "learned_ddacom" in after["summary"]["rows"]
    code, stdout, err = _main([*argv, "--variants", "learned_ddacom"])  # now the learned run itself: refused
    assert code == 2 and "--cf-objective error (now value)" in err


def test_a_rerun_says_which_runs_it_reuses_and_which_it_resumes(copy):
    code, out, err = _main(["--seeds", "1", "--steps", "300", *TINY[2:], *ANCHORS, "--out", str(copy)])
    assert code == 0, err
    assert f"no_comm seed 0: resuming {copy / 'no_comm' / 'seed-0'} from 200 of 300 env steps" in out
    code, out, err = _main(["--seeds", "1", "--steps", "300", *TINY[2:], *ANCHORS, "--out", str(copy)])
    assert code == 0, err
    assert f"no_comm seed 0: reusing the finished run {copy / 'no_comm' / 'seed-0'} (300 env steps)" in out


def test_payload_dim_is_recorded_for_learned_runs_and_sets_the_copy_size(tmp_path):
    """--payload-dim P: learned copies of 28 + 4 P bytes; recorded for the learned run only, another P is refused."""
    out = tmp_path / "pdim"
    argv = ["--task", "speaker_listener", "--seeds", "1", *TINY, "--out", str(out)]
    code, _, err = _main([*argv, "--variants", "no_comm,learned_ddacom", "--payload-dim", "4"])
    assert code == 0, err
    rec = lambda v: json.loads((out / v / "seed-0" / train.SETTINGS_NAME).read_text())  # noqa: E731
    assert rec("learned_ddacom")["payload_dim"] == 4 and "payload_dim" not in rec("no_comm")
    agent = train.make_agent("learned_ddacom", 2, None, task="speaker_listener", encoder={"payload_dim": 4})
    assert agent.comm.p.payload_dim == 4 and agent.comm.copy_bytes == 28 + 4 * 4
    assert train.make_agent("raw_ddacom", 2, None, task="speaker_listener",
                            encoder={"payload_dim": 4}).comm.copy_bytes == 28 + 4 * 11  # raw: the observation
    code, _, err = _main([*argv, "--variants", "learned_ddacom"])
    assert code == 2 and "--payload-dim 4 (now 8)" in err


@pytest.mark.parametrize("floats, delivered", [(4, True), (5, True), (6, False), (8, False)])
def test_the_markov_channels_lowest_level_carries_a_copy_of_at_most_5_floats(floats, delivered):
    """Why --payload-dim matters on the speaker-listener task: the Markov channel's lowest level is 0.15 x 25600 =
    3840 bit/s, 48 B per 0.1 s step, and the latency bound is one step, so a lone copy of 28 + 4 P bytes arrives only
    if 28 + 4 P <= 48 (P <= 5); the default 8-float copy (60 B, 0.125 s on the link) is always lost there."""
    import numpy as np

    from coopsim.platform.comm import MessageBatch
    from coopsim.platform.registry import make_component

    cid, params = train.load_channels(train.NETWORK_AGENTS)["markov"]
    params = {**params, "trace": {"kind": "constant", "rate": 0.15, "scale_bps": params["trace"]["scale_bps"]}}
    ch = make_component("channel", cid, **params)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    one = lambda t: MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.ones(1, np.int32),  # noqa: E731
                                 np.zeros((1, floats), np.float32), np.full(1, t * 0.1))
    got = 0
    for t in range(0, 20, 2):  # a lone copy every other step: the queue is empty when each one comes
        ch.send(t, one(t))
        got += len(ch.deliver(t + 1)) + len(ch.deliver(t + 2))
    assert got == (10 if delivered else 0)
    assert ch.stats()["comm/lost_copies"] == (0 if delivered else 10)


def test_hold_threshold_is_the_senders_min_deviation_and_needs_inbox_hold(tmp_path, capsys):
    agent = train.make_agent("learned_ddacom", 2, None, task="speaker_listener",
                             encoder={"inbox": "hold", "hold_threshold": 0.05})
    assert agent.comm.p.sender_params == {**train.HOLD_SENDER, "min_deviation_m": 0.05}
    out = tmp_path / "thr"
    argv = ["--task", "speaker_listener", "--seeds", "1", *TINY, "--out", str(out), "--variants", "learned_ddacom"]
    code, _, err = _main([*argv, "--hold-threshold", "0.05"])
    assert code == 2 and "--hold-threshold: 0.05 is read only with --inbox hold" in err
    code, _, err = _main([*argv, "--inbox", "hold", "--hold-threshold", "0.05"])
    assert code == 0, err
    assert json.loads((out / "learned_ddacom" / "seed-0" / train.SETTINGS_NAME).read_text())["hold_threshold"] == 0.05
    code, _, err = _main([*argv, "--inbox", "hold"])
    assert code == 2 and "--hold-threshold 0.05 (now 1e-06)" in err


def test_encoder_lr_sets_the_encoders_optimizer_only_and_is_recorded_for_learned_runs(tmp_path):
    agent = train.make_agent("learned_ddacom", 2, None, task="speaker_listener", encoder={"encoder_lr": 1e-3})
    assert agent.comm.opt_enc.param_groups[0]["lr"] == 1e-3 and agent.comm.opt_recv.param_groups[0]["lr"] == 1e-4
    default = train.make_agent("learned_ddacom", 2, None, task="speaker_listener")
    assert default.comm.opt_enc.param_groups[0]["lr"] == 1e-4  # None: the generator's lr
    out = tmp_path / "elr"
    argv = ["--task", "speaker_listener", "--seeds", "1", *TINY, "--out", str(out)]
    code, _, err = _main([*argv, "--variants", "no_comm,learned_ddacom", "--encoder-lr", "1e-3"])
    assert code == 0, err
    assert json.loads((out / "learned_ddacom" / "seed-0" / train.SETTINGS_NAME).read_text())["encoder_lr"] == 1e-3
    code, _, err = _main([*argv, "--variants", "learned_ddacom"])
    assert code == 2 and "--encoder-lr 0.001 (now None)" in err
    code, _, err = _main([*argv, "--variants", "learned_ddacom", "--encoder-lr", "2"])
    assert code == 2 and "--encoder-lr: invalid value 2: a learning rate in (0, 1] is required" in err


def test_a_policy_file_from_before_a_generator_param_existed_still_loads(tmp_path):
    """A policy written before ``encoder_lr`` / ``payload_dim`` were passed (its comm spec lacks them) loads into an
    agent that passes their defaults; a spec that differs in a param it holds is still refused."""
    import torch

    from coopsim.errors import ConfigError

    agent = train.make_agent("learned_ddacom", 2, None, task="speaker_listener", encoder={"inbox": "hold"})
    path = tmp_path / "policy.pt"
    agent.save(path)
    ck = torch.load(path, weights_only=False)
    params = ck["params"]["comm"]["params"]
    assert params["encoder_lr"] is None and params["payload_dim"] == 8
    del params["encoder_lr"], params["payload_dim"]  # as written before this session
    torch.save(ck, path)
    fresh = train.make_agent("learned_ddacom", 2, None, task="speaker_listener", encoder={"inbox": "hold"})
    fresh.load(path)
    assert all(torch.equal(a, b) for a, b in zip(fresh.net.state_dict().values(), agent.net.state_dict().values()))
    other = train.make_agent("learned_ddacom", 2, None, task="speaker_listener", encoder={"inbox": "hold",
                                                                                         "payload_dim": 4})
    with pytest.raises(ConfigError, match="checkpoint was trained with comm="):
        other.load(path)


def test_evals_of_a_results_json_from_before_a_setting_existed_are_kept(tmp_path):
    """results.json's per-variant eval_settings written before a setting existed (--payload-dim, --encoder-lr,
    --hold-threshold) count as that setting's default: a rerun with fewer seeds keeps the other seeds' evals instead
    of dropping them."""
    out = tmp_path / "old"
    argv = ["--task", "speaker_listener", *TINY, "--variants", "learned_ddacom", "--inbox", "hold", "--out", str(out)]
    code, _, err = _main(["--seeds", "2", *argv])
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    for k in ("payload_dim", "encoder_lr", "hold_threshold"):
        del res["eval_settings"]["learned_ddacom"][k]
    (out / "results.json").write_text(json.dumps(res))
    code, stdout, err = _main(["--seeds", "1", *argv])
    assert code == 0, err
    assert "not kept" not in stdout
    assert set(json.loads((out / "results.json").read_text())["evals"]["learned_ddacom"]) == {"0", "1"}


def test_a_second_process_on_the_same_out_is_refused_while_the_first_runs(tmp_path):
    """fresh30 F13: two ddacom.train processes on one --out both trained the same run (duplicated metrics rows): the
    --out folder is locked for the whole invocation (released however the process ends)."""
    from coopsim.platform.training import run_dir_lock

    out = tmp_path / "busy"
    out.mkdir()
    with run_dir_lock(out, who="a test"):  # as a first process holds it
        r = subprocess.run([sys.executable, "-m", "coopsim.agents.ddacom.train", "--seeds", "1", *TINY, *ANCHORS,
                            "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (f"{out} is being trained by another python -m coopsim.agents.ddacom.train process right now; wait for it "
            "to finish, or stop it (Ctrl-C keeps its checkpoint) and then resume") in r.stderr
    assert list(out.iterdir()) == []  # nothing trained or written
    code, _, err = _main(["--seeds", "1", *TINY, *ANCHORS, "--out", str(out)])  # the lock is free again
    assert code == 0, err


def test_first_seed_trains_the_same_runs_and_a_merged_folder_reuses_them(base, tmp_path):
    """Seeds 0-1 split over two folders (--first-seed 1 trains seed 1 alone) give the runs of one invocation: the
    seed-1 evals are equal, and a folder holding seed 0 from one and seed 1 from the other reuses both (nothing
    trained again) and gives the single invocation's summary."""
    part = tmp_path / "part"
    code, out, err = _main(["--seeds", "1", "--first-seed", "1", *TINY, *ANCHORS, "--out", str(part)])
    assert code == 0, err
    old = json.loads((base[0] / "results.json").read_text())
    new = json.loads((part / "results.json").read_text())
    assert set(new["evals"]["no_comm"]) == {"1"} and not (part / "no_comm" / "seed-0").exists()
    for v in ("no_comm", "broadcast_ideal"):
        assert new["evals"][v]["1"] == old["evals"][v]["1"]
    merged = tmp_path / "merged"
    for v in ("no_comm", "broadcast_ideal"):
        shutil.copytree(base[0] / v / "seed-0", merged / v / "seed-0")
        shutil.copytree(part / v / "seed-1", merged / v / "seed-1")
    code, out, err = _main(["--seeds", "2", *TINY, *ANCHORS, "--out", str(merged)])
    assert code == 0, err
    assert out.count("reusing the finished run") == 4 and "resuming" not in out
    assert json.loads((merged / "results.json").read_text())["summary"] == old["summary"]


def test_first_seed_is_bounded_at_parse_time(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train.main(["--first-seed", "-1", "--out", str(tmp_path / "o")])
    assert "--first-seed" in capsys.readouterr().err


@pytest.mark.parametrize("name, kind", [(None, "markov"), ("markov", "markov"), ("step", "step"),
                                        ("sinusoid", "sinusoid")])
def test_eval_channels_are_the_mpe_channels_scaled_to_the_spread_network(name, kind):
    ch = train.make_channel("learned_ddacom", None, name)
    assert ch.params.trace.kind == kind and ch.params.trace.scale_bps == 25600.0  # (1 + 3)(3 - 1) x 40 B / 0.1 s
    assert ch.params.latency_bound_s == 0.1 and ch.params.queue_packets == 16


def test_eval_channels_evaluate_ddacom_sent_variants_under_each_and_a_rerun_keeps_them(tmp_path):
    """--eval-channels markov,step: a DDACOM-sent variant gets an eval on each (results' variant raw_ddacom/step), the
    anchors one; the step eval is the policy's on the step channel (offered copies counted there); a rerun that asks
    for the training channel only keeps the step evals."""
    out = tmp_path / "ch"
    code, stdout, err = _main(["--seeds", "1", *TINY, "--variants", "no_comm,broadcast_ideal,raw_ddacom",
                               "--eval-channels", "markov,step", "--out", str(out)])
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    assert list(res["evals"]) == ["no_comm", "broadcast_ideal", "raw_ddacom", "raw_ddacom/step"]
    assert set(res["summary"]["rows"]) == set(res["evals"]) and "raw_ddacom/step" in res["eval_settings"]
    step = res["evals"]["raw_ddacom/step"]["0"]
    again = train.evaluate_policy("raw_ddacom", out / "raw_ddacom" / "seed-0" / train.POLICY_NAME, 10_000, 0.5, 2, 1,
                                  channel="step")
    assert step == again and step["copies_offered"] > 0
    code, stdout, err = _main(["--seeds", "1", *TINY, "--variants", "raw_ddacom", "--out", str(out)])
    assert code == 0, err
    assert json.loads((out / "results.json").read_text())["evals"]["raw_ddacom/step"]["0"] == step


@pytest.mark.parametrize("value", ["foo", "markov,markov", "", "markov,ideal"])
def test_bad_eval_channels_are_refused_at_parse_time(value, tmp_path, capsys):
    with pytest.raises(SystemExit):
        train.main(["--eval-channels", value, "--out", str(tmp_path / "o")])
    assert "--eval-channels" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_results_json_records_every_invocation_not_only_the_last(copy, base):
    """Session 32's low: results.json's top-level args were the last invocation's although its evals pool several
    (here the anchors of a 2-seed run and raw_ddacom of a 1-seed one). The file now says so and lists each."""
    old = json.loads((base[0] / "results.json").read_text())
    assert [i["args"]["variants"] for i in old["invocations"]] == ["no_comm,broadcast_ideal"]
    code, _, err = _main(["--seeds", "1", *TINY, "--variants", "raw_ddacom", "--out", str(copy)])
    assert code == 0, err
    new = json.loads((copy / "results.json").read_text())
    assert [(i["args"]["variants"], i["args"]["seeds"]) for i in new["invocations"]] == \
        [("no_comm,broadcast_ideal", 2), ("raw_ddacom", 1)]
    assert new["args"] == new["invocations"][-1]["args"] and "latest invocation" in new["args_note"]
    # a file written before the list existed: its one args becomes the first entry
    del new["invocations"]
    (copy / "results.json").write_text(json.dumps(new))
    assert train.past_invocations(copy) == [{"args": new["args"]}]

"""Fixes from the fifteenth new-user pass: flipped bytes in a policy file, torch's advice paragraph in the
damaged-file message."""
import zipfile

import pytest
import torch

from coopsim.errors import ConfigError
from coopsim.platform.trainer import atomic_save, load_checkpoint


def _tensor_entry(path) -> tuple[int, int]:
    """(offset, size) of the largest stored entry's data (a tensor's bytes) inside the zip file."""
    with zipfile.ZipFile(path) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
        assert info.compress_type == zipfile.ZIP_STORED
        with open(path, "rb") as f:
            f.seek(info.header_offset + 26)
            n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
        return info.header_offset + 30 + n + m, info.file_size


def test_flipped_bytes_inside_a_tensor_are_refused_not_loaded(tmp_path):
    w = torch.arange(4096, dtype=torch.float32)
    f = tmp_path / "policy.pt"
    atomic_save({"net": {"w": w}}, f)
    assert torch.equal(load_checkpoint(f)["net"]["w"], w)
    off, size = _tensor_entry(f)
    data = bytearray(f.read_bytes())
    data[off + size // 2] ^= 0x01  # one bit of one float: still a finite number, torch alone would load it
    f.write_bytes(bytes(data))
    assert torch.isfinite(torch.load(f, weights_only=False)["net"]["w"]).all()  # what torch alone does
    with pytest.raises(ConfigError, match=r"damaged checkpoint: its entry '.*' fails its CRC-32 check") as info:
        load_checkpoint(f)
    assert str(f) in str(info.value)


def test_a_truncated_file_gives_torchs_first_sentence_only(tmp_path):
    f = tmp_path / "checkpoint.pt"
    atomic_save({"net": {"w": torch.zeros(100000)}}, f)
    f.write_bytes(f.read_bytes()[:200000])
    with pytest.raises(ConfigError, match="not a readable checkpoint") as info:
        load_checkpoint(f)
    msg = str(info.value)
    assert "failed finding central directory" in msg and "high likelihood" not in msg


def test_a_last_line_that_is_not_a_cut_off_row_is_named_as_damaged(tmp_path):
    from coopsim.platform.report import read_metrics

    f = tmp_path / "metrics.jsonl"
    f.write_text("not json\n")
    assert read_metrics(f) == ([], [(1, "not valid JSON")])
    f.write_text('{"seed": 0, "episode": 0, "return": 1.0}\n{"seed": 0, "epis')  # killed mid-write: left out quietly
    rows, bad = read_metrics(f)
    assert [r["return"] for r in rows] == [1.0] and bad == []


def test_run_names_its_directory_at_the_start_in_a_log(tmp_path):
    """Piped output (a log file): the run directory is printed before the first episode, so a run killed early can
    be matched to its directory; the end repeats it with the summary table."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "run", str(root / "configs/smac/3m-focus-fire.yaml"),
                        "episodes=1", "seeds=[0]", f"out_dir={tmp_path}", "--no-progress"],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    (run,) = tmp_path.iterdir()
    lines = r.stdout.splitlines()
    assert lines[0] == f"run directory: {run}" and lines.count(f"run directory: {run}") == 2


def test_a_resume_whose_metrics_log_lost_rows_warns_and_keeps_the_good_ones(tmp_path, capsys):
    from coopsim.platform.trainer import MetricsLogger, read_metrics

    csv = tmp_path / "metrics.csv"
    csv.write_text("iteration,env_steps,loss\n1,10,0.5\n2,20,0.4\nx,30,0.3\n4,40,0.2\n5,50,0.1\n")
    MetricsLogger(tmp_path, tensorboard=False, resume_iteration=4)
    assert [r["iteration"] for r in read_metrics(tmp_path)] == ["1", "2", "4"]  # damaged row 3 dropped, 5 > 4 cut
    assert "holds 3 of the 4 iterations the checkpoint has trained (1 rows missing or damaged)" in capsys.readouterr().err
    csv.unlink()
    MetricsLogger(tmp_path, tensorboard=False, resume_iteration=4)
    assert "is missing: the 4 iterations the checkpoint has trained have no rows" in capsys.readouterr().err
    (tmp_path / "fresh").mkdir()
    MetricsLogger(tmp_path / "fresh", tensorboard=False)
    assert capsys.readouterr().err == ""  # a new run says nothing


def test_a_core_naming_views_without_a_bind_is_refused_at_definition():
    from coopsim.platform.scenario import RebindsViews

    with pytest.raises(TypeError, match=r"Broken names views \('_v',\) but has no _bind\(\)"):
        type("Broken", (RebindsViews,), {"_VIEWS": ("_v",)})
    ok = type("Fine", (RebindsViews,), {"_VIEWS": ("_v",), "_bind": lambda self: None})
    assert ok._VIEWS == ("_v",)

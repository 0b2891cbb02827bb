"""MovingAI loaders: every shipped file, the octile optimal-length column, bad files, map lookup, generator."""
from __future__ import annotations

import math

import numpy as np
import pytest

from coopsim.errors import ConfigError, MapFormatError
from coopsim.scenarios.mapf.generator import random_bars_map, random_map
from coopsim.scenarios.mapf.grid import components
from coopsim.scenarios.mapf.loaders import (DATA_DIR, load_map, load_scen, octile_distances, octile_pair_distances,
                                            resolve_map, resolve_scen, shipped_maps, shipped_scens)

SHIPPED = ["empty-32-32", "maze-32-32-2", "random-32-32-10", "random-64-64-10", "room-32-32-4", "warehouse-10-20-10-2-1"]
# (height, width, obstacle cells) read off the files' headers and counted with `tr -cd '@T' | wc -c`
SIZES = {"empty-32-32": (32, 32, 0), "random-32-32-10": (32, 32, 102), "random-64-64-10": (64, 64, 409),
         "warehouse-10-20-10-2-1": (63, 161, 4444)}


def test_shipped_maps_and_scens_are_all_there():
    assert shipped_maps() == SHIPPED
    for m in SHIPPED:
        files = shipped_scens(m)
        assert [int(p.stem.rsplit("-", 1)[1]) for p in files] == list(range(1, 26))
    assert (DATA_DIR / "README.md").read_text().count("SOURCES.txt") >= 1


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_file_loads(name):
    md = load_map(resolve_map(name))
    assert md.name == name
    if name in SIZES:
        h, w, obst = SIZES[name]
        assert md.blocked.shape == (h, w) and int(md.blocked.sum()) == obst
    for path in shipped_scens(name):
        sc = load_scen(path, md)
        assert sc.map_name == name and (sc.height, sc.width) == md.blocked.shape
        assert len(sc) == len(sc.start_xy) == len(sc.goal_xy) >= 100
        assert not md.blocked[sc.start_xy[:, 1], sc.start_xy[:, 0]].any()
        assert not md.blocked[sc.goal_xy[:, 1], sc.goal_xy[:, 0]].any()


def test_first_rows_of_a_scen_file_exactly():
    sc = load_scen(DATA_DIR / "random-32-32-10-random-1.scen", "random-32-32-10")
    # version 1 / 3 random-32-32-10.map 32 32 11 6 7 18 13.65685425
    assert sc.bucket[:3].tolist() == [3, 7, 5]
    assert sc.start_xy[0].tolist() == [11, 6] and sc.goal_xy[0].tolist() == [7, 18]
    assert sc.optimal_length[0] == pytest.approx(13.65685425)


def test_octile_lengths_agree_with_every_shipped_scen_row():
    """The optimal-length column is the 8-connected octile distance without corner cutting (all 150 files)."""
    checked = 0
    for name in SHIPPED:
        md = load_map(resolve_map(name))
        scens = [load_scen(p, md) for p in shipped_scens(name)]
        s = np.concatenate([x.start_xy for x in scens])
        g = np.concatenate([x.goal_xy for x in scens])
        length = np.concatenate([x.optimal_length for x in scens])
        d = octile_pair_distances(md.blocked, s, g, max_length=length + 1e-3)  # beyond the bound: inf, a mismatch
        bad = np.flatnonzero(~(np.abs(d - length) <= 1e-4))
        assert bad.size == 0, f"{name}: row {bad[0]}: octile {d[bad[0]]} vs scen {length[bad[0]]}"
        checked += len(length)
    assert checked == 91175  # `cat *.scen | grep -v '^version' | grep -c .`


def test_octile_distances_hand_made():
    blocked = np.zeros((3, 3), bool)
    d = octile_distances(blocked, [[0, 0]])[0]
    assert d[2, 2] == pytest.approx(2 * math.sqrt(2)) and d[0, 2] == 2 and d[1, 2] == pytest.approx(1 + math.sqrt(2))
    blocked[0, 1] = True  # (x=1, y=0): the diagonal (0,0)->(1,1) would cut its corner
    d = octile_distances(blocked, [[0, 0], [1, 0]])
    assert d[0, 1, 1] == 2.0
    assert d[0, 0, 2] == 4.0                              # (0,1) (1,1) (2,1) (2,0): the diagonal (1,1)->(2,0) cuts (1,0)
    assert d[0, 2, 2] == pytest.approx(2 + math.sqrt(2))  # (0,1), then the diagonal (0,1)->(1,2) is allowed
    assert np.isinf(d[1]).all()                           # a blocked source reaches nothing


def _write(tmp_path, name, text, newline="\n"):
    p = tmp_path / name
    p.write_bytes(text.replace("\n", newline).encode())
    return p


MAP = "type octile\nheight 3\nwidth 4\nmap\n.@..\n..T.\nGS.W\n"


def test_map_symbols_and_crlf(tmp_path):
    a = load_map(_write(tmp_path, "a.map", MAP))
    b = load_map(_write(tmp_path, "b.map", MAP, "\r\n"))
    expect = [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert a.blocked.astype(int).tolist() == expect and b.blocked.astype(int).tolist() == expect
    assert a.name == "a" and (a.height, a.width) == (3, 4)
    sc = load_scen(_write(tmp_path, "a.scen", "version 1\n0\ta.map\t4\t3\t0\t0\t3\t1\t3.41421356\n", "\r\n"), a)
    assert sc.start_xy.tolist() == [[0, 0]] and sc.goal_xy.tolist() == [[3, 1]]


@pytest.mark.parametrize("text,line,words", [
    (MAP.replace("..T.", "..X."), 6, ["unknown map character 'X'", "x=2"]),
    (MAP.replace("GS.W", "GS."), 7, ["map row 2 has 3 characters", "width 4"]),
    (MAP.replace("type octile", "type hex"), 1, ["type octile"]),
    (MAP.replace("height 3\n", ""), 2, ["height"]),
    (MAP.replace("width 4", "width four"), 3, ["'width' must be a positive integer", "'four'"]),
    (MAP.replace("map\n", "grid\n"), 4, ["expected header line 'map'"]),
    (MAP.replace("GS.W\n", ""), 7, ["expected 3 map rows", "found 2"]),
    (MAP + "....\n", 8, ["expected 3 map rows", "extra row"]),
])
def test_bad_map_files_name_file_and_line(tmp_path, text, line, words):
    p = _write(tmp_path, "bad.map", text)
    with pytest.raises(MapFormatError) as ei:
        load_map(p)
    msg = str(ei.value)
    assert str(p) in msg and f"line {line}:" in msg, msg
    for w in words:
        assert w in msg, msg
    assert ei.value.line == line


ROW = "0\tsmall.map\t4\t3\t{sx}\t{sy}\t{gx}\t{gy}\t1\n"


@pytest.mark.parametrize("rows,line,words", [
    (ROW.format(sx=0, sy=0, gx=1, gy=0), 2, ["goal (1, 0) lies on an obstacle"]),
    (ROW.format(sx=0, sy=0, gx=0, gy=1) + ROW.format(sx=2, sy=1, gx=0, gy=0), 3, ["start (2, 1) lies on an obstacle"]),
    (ROW.format(sx=0, sy=0, gx=4, gy=0), 2, ["goal (4, 0) is out of bounds", "x in [0, 4)"]),
    (ROW.format(sx=0, sy=-1, gx=0, gy=0), 2, ["start (0, -1) is out of bounds"]),
    (ROW.format(sx=0, sy=0, gx=0, gy=1) + ROW.format(sx=0, sy=0, gx=0, gy=1).replace("small.map", "other.map"), 3,
     ["row names map 'other.map', expected 'small.map'"]),
    (ROW.format(sx=0, sy=0, gx=0, gy=1).replace("\t4\t3\t", "\t5\t3\t"), 2, ["width=5 height=3", "width=4 height=3"]),
    (ROW.format(sx=0, sy=0, gx=0, gy=1).replace("\t1\n", "\n"), 2, ["expected 9 tab-separated fields", "got 8"]),
    (ROW.format(sx=0, sy=0, gx=0, gy=1).replace("\t0\t0\t", "\tzero\t0\t", 1), 2, ["non-numeric field"]),
])
def test_bad_scen_files_name_file_and_line(tmp_path, rows, line, words):
    md = load_map(_write(tmp_path, "small.map", MAP))
    p = _write(tmp_path, "bad.scen", "version 1\n" + rows)
    with pytest.raises(MapFormatError) as ei:
        load_scen(p, md)
    msg = str(ei.value)
    assert str(p) in msg and f"line {line}:" in msg, msg
    for w in words:
        assert w in msg, msg


def test_scen_header_and_map_name_checks(tmp_path):
    p = _write(tmp_path, "v2.scen", "version 2\n" + ROW.format(sx=0, sy=0, gx=0, gy=1))
    with pytest.raises(MapFormatError, match=r"v2\.scen, line 1: unsupported scen version '2'"):
        load_scen(p)
    p = _write(tmp_path, "nov.scen", ROW.format(sx=0, sy=0, gx=0, gy=1))
    with pytest.raises(MapFormatError, match=r"nov\.scen, line 1: expected header 'version 1'"):
        load_scen(p)
    # a shipped scen file checked against the wrong map
    with pytest.raises(MapFormatError, match=r"random-32-32-10-random-1\.scen, line 2: row names map 'random-32-32-10.map', "
                                             r"expected 'empty-32-32.map'"):
        load_scen(DATA_DIR / "random-32-32-10-random-1.scen", "empty-32-32")


def test_resolve_map_by_name_path_and_unknown(tmp_path):
    assert resolve_map("random-32-32-10") == DATA_DIR / "random-32-32-10.map"
    assert resolve_map("random-32-32-10.map") == DATA_DIR / "random-32-32-10.map"
    p = _write(tmp_path, "mine.map", MAP)
    assert resolve_map(str(p)) == p
    with pytest.raises(ConfigError) as ei:
        resolve_map("random-32-32-20")
    msg = str(ei.value)
    assert "unknown map 'random-32-32-20'" in msg and ", ".join(SHIPPED) in msg
    md = load_map(resolve_map("room-32-32-4"))
    assert resolve_scen(md, 7) == DATA_DIR / "room-32-32-4-random-7.scen"
    with pytest.raises(ConfigError, match="shipped indices: 1, 2, 3"):
        resolve_scen(md, 26)


def test_load_errors_for_missing_and_non_ascii(tmp_path):
    with pytest.raises(MapFormatError, match="nope.map: cannot read file"):
        load_map(tmp_path / "nope.map")
    p = tmp_path / "u.map"
    p.write_bytes(MAP.replace("..T.", "..\u00e9.").encode("utf-8"))
    with pytest.raises(MapFormatError, match=r"u\.map, line 6: non-ASCII byte"):
        load_map(p)


@pytest.mark.parametrize("seed,size,density", [(0, 17, 0.1), (1, (20, 32), 0.2), (2, 32, 0.3), (3, (32, 17), 0.3)])
def test_random_maps_are_connected_with_exact_density(seed, size, density):
    md = random_map(seed, size, density)
    h, w = (size, size) if isinstance(size, int) else size
    assert md.blocked.shape == (h, w)
    assert int(md.blocked.sum()) == round(density * h * w)
    labels = components(md.blocked)
    assert labels.max() == 0 and (labels[~md.blocked] == 0).all()
    assert np.array_equal(random_map(seed, size, density).blocked, md.blocked)
    assert not np.array_equal(random_map(seed + 100, size, density).blocked, md.blocked)


@pytest.mark.parametrize("seed,size,density", [(0, 17, 0.1), (1, (20, 32), 0.2), (2, 32, 0.3), (3, (32, 17), 0.3)])
def test_random_bar_maps_are_connected_with_exact_density_and_corridors(seed, size, density):
    md = random_bars_map(seed, size, density)
    h, w = (size, size) if isinstance(size, int) else size
    assert md.blocked.shape == (h, w) and md.name == f"generated-bars-{h}-{w}-{round(100 * density)}"
    assert int(md.blocked.sum()) == round(density * h * w)
    labels = components(md.blocked)
    assert labels.max() == 0 and (labels[~md.blocked] == 0).all()
    assert np.array_equal(random_bars_map(seed, size, density).blocked, md.blocked)
    # bars: over half the obstacles are the middle cell of three in a row or column; scattered cells: few
    def straight3(b):
        p = np.pad(b, 1)
        return float((b & ((p[1:-1, :-2] & p[1:-1, 2:]) | (p[:-2, 1:-1] & p[2:, 1:-1]))).sum() / b.sum())
    assert straight3(md.blocked) > 0.5 > 0.35 > straight3(random_map(seed, size, density).blocked)


def test_random_map_style_reaches_the_scenario():
    from coopsim.scenarios.mapf import MGMAPFCore
    core = MGMAPFCore(1, map="random", random_size=[20, 20], random_style="bars", num_agents=4, num_goals=2)
    core.reset(seed=5)
    assert core.map_data(0).name == "generated-bars-20-20-20"
    core = MGMAPFCore(1, map="random", random_size=[20, 20], num_agents=4, num_goals=2)
    core.reset(seed=5)
    assert core.map_data(0).name == "generated-20-20-20"


def test_random_map_rejects_bad_ranges():
    with pytest.raises(ConfigError, match=r"density must be in \[0.1, 0.3\]; got 0.35"):
        random_map(0, 20, 0.35)
    with pytest.raises(ConfigError, match=r"size must be in \[4, 512\]"):
        random_map(0, 2, 0.2)
    with pytest.raises(ConfigError, match=r"bar length must be >= 2 cells; got max_len=1"):
        random_bars_map(0, 20, 0.2, max_len=1)


def test_octile_pair_distances_bound_and_no_bound_agree():
    md = load_map(resolve_map("room-32-32-4"))
    sc = load_scen(shipped_scens("room-32-32-4")[0], md)
    full = octile_pair_distances(md.blocked, sc.start_xy, sc.goal_xy)
    direct = octile_distances(md.blocked, sc.start_xy[:5])[np.arange(5), sc.goal_xy[:5, 1], sc.goal_xy[:5, 0]]
    assert np.allclose(full[:5], direct)
    bounded = octile_pair_distances(md.blocked, sc.start_xy, sc.goal_xy, max_length=sc.optimal_length + 1e-3)
    assert np.allclose(bounded, full)
    # a bound below the true distance gives inf or the true distance, never a value within the bound
    # (so a wrong expected value cannot pass the check)
    short = octile_pair_distances(md.blocked, sc.start_xy, sc.goal_xy, max_length=sc.optimal_length - 0.5)
    assert (np.isinf(short) | np.isclose(short, full)).all() and np.isinf(short).any()

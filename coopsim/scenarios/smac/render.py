"""Drawing of the SMAC-like battle (matplotlib, Agg): live frames of a core and replay GIF frames.

One function draws one frame from plain arrays (:func:`draw_frames`); :meth:`SMACCore.render` feeds it the
core's current state, :meth:`SMACCore.render_replay` (used by ``coopsim report``) the arrays of a recorded
episode (see :meth:`SMACCore.replay`).
"""
from __future__ import annotations

import numpy as np

from coopsim.scenarios.smac import units as U

SIZE_PX = 512
CAPTION_PX = 24
ALLY_RGB = (70, 130, 250)
ENEMY_RGB = (235, 70, 60)
ATTACK_RGB = (250, 220, 60)
HEAL_RGB = (80, 230, 80)
HEALTH_RGB = (60, 220, 60)
SHIELD_RGB = (60, 220, 230)
WALL_RGB = (90, 80, 70)
BACKGROUND_RGB = (24, 24, 28)
DEAD_RGB = (90, 90, 90)
#: one label per unit type (index = type id): marine M, marauder R, stalker S, zealot Z, zergling L,
#: hydralisk H, medivac +, colossus C, baneling B, spine crawler P
TYPE_LETTER = ("M", "R", "S", "Z", "L", "H", "+", "C", "B", "P")


def _c(rgb) -> tuple[float, float, float]:
    return tuple(v / 255.0 for v in rgb)


def draw_frames(pos: np.ndarray, health: np.ndarray, shield: np.ndarray, alive: np.ndarray, target: np.ndarray,
                types: np.ndarray, n_allies: int, walls: np.ndarray, captions: list[str] | None = None,
                size_px: int = SIZE_PX, view: tuple[float, float, float] | None = None) -> list[np.ndarray]:
    """RGB frames of a battle, one per row of the per-frame arrays.

    Args:
        pos: float ``[T, U, 2]`` unit centres (map units, 32x32 map, y up).
        health, shield: float ``[T, U]`` hit points (absolute; bars show them over the type's maximum).
        alive: bool ``[T, U]``; dead units are drawn as a small grey cross.
        target: int ``[T, U]`` unit each unit attacked (yellow line) or healed (green line) during the step
            that ended at this frame, -1 none.
        types: int ``[U]`` unit type ids (``coopsim.scenarios.smac.units.UNIT_TYPES``).
        n_allies: the first ``n_allies`` units are the agents' team (blue), the rest the enemy (red).
        walls: float ``[W, 4]`` wall rectangles (x0, y0, x1, y1).
        captions: one text per frame, drawn in a strip above the map (None: no strip).
        size_px: side of the map area in pixels.
        view: ``(x0, y0, side)`` square of the map to draw (map units); None = the whole 32x32 map.

    Returns:
        uint8 ``[size_px (+ 24 with captions), size_px, 3]`` frames. Units are circles of their radius,
        labelled with the type's letter (``TYPE_LETTER``), with a health bar (green) and, for shielded
        types, a shield bar (cyan) above them.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle, Rectangle

    pos = np.asarray(pos, np.float64)
    T, Un = pos.shape[:2]
    types = np.asarray(types, np.int64).reshape(Un)
    cap = CAPTION_PX if captions is not None else 0
    dpi = 100
    fig = Figure(figsize=(size_px / dpi, (size_px + cap) / dpi), dpi=dpi, facecolor=_c(BACKGROUND_RGB))
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.0, 1.0, size_px / (size_px + cap)))
    radius = U.RADIUS[types].astype(np.float64)
    hmax = U.HEALTH[types].astype(np.float64)
    smax = U.SHIELD[types].astype(np.float64)
    healer = U.IS_HEALER[types]
    letters = [TYPE_LETTER[t] for t in types]
    team_rgb = np.where(np.arange(Un)[:, None] < n_allies, np.array(ALLY_RGB), np.array(ENEMY_RGB)) / 255.0
    vx, vy, side = view if view is not None else (0.0, 0.0, float(U.MAP_WIDTH))
    px_per_unit = size_px / side
    bar_w = np.maximum(2 * radius, 0.5)
    bar_h = 4.0 / px_per_unit  # 4 px
    gap = 1.5 / px_per_unit
    font = float(np.clip(1.1 * radius.min() * px_per_unit * 72 / 100, 5.0, 14.0))  # letter about the circle's size
    frames = []
    for t in range(T):
        ax.clear()
        ax.set_xlim(vx, vx + side)
        ax.set_ylim(vy, vy + side)
        ax.set_facecolor(_c(BACKGROUND_RGB))
        ax.set_axis_off()
        for x0, y0, x1, y1 in np.asarray(walls, np.float64).reshape(-1, 4):
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, color=_c(WALL_RGB), lw=0))
        p, al, tg = pos[t], np.asarray(alive[t], bool), np.asarray(target[t], np.int64)
        src = np.flatnonzero(al & (tg >= 0))
        if len(src):
            segs = np.stack([p[src], p[tg[src]]], 1)
            cols = [_c(HEAL_RGB) if healer[u] else _c(ATTACK_RGB) for u in src]
            ax.add_collection(LineCollection(segs, colors=cols, linewidths=1.2, zorder=1))
        live = np.flatnonzero(al)
        ax.add_collection(PatchCollection([Circle(p[u], radius[u]) for u in live], facecolors=team_rgb[live],
                                          edgecolors="white", linewidths=0.6, zorder=2))
        dead = np.flatnonzero(~al)
        if len(dead):
            r = 0.35
            d = p[dead]
            segs = np.concatenate([np.stack([d + [-r, -r], d + [r, r]], 1), np.stack([d + [-r, r], d + [r, -r]], 1)])
            ax.add_collection(LineCollection(segs, colors=[_c(DEAD_RGB)], linewidths=0.8, zorder=1))
        # bars: background, health, shield (all units in three collections)
        x0 = p[live, 0] - bar_w[live] / 2
        y_h = p[live, 1] + radius[live] + gap
        hf = np.clip(np.asarray(health[t], np.float64)[live] / hmax[live], 0, 1)
        back = [Rectangle((x, y), w, bar_h) for x, y, w in zip(x0, y_h, bar_w[live])]
        hbar = [Rectangle((x, y), w * f, bar_h) for x, y, w, f in zip(x0, y_h, bar_w[live], hf)]
        ax.add_collection(PatchCollection(back, facecolors=[(0.3, 0.3, 0.3)], linewidths=0, zorder=3))
        ax.add_collection(PatchCollection(hbar, facecolors=[_c(HEALTH_RGB)], linewidths=0, zorder=4))
        sh = smax[live] > 0
        if sh.any():
            sf = np.clip(np.asarray(shield[t], np.float64)[live][sh] / smax[live][sh], 0, 1)
            sbar = [Rectangle((x, y + bar_h + gap), w * f, bar_h) for x, y, w, f in zip(x0[sh], y_h[sh], bar_w[live][sh], sf)]
            ax.add_collection(PatchCollection(sbar, facecolors=[_c(SHIELD_RGB)], linewidths=0, zorder=4))
        for u in live:
            ax.text(p[u, 0], p[u, 1], letters[u], ha="center", va="center", color="white", fontsize=font,
                    fontweight="bold", zorder=5)
        if captions is not None:
            fig.texts.clear()
            fig.text(0.01, 1.0 - 0.5 * cap / (size_px + cap), captions[t], color="white", fontsize=9,
                     va="center", ha="left", family="monospace")
        canvas.draw()
        frames.append(np.asarray(canvas.buffer_rgba())[..., :3].copy())
    return frames


def replay_frames(replay: dict[str, np.ndarray], size_px: int = SIZE_PX, max_frames: int | None = None) -> list[np.ndarray]:
    """Captioned frames (step, units left per side, the result on the last frame) of a replay dict as
    returned by :meth:`SMACCore.replay`; with ``max_frames``, at most that many, at evenly spaced steps."""
    from coopsim.platform.report import replay_steps

    alive = np.asarray(replay["alive"], bool)
    A = int(replay["n_allies"])
    T = len(alive) - 1
    outcome = str(replay["outcome"])
    steps = replay_steps(T + 1, max_frames)
    caps = []
    for t in steps.tolist():
        text = f"{replay['map_name']}  step {t}/{T}  allies {int(alive[t, :A].sum())}/{A}  enemies {int(alive[t, A:].sum())}/{alive.shape[1] - A}"
        if t == T and outcome != "running":
            text += f"  {outcome}"
        caps.append(text)
    return draw_frames(replay["pos"][steps], replay["health"][steps], replay["shield"][steps], alive[steps],
                       replay["target"][steps], replay["types"], A, replay["walls"], caps, size_px,
                       battle_view(replay["pos"]))


def battle_view(pos: np.ndarray, margin: float = 2.5, min_side: float = 12.0) -> tuple[float, float, float]:
    """``(x0, y0, side)``: the square (map units, inside the 32x32 map) holding every position of ``pos``
    (float ``[..., 2]``) with ``margin`` around it, at least ``min_side`` wide; a replay's fixed camera."""
    p = np.asarray(pos, np.float64).reshape(-1, 2)
    lo, hi = p.min(0) - margin, p.max(0) + margin
    side = float(min(max((hi - lo).max(), min_side), U.MAP_WIDTH))
    c = (lo + hi) / 2
    x0, y0 = np.clip(c - side / 2, 0.0, U.MAP_WIDTH - side)
    return float(x0), float(y0), side

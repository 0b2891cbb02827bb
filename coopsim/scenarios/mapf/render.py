"""Numpy drawing of MG-MAPF frames (no matplotlib): cells, coloured agents, their remaining goals."""
from __future__ import annotations

import numpy as np

FREE_RGB = np.array([245, 245, 240], dtype=np.uint8)
OBSTACLE_RGB = np.array([45, 45, 55], dtype=np.uint8)


def agent_colors(n: int) -> np.ndarray:
    """uint8 ``[n, 3]`` distinct colours (golden-ratio hue steps, HSV with s=0.75, v=0.9)."""
    h = (np.arange(n) * 0.61803398875) % 1.0
    s, v = 0.75, 0.9
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    table = np.stack([
        np.stack([np.full(n, v), t, np.full(n, p)], -1), np.stack([q, np.full(n, v), np.full(n, p)], -1),
        np.stack([np.full(n, p), np.full(n, v), t], -1), np.stack([np.full(n, p), q, np.full(n, v)], -1),
        np.stack([t, np.full(n, p), np.full(n, v)], -1), np.stack([np.full(n, v), np.full(n, p), q], -1),
    ], axis=0)
    return (table[i, np.arange(n)] * 255).astype(np.uint8)


def _blocks(img: np.ndarray, xy: np.ndarray, lo: int, hi: int, px: int, rgb: np.ndarray) -> None:
    if len(xy) == 0 or hi <= lo:
        return
    r = np.arange(lo, hi)
    ys = xy[:, 1, None, None] * px + r[None, :, None]
    xs = xy[:, 0, None, None] * px + r[None, None, :]
    img[ys, xs] = rgb[:, None, None, :]


def draw_frame(blocked: np.ndarray, agent_xy: np.ndarray, goals_xy: np.ndarray, goal_done: np.ndarray,
               cell_px: int = 8) -> np.ndarray:
    """One RGB frame.

    Args:
        blocked: bool ``[H, W]``.
        agent_xy: int ``[N, 2]`` agent cells (x, y).
        goals_xy: int ``[N, K, 2]`` goal cells.
        goal_done: bool ``[N, K]``; visited goals are not drawn.
        cell_px: pixels per cell (>= 4).

    Returns:
        uint8 ``[H * cell_px, W * cell_px, 3]``: obstacles dark, free cells light, each remaining goal a
        small square in its agent's colour (darker), each agent a full square in its colour.
    """
    px = max(int(cell_px), 4)
    blocked = np.asarray(blocked, dtype=bool)
    cells = np.where(blocked[..., None], OBSTACLE_RGB, FREE_RGB).astype(np.uint8)
    img = np.repeat(np.repeat(cells, px, axis=0), px, axis=1)
    agent_xy = np.asarray(agent_xy, dtype=np.int64).reshape(-1, 2)
    n = len(agent_xy)
    col = agent_colors(n)
    goals_xy = np.asarray(goals_xy, dtype=np.int64).reshape(n, -1, 2)
    rem = ~np.asarray(goal_done, dtype=bool).reshape(n, -1)
    gi, gk = np.nonzero(rem)
    # goals: a ring in the agent's colour (dark), so they read apart from the filled agent squares
    ring = (col[gi] * 0.55).astype(np.uint8)
    _blocks(img, goals_xy[gi, gk], px // 4, px - px // 4, px, ring)
    if px >= 8:
        _blocks(img, goals_xy[gi, gk], px // 4 + 1, px - px // 4 - 1, px, np.broadcast_to(FREE_RGB, ring.shape))
    _blocks(img, agent_xy, 1, px - 1, px, col)
    return img


def with_caption(frame: np.ndarray, text: str, height_px: int = 16) -> np.ndarray:
    """``frame`` with a caption strip of ``height_px`` pixels on top (Pillow's default font)."""
    from PIL import Image, ImageDraw

    strip = Image.new("RGB", (frame.shape[1], height_px), (255, 255, 255))
    ImageDraw.Draw(strip).text((3, 2), text, fill=(20, 20, 20))
    return np.concatenate([np.asarray(strip, dtype=np.uint8), frame], axis=0)


def replay_frames(replay: dict[str, np.ndarray], cell_px: int = 12, max_frames: int | None = None) -> list[np.ndarray]:
    """Captioned frames of a replay (``positions`` [T+1, N, 2], ``goals`` [N, K, 2], ``goal_reached_at`` [N, K],
    ``blocked`` [H, W]): agents are filled squares, their remaining goals rings of the same colour. With
    ``max_frames``, at most that many, at evenly spaced steps (the caption gives each frame's step)."""
    from coopsim.platform.report import replay_steps

    pos, goals, reached = replay["positions"], replay["goals"], replay["goal_reached_at"]
    n, k = reached.shape
    finish = np.where((reached >= 0).all(axis=1), reached.max(axis=1), -1)
    frames = []
    for t in replay_steps(len(pos), max_frames).tolist():
        done = (reached >= 0) & (reached <= t)
        text = (f"step {t}/{len(pos) - 1}   goals {int(done.sum())}/{n * k}   "
                f"agents finished {int(((finish >= 0) & (finish <= t)).sum())}/{n}")
        frames.append(with_caption(draw_frame(replay["blocked"], pos[t], goals, done, cell_px), text))
    return frames

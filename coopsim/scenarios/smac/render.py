"""RGB rendering of one env of a :class:`~coopsim.scenarios.smac.core.SMACCore` (PIL drawing)."""
from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from coopsim.scenarios.smac import units as U

SIZE_PX = 512


def draw_frame(core, env_index: int = 0, size_px: int = SIZE_PX) -> np.ndarray:
    """uint8 ``[size_px, size_px, 3]`` frame of env ``env_index`` (y axis up)."""
    e = int(env_index)
    s = size_px / U.MAP_WIDTH
    img = Image.new("RGB", (size_px, size_px), (24, 24, 28))
    dr = ImageDraw.Draw(img)

    def px(p):
        return float(p[0] * s), float(size_px - p[1] * s)

    for x0, y0, x1, y1 in core._walls:
        dr.rectangle([px((x0, y1)), px((x1, y0))], fill=(90, 80, 70))
    pos, typ, alive = core._pos[e], core._type[e], core._unit_alive[e]
    A = core.n_allies
    for u in np.nonzero(alive & (core._fired_at[e] >= 0))[0]:
        colour = (80, 230, 80) if U.IS_HEALER[typ[u]] else (250, 220, 60)
        dr.line([px(pos[u]), px(pos[core._fired_at[e, u]])], fill=colour, width=1)
    for u in range(core.n_units):
        r = U.RADIUS[typ[u]] * s
        cx, cy = px(pos[u])
        if not alive[u]:
            dr.line([cx - r, cy - r, cx + r, cy + r], fill=(90, 90, 90))
            dr.line([cx - r, cy + r, cx + r, cy - r], fill=(90, 90, 90))
            continue
        fill = (70, 130, 250) if u < A else (235, 70, 60)
        dr.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill, outline=(255, 255, 255))
        dr.text((cx - 3, cy - 5), U.UNIT_TYPES[typ[u]][0].upper(), fill=(255, 255, 255))
        w = max(2 * r, 8.0)
        hf = core._health[e, u] / U.HEALTH[typ[u]]
        dr.rectangle([cx - w / 2, cy - r - 5, cx - w / 2 + w * hf, cy - r - 3], fill=(60, 220, 60))
        if U.SHIELD[typ[u]] > 0:
            sf = core._shield[e, u] / U.SHIELD[typ[u]]
            dr.rectangle([cx - w / 2, cy - r - 8, cx - w / 2 + w * sf, cy - r - 6], fill=(60, 220, 230))
    return np.asarray(img, dtype=np.uint8).copy()

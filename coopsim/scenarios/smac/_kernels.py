"""Compiled (numba) kernels of the SMAC-like core: one call per ``SMACCore.step`` / ``reset`` / ``state`` over the batch.

Every kernel reproduces the arithmetic of the former numpy implementation bit for bit (checked by
``benchmarks/smac_fingerprint.py`` and ``tests/smac/test_smac_kernels.py``):

* float32 element-wise operations in numpy's order (no fused multiply-add, no float64 promotion of float32
  operands: every constant below is a ``np.float32``);
* numpy's ``bincount`` accumulations are float64 sums in index order (kept as float64 accumulators, cast to
  float32 where numpy cast);
* ``ndarray.sum`` over a contiguous axis is numpy's pairwise summation (:func:`_pw_sum`), over a strided axis a
  sequential sum;
* ``argmin`` / ``argmax`` return the first extremum;
* operations numpy gated on a batch-wide condition (the push-apart's clamp to the map and walls, the medivac
  heal pass, the death update) are gated on the same batch-wide condition, so a batch evolves exactly as before.

Arrays (``E`` envs, ``U`` units = ``A`` allies then ``M`` enemies; ``SMACCore.__init__`` allocates them):
``typ`` int64 ``[E, U]`` unit type ids; ``pos`` float32 ``[E, U, 2]`` map units; ``uf`` float32 ``[5, E, U]``
health, shield, weapon cooldown (s), medivac energy, time since damage (s); ``ua`` bool ``[E, U]`` unit alive;
``min_hp`` float32 ``[E, M]`` each enemy's lowest health + shield; ``ef`` float32 ``[7, E]`` maximum return
(unscaled), damage dealt, damage taken, and the last step's reward/damage, reward/kill, reward/win, team reward;
``ei`` int64 ``[3, E]`` steps taken, result (1 win, -1 loss, 0 other), the last step's invalid actions; ``eb``
bool ``[3, E]`` episode over, the last step's battle won, running at the start of the last step; ``at`` bool
``[2, E, A]`` terminated, truncated; ``kc`` uint64 ``[2, E]`` counter-RNG key and counter; per-type tables
``TF`` float32 ``[n_types, NF]`` and ``TB`` bool ``[n_types, NB]`` (columns ``F_*`` / ``B_*`` below, built by
``core._type_tables``), ``HIT`` float32 ``[n_types, n_types]`` damage of one hit; ``walls`` float32 ``[W, 4]``
(x0, y0, x1, y1); ``icfg`` int64 ``[nb, enemy_shield, ally_shield, obs_last_action, obs_own_cooldown, n_actions,
A, limit, reward_sparse, record_replay, state_last_action, reward_only_positive]``; replay buffers ``rpf`` float32 ``[L, E, U, 4]``
(x, y, health, shield), ``rpb`` bool ``[L, E, U]`` alive, ``rpi`` int32 ``[L, E, U]`` target.
No ``parallel=True``: one thread.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# per-type float columns of TF
F_SPEED_TICK, F_RANGE, F_SIGHT, F_INV_SIGHT, F_RADIUS, F_HMAX, F_SMAX, F_SMAX1, F_BASE_CD, F_CD_NORM, F_RANGE_EF = range(11)
NF = 11
# per-type bool columns of TB
B_BIO, B_HEALER, B_SUICIDE, B_LINE, B_SPLASHY, B_MOBILE, B_HAS_SHIELD = range(7)
NB = 7

NOOP, STOP, NORTH, SOUTH, EAST, WEST = 0, 1, 2, 3, 4, 5
N_MOVE = 6

_C1 = np.uint64(0x9E3779B97F4A7C15)
_C2 = np.uint64(0xBF58476D1CE4E5B9)
_C3 = np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31, _S40 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(40)
_F24 = np.float32(2.0 ** -24)

_Z = np.float32(0.0)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
_EPS6 = np.float32(1e-6)
_INF32 = np.float32(np.inf)


# ----------------------------------------------------------------------------- helpers
@njit(cache=True, error_model="numpy")
def _splitmix(z):
    z = z + _C1
    z = (z ^ (z >> _S30)) * _C2
    z = (z ^ (z >> _S27)) * _C3
    return z ^ (z >> _S31)


@njit(cache=True, error_model="numpy")
def _uniform_env(key, ctr, e, k, out):
    """``k`` counter-based uniforms in [0, 1) (float32) of env ``e`` into ``out[:k]``; advances ``ctr[e]`` by ``k``."""
    kk = key[e]
    c = ctr[e]
    for i in range(k):
        z = _splitmix(kk ^ ((c + np.uint64(i)) * _C3))
        out[i] = np.float32(z >> _S40) * _F24
    ctr[e] = c + np.uint64(k)


@njit(cache=True, error_model="numpy")
def _draw(key, base, i):
    """Uniform float32 in [0, 1), number ``i`` of the block starting at counter ``base`` of the stream ``key``
    (uint64; random access: the value :func:`_uniform_env` writes to ``out[i]``)."""
    z = _splitmix(key ^ ((base + np.uint64(i)) * _C3))
    return np.float32(z >> _S40) * _F24


@njit(cache=True, error_model="numpy")
def _pw_block(a, start, n):
    """numpy's pairwise float32 sum of ``a[start:start + n]`` for ``n <= 128`` (one unrolled block)."""
    if n < 8:
        res = np.float32(0.0)
        for i in range(n):
            res += a[start + i]
        return res
    r0 = a[start]
    r1 = a[start + 1]
    r2 = a[start + 2]
    r3 = a[start + 3]
    r4 = a[start + 4]
    r5 = a[start + 5]
    r6 = a[start + 6]
    r7 = a[start + 7]
    i = 8
    lim = n - (n % 8)
    while i < lim:
        r0 += a[start + i]
        r1 += a[start + i + 1]
        r2 += a[start + i + 2]
        r3 += a[start + i + 3]
        r4 += a[start + i + 4]
        r5 += a[start + i + 5]
        r6 += a[start + i + 6]
        r7 += a[start + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@njit(cache=True, error_model="numpy")
def _pw_sum(a, start, n):
    """numpy's pairwise float32 sum of ``a[start:start + n]`` (what ``ndarray.sum`` does along a contiguous axis),
    for ``n <= 240`` (one split; no recursion: numba's cache mishandles recursive functions). Units per side are at
    most 64 (``SMACCore`` checks)."""
    if n <= 128:
        return _pw_block(a, start, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_block(a, start, n2) + _pw_block(a, start + n2, n - n2)


@njit(cache=True, error_model="numpy")
def _best_dir(gx, gy):
    """SMAC action of the best of N, E, S, W toward ``(gx, gy)`` (first maximum of ``[gy, gx, -gy, -gx]``)."""
    best = NORTH
    v = gy
    if gx > v:
        best = EAST
        v = gx
    if -gy > v:
        best = SOUTH
        v = -gy
    if -gx > v:
        best = WEST
    return best


@njit(cache=True, error_model="numpy")
def _constrain_env(e, pos, typ, TF, walls):
    """Clamp env ``e``'s units to the map, then project them out of each wall inflated by their radius."""
    Un = pos.shape[1]
    W = np.float32(32.0)
    nw = walls.shape[0]
    for u in range(Un):
        x = pos[e, u, 0]
        y = pos[e, u, 1]
        if x < _Z:
            x = _Z
        if x > W:
            x = W
        if y < _Z:
            y = _Z
        if y > W:
            y = W
        if nw:
            r = TF[typ[e, u], F_RADIUS]
            for w in range(nw):
                x0 = walls[w, 0]
                y0 = walls[w, 1]
                x1 = walls[w, 2]
                y1 = walls[w, 3]
                p0 = x - (x0 - r)
                p1 = (x1 + r) - x
                p2 = y - (y0 - r)
                p3 = (y1 + r) - y
                if p0 > _Z and p1 > _Z and p2 > _Z and p3 > _Z:
                    side = 0
                    b = p0
                    if p1 < b:
                        side = 1
                        b = p1
                    if p2 < b:
                        side = 2
                        b = p2
                    if p3 < b:
                        side = 3
                    if side == 0:
                        x = x0 - r
                    elif side == 1:
                        x = x1 + r
                    elif side == 2:
                        y = y0 - r
                    else:
                        y = y1 + r
        pos[e, u, 0] = x
        pos[e, u, 1] = y


@njit(cache=True, error_model="numpy")
def _push_sums(e, pos, typ, live, TF, TB, sx, sy):
    """SMAX push-apart displacement sums (float64, numpy's bincount order) of env ``e``'s living units into
    ``sx[e], sy[e]`` (zeroed first); returns True when some pair overlaps."""
    Un = pos.shape[1]
    for u in range(Un):
        sx[e, u] = 0.0
        sy[e, u] = 0.0
    found = False
    for i in range(Un):
        if not live[e, i]:
            continue
        ri = TF[typ[e, i], F_RADIUS]
        xi = pos[e, i, 0]
        yi = pos[e, i, 1]
        mi = TB[typ[e, i], B_MOBILE]
        for j in range(i + 1, Un):
            if not live[e, j]:
                continue
            dx = xi - pos[e, j, 0]
            dy = yi - pos[e, j, 1]
            d2 = dx * dx + dy * dy
            rs = ri + TF[typ[e, j], F_RADIUS]
            if d2 < rs * rs:
                found = True
                dist = np.sqrt(d2) + _EPS6
                over = (rs / dist - _ONE) * _HALF
                if mi:
                    sx[e, i] += dx * over
                    sy[e, i] += dy * over
                if TB[typ[e, j], B_MOBILE]:
                    sx[e, j] += -dx * over
                    sy[e, j] += -dy * over
    return found


@njit(cache=True, error_model="numpy")
def _apply_push(pos, typ, TF, walls, sx, sy):
    """Add the push sums to every unit and clamp every env (numpy did both over the whole batch)."""
    E, Un = typ.shape
    for e in range(E):
        for u in range(Un):
            pos[e, u, 0] += np.float32(sx[e, u])
            pos[e, u, 1] += np.float32(sy[e, u])
        _constrain_env(e, pos, typ, TF, walls)


# ----------------------------------------------------------------------------- observation and masks
@njit(cache=True, error_model="numpy")
def _feasible(x, y, walls):
    """Move-feasibility probes (2 units N, S, E, W) of a unit at ``(x, y)``: on the map and outside every wall."""
    W = np.float32(32.0)
    two = np.float32(2.0)
    r0 = r1 = r2 = r3 = False
    for k in range(4):
        if k == 0:
            px, py = x, y + two
        elif k == 1:
            px, py = x, y + -two
        elif k == 2:
            px, py = x + two, y
        else:
            px, py = x + -two, y
        ok = px > _Z and px < W and py > _Z and py < W
        for w in range(walls.shape[0]):
            if px > walls[w, 0] and px < walls[w, 2] and py > walls[w, 1] and py < walls[w, 3]:
                ok = False
        if k == 0:
            r0 = ok
        elif k == 1:
            r1 = ok
        elif k == 2:
            r2 = ok
        else:
            r3 = ok
    return r0, r1, r2, r3


@njit(cache=True, error_model="numpy")
def _masks_env(e, a, A, typ, pos, ua, over, TF, TB, walls, masks):
    """Masks ``masks[e, a]`` of ally ``a`` (SMAC's rules); returns its four move-feasibility probes."""
    Un = typ.shape[1]
    M = Un - A
    ta = typ[e, a]
    alive = ua[e, a] and not over[e]
    healer_a = TB[ta, B_HEALER]
    rng_a = TF[ta, F_RANGE]
    xa = pos[e, a, 0]
    ya = pos[e, a, 1]
    mk = masks[e, a]
    f0, f1, f2, f3 = _feasible(xa, ya, walls)
    _move_masks(mk, alive, TB[ta, B_MOBILE], f0, f1, f2, f3)
    for m in range(M):
        um = A + m
        rx = pos[e, um, 0] - xa
        ry = pos[e, um, 1] - ya
        mk[N_MOVE + m] = np.sqrt(rx * rx + ry * ry) < rng_a and ua[e, um] and alive and not healer_a
    if healer_a:  # a medivac's 6 + j heals ally j (j < min(A, M))
        for j in range(min(A, M)):
            if j == a or not ua[e, j] or not alive or not TB[typ[e, j], B_BIO]:
                continue
            dx = xa - pos[e, j, 0]
            dy = ya - pos[e, j, 1]
            if np.sqrt(dx * dx + dy * dy) < rng_a:
                mk[N_MOVE + j] = True
    return f0, f1, f2, f3


@njit(cache=True, error_model="numpy")
def _move_masks(mk, alive, mobile, f0, f1, f2, f3):
    """SMAC's first six availabilities into ``mk``: no-op only when dead, stop when alive, a move when alive, mobile
    and the step in that direction (north, south, east, west: ``f0..f3``) is feasible."""
    mk[NOOP] = not alive
    mk[STOP] = alive
    mob = alive and mobile
    mk[NORTH] = f0 and mob
    mk[SOUTH] = f1 and mob
    mk[EAST] = f2 and mob
    mk[WEST] = f3 and mob


@njit(cache=True, error_model="numpy")
def _unit_feats(o, b, dn, rx, ry, inv_sight, vis, hp, hmax, with_shield, sh, smax1, nb, bit):
    """SMAC's per-unit features after the block's first entry, written into ``o[b + 1:]`` (zeros when the unit is
    not visible): distance and relative x, y over the sight range, health (and shield) fraction, unit-type one-hot;
    the enemy and ally blocks of the observation share them. Returns the offset after the type bits."""
    visf = np.float32(1.0) if vis else _Z
    o[b + 1] = dn * visf
    sc = inv_sight * visf
    o[b + 2] = rx * sc
    o[b + 3] = ry * sc
    o[b + 4] = (hp / hmax) * visf
    f = 5
    if with_shield:
        o[b + 5] = (sh / smax1) * visf
        f = 6
    for q in range(nb):
        o[b + f + q] = np.float32(1.0) if (bit == q and vis) else _Z
    return f + nb


@njit(cache=True, error_model="numpy")
def observe_env(e, typ, pos, uf, ua, over, last_action, TF, TB, type_bit, walls, icfg, masks, obs):
    """Observation ``obs[e]`` float32 ``[A, obs_dim]`` and masks ``masks[e]`` bool ``[A, 6 + M]`` of env ``e``
    (SMAC's blocks, see ``SMACCore``)."""
    Un = typ.shape[1]
    nb, esh, ash, ola, ocd, nact, A = icfg[0], icfg[1], icfg[2], icfg[3], icfg[4], icfg[5], icfg[6]
    M = Un - A
    health, shield, cooldown, energy = uf[0], uf[1], uf[2], uf[3]
    Fe = 5 + esh + nb
    Fa = 5 + ash + nb + (nact if ola else 0)
    own = 1 + ash + nb + (1 if ocd else 0)
    odim = 4 + M * Fe + (A - 1) * Fa + own
    ov = over[e]
    for a in range(A):
        ta = typ[e, a]
        alive = ua[e, a] and not ov
        inv_sight = TF[ta, F_INV_SIGHT]
        healer_a = TB[ta, B_HEALER]
        xa = pos[e, a, 0]
        ya = pos[e, a, 1]
        o = obs[e, a]
        mk = masks[e, a]
        f0, f1, f2, f3 = _feasible(xa, ya, walls)
        o[0] = np.float32(1.0) if f0 else _Z
        o[1] = np.float32(1.0) if f1 else _Z
        o[2] = np.float32(1.0) if f2 else _Z
        o[3] = np.float32(1.0) if f3 else _Z
        # masks (as _masks_env, sharing the ally-enemy distances with the enemy block)
        _move_masks(mk, alive, TB[ta, B_MOBILE], f0, f1, f2, f3)
        rng_a = TF[ta, F_RANGE]
        attacker = alive and not healer_a
        # enemies
        for m in range(M):
            um = A + m
            tm = typ[e, um]
            rx = pos[e, um, 0] - xa
            ry = pos[e, um, 1] - ya
            dist = np.sqrt(rx * rx + ry * ry)
            atk = dist < rng_a and ua[e, um] and attacker
            mk[N_MOVE + m] = atk
            dn = dist * inv_sight
            vis = dn < _ONE and ua[e, um]
            b = 4 + m * Fe
            o[b] = np.float32(1.0) if (atk and vis) else _Z
            _unit_feats(o, b, dn, rx, ry, inv_sight, vis, health[e, um], TF[tm, F_HMAX], esh, shield[e, um],
                        TF[tm, F_SMAX1], nb, type_bit[tm])
        if healer_a and alive:  # a medivac's 6 + j heals ally j (j < min(A, M))
            for j in range(min(A, M)):
                if j == a or not ua[e, j] or not TB[typ[e, j], B_BIO]:
                    continue
                dx = xa - pos[e, j, 0]
                dy = ya - pos[e, j, 1]
                if np.sqrt(dx * dx + dy * dy) < rng_a:
                    mk[N_MOVE + j] = True
        # allies (the others, in order)
        base = 4 + M * Fe
        slot = 0
        for j in range(A):
            if j == a:
                continue
            tj = typ[e, j]
            rx = pos[e, j, 0] - xa
            ry = pos[e, j, 1] - ya
            dn = np.sqrt(rx * rx + ry * ry) * inv_sight
            vis = dn < _ONE and ua[e, j]
            b = base + slot * Fa
            o[b] = np.float32(1.0) if vis else _Z
            f = _unit_feats(o, b, dn, rx, ry, inv_sight, vis, health[e, j], TF[tj, F_HMAX], ash, shield[e, j],
                            TF[tj, F_SMAX1], nb, type_bit[tj])
            if ola:
                la = last_action[e, j]
                for q in range(nact):
                    o[b + f + q] = np.float32(1.0) if (la == q and vis) else _Z
            slot += 1
        # own
        b = odim - own
        o[b] = health[e, a] / TF[ta, F_HMAX]
        if ash:
            o[b + 1] = shield[e, a] / TF[ta, F_SMAX1]
            b += 1
        if nb:
            bit = type_bit[ta]
            for q in range(nb):
                o[b + 1 + q] = np.float32(1.0) if bit == q else _Z
        if ocd:
            if healer_a:
                o[odim - 1] = energy[e, a] / np.float32(200.0)
            else:
                c = cooldown[e, a] / TF[ta, F_CD_NORM]
                if c < _Z:
                    c = _Z
                if c > _ONE:
                    c = _ONE
                o[odim - 1] = c
        if not alive:  # dead agents see zeros (x * 0, as the numpy version's `out *= alive`)
            for k in range(odim):
                o[k] = o[k] * _Z


@njit(cache=True, error_model="numpy")
def observe(sel, typ, pos, uf, ua, eb, last_action, TF, TB, type_bit, walls, icfg, masks, obs):
    """:func:`observe_env` of every env in ``sel`` (int64 env indices); ``sel`` of length 0 = every env."""
    over = eb[0]
    if sel.shape[0] == 0:
        for e in range(typ.shape[0]):
            observe_env(e, typ, pos, uf, ua, over, last_action, TF, TB, type_bit, walls, icfg, masks, obs)
    else:
        for i in range(sel.shape[0]):
            observe_env(sel[i], typ, pos, uf, ua, over, last_action, TF, TB, type_bit, walls, icfg, masks, obs)


@njit(cache=True, error_model="numpy")
def masks_only(typ, pos, ua, eb, TF, TB, walls, icfg, masks):
    """Action masks bool ``[E, A, 6 + M]`` of every env from the current state (no observation)."""
    A = icfg[6]
    for e in range(typ.shape[0]):
        for a in range(A):
            _masks_env(e, a, A, typ, pos, ua, eb[0], TF, TB, walls, masks)


@njit(cache=True, error_model="numpy")
def state(typ, pos, uf, ua, eb, last_action, TF, TB, type_bit, icfg, out):
    """Global state float32 ``out [E, state_dim]`` (SMAC's layout; see ``SMACCore.state``)."""
    E, Un = typ.shape
    nb, esh, ash, nact, A, sla = icfg[0], icfg[1], icfg[2], icfg[5], icfg[6], icfg[10]
    health, shield, cooldown, energy = uf[0], uf[1], uf[2], uf[3]
    over = eb[0]
    half = np.float32(16.0)
    size = np.float32(32.0)
    fa = 4 + ash + nb
    fe = 3 + esh + nb
    M = Un - A
    for e in range(E):
        s = out[e]
        for u in range(Un):
            t = typ[e, u]
            alive = ua[e, u] and not over[e]
            al = np.float32(1.0) if alive else _Z
            hf = health[e, u] / TF[t, F_HMAX]
            sf = shield[e, u] / TF[t, F_SMAX1] if TF[t, F_SMAX] > _Z else _Z
            rx = (pos[e, u, 0] - half) / size
            ry = (pos[e, u, 1] - half) / size
            bit = type_bit[t]
            if u < A:
                b = u * fa
                if TB[t, B_HEALER]:
                    cd = energy[e, u] / np.float32(200.0)
                else:
                    cd = cooldown[e, u] / TF[t, F_CD_NORM]
                    if cd < _Z:
                        cd = _Z
                    if cd > _ONE:
                        cd = _ONE
                s[b] = hf * al
                s[b + 1] = cd * al
                s[b + 2] = rx * al
                s[b + 3] = ry * al
                f = 4
                if ash:
                    s[b + 4] = sf * al
                    f = 5
            else:
                b = A * fa + (u - A) * fe
                s[b] = hf * al
                s[b + 1] = rx * al
                s[b + 2] = ry * al
                f = 3
                if esh:
                    s[b + 3] = sf * al
                    f = 4
            for q in range(nb):
                s[b + f + q] = (np.float32(1.0) if bit == q else _Z) * al
        if sla:
            b = A * fa + M * fe
            for a in range(A):
                la = last_action[e, a]
                for q in range(nact):
                    s[b + a * nact + q] = np.float32(1.0) if la == q else _Z


@njit(cache=True, error_model="numpy")
def done(A, ua, eb, out):
    """``out[e]`` = no ally of env ``e`` alive in a running episode (``~(ua[:, :A] & ~over[:, None]).any(1)``)."""
    over = eb[0]
    for e in range(ua.shape[0]):
        d = True
        if not over[e]:
            for a in range(A):
                if ua[e, a]:
                    d = False
                    break
        out[e] = d


@njit(cache=True, error_model="numpy")
def _record(e, typ, pos, uf, ua, fired_at, ei, rpf, rpb, rpi):
    """Copy env ``e``'s units into the replay buffers at its current step ``t``."""
    t = ei[0, e]
    for u in range(typ.shape[1]):
        rpf[t, e, u, 0] = pos[e, u, 0]
        rpf[t, e, u, 1] = pos[e, u, 1]
        rpf[t, e, u, 2] = uf[0, e, u]
        rpf[t, e, u, 3] = uf[1, e, u]
        rpb[t, e, u] = ua[e, u]
        rpi[t, e, u] = fired_at[e, u]


# ----------------------------------------------------------------------------- reset
@njit(cache=True, error_model="numpy")
def reset_envs(ids, typ, centre, jitter, pos, uf, ua, min_hp, ef, ei, eb, at, last_action, enemy_last, enemy_goal,
               fired_at, kc, TF, TB, type_bit, walls, icfg, sx, sy, rpf, rpb, rpi, masks, obs, observe_all):
    """Per-episode state of envs ``ids`` (types, start centres and jitter already drawn), SMAX's push-apart of their
    units (and, when some pair overlapped, the clamp of every env, as numpy did), the replay frame 0 (when
    recording), then the observation of every env (``observe_all``) or of ``ids`` only.

    ``centre``, ``jitter`` float64 ``[E, U, 2]``: each unit's group centre and its uniform jitter in [-2, 2]
    (immobile units stand at their centre); start = clip(centre + jitter, 0.5, 31.5) cast to float32.
    ``sx, sy`` float64 ``[E, U]`` work arrays.
    """
    E, Un = typ.shape
    A = icfg[6]
    M = Un - A
    health, shield, cooldown, energy, since_dmg = uf[0], uf[1], uf[2], uf[3], uf[4]
    energy0 = np.float32(50.0)
    death_total = np.float32(10.0 * M)
    win = np.float32(200.0)
    goal = np.float32(32.0)
    for i in range(ids.shape[0]):
        e = ids[i]
        kc[1, e] = 0
        for u in range(Un):
            tu = typ[e, u]
            for c in range(2):
                p = centre[e, u, c]
                if TB[tu, B_MOBILE]:
                    p = p + jitter[e, u, c]
                if p < 0.5:
                    p = 0.5
                if p > 31.5:
                    p = 31.5
                pos[e, u, c] = np.float32(p)
            health[e, u] = TF[tu, F_HMAX]
            shield[e, u] = TF[tu, F_SMAX]
            cooldown[e, u] = 0.0
            energy[e, u] = energy0 if TB[tu, B_HEALER] else _Z
            since_dmg[e, u] = 0.0
            ua[e, u] = True
            fired_at[e, u] = -1
        for m in range(M):
            min_hp[e, m] = health[e, A + m] + shield[e, A + m]
            enemy_last[e, m] = -1
            enemy_goal[e, m, 0] = goal - pos[e, A + m, 0]
            enemy_goal[e, m, 1] = goal - pos[e, A + m, 1]
        ef[0, e] = (_pw_sum(min_hp[e], 0, M) + death_total) + win  # max return before scaling
        ef[1, e] = 0.0
        ef[2, e] = 0.0
        ei[0, e] = 0
        ei[1, e] = 0
        eb[0, e] = False
        for a in range(A):
            at[0, e, a] = False
            at[1, e, a] = False
            last_action[e, a] = 0
    found = False
    for i in range(ids.shape[0]):  # every unit of a reset env lives: ua is the push-apart's live mask
        if _push_sums(ids[i], pos, typ, ua, TF, TB, sx, sy):
            found = True
    if found:
        for i in range(ids.shape[0]):
            e = ids[i]
            for u in range(Un):
                pos[e, u, 0] += np.float32(sx[e, u])
                pos[e, u, 1] += np.float32(sy[e, u])
        for e in range(E):  # numpy clamped every env (a no-op for the others unless walls disagree with the map)
            _constrain_env(e, pos, typ, TF, walls)
    if icfg[9]:
        for i in range(ids.shape[0]):
            _record(ids[i], typ, pos, uf, ua, fired_at, ei, rpf, rpb, rpi)
    sel = ids[:0] if observe_all else ids  # an empty selection observes every env
    observe(sel, typ, pos, uf, ua, eb, last_action, TF, TB, type_bit, walls, icfg, masks, obs)


# ----------------------------------------------------------------------------- step
@njit(cache=True, error_model="numpy")
def _enemy_env(e, A, typ, pos, health, ua, over, enemy_last, enemy_goal, kc, TF, TB, act_all, vis):
    """SMAX's heuristic for env ``e``'s enemies into ``act_all[e, A:]`` (each in its own action layout)."""
    Un = typ.shape[1]
    M = Un - A
    # the [M, A] block of uniform draws comes first in the env's counter stream (as numpy drew it); only the
    # values a decision reads are computed (random access), then the counter skips the block
    key = kc[0, e]
    base = kc[1, e]
    kh = min(M, A)
    ov = over[e]
    for m in range(M):
        um = A + m
        tm = typ[e, um]
        sight = TF[tm, F_SIGHT]
        rfe = TF[tm, F_RANGE_EF]
        xe = pos[e, um, 0]
        ye = pos[e, um, 1]
        last = enemy_last[e, m]
        best_a = 0
        best_d = _INF32
        can_shoot = False
        last_ok = False
        can_see = False
        for a in range(A):
            dx = pos[e, a, 0] - xe
            dy = pos[e, a, 1] - ye
            d = np.sqrt(dx * dx + dy * dy)
            v = ua[e, a] and d < sight
            vis[a] = v
            if v:
                can_see = True
                if d < rfe:
                    can_shoot = True
                    if d < best_d:
                        best_d = d
                        best_a = a
                    if a == last:
                        last_ok = True
        tgt = last if last_ok else best_a
        enemy_last[e, m] = tgt if can_shoot else -1
        if can_shoot:
            act = N_MOVE + tgt
        else:
            if can_see:
                # a random visible ally: first maximum of where(vis, u, -1) (read only when it decides the move)
                pick = 0
                pv = _draw(key, base, m * A) if vis[0] else np.float32(-1.0)
                for a in range(1, A):
                    val = _draw(key, base, m * A + a) if vis[a] else np.float32(-1.0)
                    if val > pv:
                        pv = val
                        pick = a
                gx = pos[e, pick, 0] - xe
                gy = pos[e, pick, 1] - ye
            else:
                gx = enemy_goal[e, m, 0] - xe
                gy = enemy_goal[e, m, 1] - ye
            act = _best_dir(gx, gy)
        if TB[tm, B_HEALER]:
            rh = TF[tm, F_RANGE]
            best = 0
            bhf = _INF32
            anyc = False
            for j in range(kh):
                uj = A + j
                tj = typ[e, uj]
                if not ua[e, uj] or not TB[tj, B_BIO] or j == m:
                    continue
                dx = xe - pos[e, uj, 0]
                dy = ye - pos[e, uj, 1]
                hf = health[e, uj] / TF[tj, F_HMAX]
                if np.sqrt(dx * dx + dy * dy) < rh and hf < _ONE:
                    anyc = True
                    if hf < bhf:
                        bhf = hf
                        best = j
            if anyc:
                act = N_MOVE + best
            else:
                cnt = _Z
                cx = _Z
                cy = _Z
                for j in range(M):
                    uj = A + j
                    fj = np.float32(1.0) if (ua[e, uj] and not TB[typ[e, uj], B_HEALER]) else _Z
                    cnt += fj
                    cx += pos[e, uj, 0] * fj
                    cy += pos[e, uj, 1] * fj
                if cnt > _Z:
                    den = cnt if cnt > _ONE else _ONE
                    act = _best_dir(cx / den - xe, cy / den - ye)
                else:
                    act = STOP
        if not (ua[e, um] and not ov):
            act = NOOP
        act_all[e, um] = act
    kc[1, e] = base + np.uint64(M * A)


@njit(cache=True, error_model="numpy")
def step(act_in, masks, typ, pos, uf, ua, min_hp, ef, ei, eb, at, last_action, enemy_last, enemy_goal, fired_at, kc,
         TF, TB, HIT, type_bit, walls, icfg, consts, obs, reward, wf32, wf64, wi64, wb, rpf, rpb, rpi):
    """One agent step (8 ticks) of every running env, then the observation and masks of every env.

    ``act_in`` int64 ``[E, A]``; ``masks`` the current masks (overwritten with the next ones). Writes ``obs``,
    ``reward`` float32 ``[E, A]``, the step's info terms in ``ef[3:7]``, ``ei[2]`` and ``eb[1:3]`` (see
    ``SMACCore.__init__``), and the replay frame of every running env when recording (``icfg[9]``).
    ``consts`` float32: ``[heal per tick, energy regen per tick, shield regen per tick, shield regen delay s,
    jitter low, jitter span, tick s, reward_negative_scale]``. ``wf32``, ``wf64``, ``wi64``, ``wb``: work arrays (``SMACCore`` sizes
    them). Returns -1, or ``e * A + i`` of the first action out of range (then nothing changed).
    """
    E, Un = typ.shape
    A = icfg[6]
    limit = icfg[7]
    sparse = icfg[8]
    M = Un - A
    nact = N_MOVE + M
    for e in range(E):
        for i in range(A):
            a = act_in[e, i]
            if a < 0 or a >= nact:
                return e * A + i
    health, shield, cooldown, energy, since_dmg = uf[0], uf[1], uf[2], uf[3], uf[4]
    over, won_out, active_out = eb[0], eb[1], eb[2]
    term, trunc = at[0], at[1]
    tcount, result, invalid_out = ei[0], ei[1], ei[2]
    max_reward, dmg_dealt, dmg_taken = ef[0], ef[1], ef[2]
    heal_tick, energy_tick, shield_tick, shield_delay = consts[0], consts[1], consts[2], consts[3]
    jit_lo, jit_span, tick_s = consts[4], consts[5], consts[6]
    neg_scale = np.float64(consts[7])
    only_pos = icfg[11] != 0
    ticks = 8
    # work arrays
    hp_before = wf32[:, ticks * Un:(ticks + 1) * Un]
    dist_t = wf32[:, (ticks + 1) * Un:(ticks + 2) * Un]
    o = (ticks + 2) * Un  # row 0 beyond the per-env columns holds per-env temporaries (see work_sizes)
    amount = wf32[0, o + M * A:o + M * A + Un]
    loss = wf32[0, o + M * A + Un:o + M * A + 2 * Un]
    dmin = wf32[0, o + M * A + 2 * Un:o + M * A + 2 * Un + M]
    sx = wf64[0:E]
    sy = wf64[E:2 * E]
    direct = wf64[2 * E]
    splash = wf64[2 * E + 1]
    got = wf64[2 * E + 2]
    frac = wf64[2 * E + 3]
    act_all = wi64[0]
    tgt = wi64[1]
    enemy_alive0 = wb[0]
    slot0 = wb[1]
    fire = wb[2]
    heal = wb[3]
    live = wb[4]
    vis = wb[5, 0]

    any_heal_t = False
    for e in range(E):
        for u in range(Un):
            if TB[typ[e, u], B_HEALER]:
                any_heal_t = True

    # ---- actions
    for e in range(E):
        active = not over[e]
        active_out[e] = active
        inv = 0
        for i in range(A):
            sa = ua[e, i] and active
            a = act_in[e, i]
            if sa and not masks[e, i, a]:
                a = STOP
                inv += 1
            if not sa:
                a = NOOP
            act_all[e, i] = a
            if active:
                last_action[e, i] = a
            slot0[e, i] = sa
        invalid_out[e] = inv
        _enemy_env(e, A, typ, pos, health, ua, over, enemy_last, enemy_goal, kc, TF, TB, act_all, vis)
        # the [8, U] block of cooldown jitter draws follows; a value is computed when a unit fires (random access)
        kc[1, e] = kc[1, e] + np.uint64(ticks * Un)
        for u in range(Un):
            tu = typ[e, u]
            fired_at[e, u] = -1
            hp_before[e, u] = health[e, u] + shield[e, u]
            a = act_all[e, u]
            tgt[e, u] = -1
            if a >= N_MOVE:
                if u < A:
                    tgt[e, u] = a - N_MOVE + (0 if TB[tu, B_HEALER] else A)
                else:
                    tgt[e, u] = a - N_MOVE + (A if TB[tu, B_HEALER] else 0)
        for m in range(M):
            enemy_alive0[e, m] = ua[e, A + m]

    # ---- ticks
    for k in range(ticks):
        n_fire = 0
        any_heal_now = False
        for e in range(E):
            active = not over[e]
            for u in range(Un):
                live[e, u] = ua[e, u] and active
            # move
            if active:
                for u in range(Un):
                    if live[e, u]:
                        a = act_all[e, u]
                        if a >= NORTH and a <= WEST:
                            st = TF[typ[e, u], F_SPEED_TICK]
                            if a == NORTH:
                                pos[e, u, 1] += st
                            elif a == SOUTH:
                                pos[e, u, 1] += -st
                            elif a == EAST:
                                pos[e, u, 0] += st
                            else:
                                pos[e, u, 0] += -st
            _constrain_env(e, pos, typ, TF, walls)
            # who fires / heals
            env_fire = False
            env_splash = False
            for u in range(Un):
                fire[e, u] = False
                heal[e, u] = False
                tt = tgt[e, u]
                if tt < 0 or not live[e, u] or not ua[e, tt]:
                    continue
                tu = typ[e, u]
                dx = pos[e, u, 0] - pos[e, tt, 0]
                dy = pos[e, u, 1] - pos[e, tt, 1]
                d = np.sqrt(dx * dx + dy * dy)
                dist_t[e, u] = d
                if d < TF[tu, F_RANGE]:
                    if TB[tu, B_HEALER]:
                        heal[e, u] = True
                        any_heal_now = True
                    elif cooldown[e, u] <= _Z:
                        fire[e, u] = True
                        env_fire = True
                        n_fire += 1
                        if TB[tu, B_SPLASHY]:
                            env_splash = True
            if env_fire:
                for v in range(Un):
                    direct[v] = 0.0
                    splash[v] = 0.0
                for u in range(Un):
                    if fire[e, u]:
                        tt = tgt[e, u]
                        direct[tt] += HIT[typ[e, u], typ[e, tt]]
                if env_splash:
                    for u in range(Un):
                        if not (fire[e, u] and TB[typ[e, u], B_SPLASHY]):
                            continue
                        tu = typ[e, u]
                        tt = tgt[e, u]
                        cx = pos[e, tt, 0]
                        cy = pos[e, tt, 1]
                        bane = TB[tu, B_SUICIDE]
                        du = dist_t[e, u]
                        if du < _EPS6:
                            du = _EPS6
                        dirx = (cx - pos[e, u, 0]) / du
                        diry = (cy - pos[e, u, 1]) / du
                        px = -diry
                        py = dirx
                        u_enemy = u >= A
                        for v in range(Un):
                            if (v >= A) == u_enemy or not live[e, v] or v == tt:
                                continue
                            vx = pos[e, v, 0]
                            vy = pos[e, v, 1]
                            relx = vx - cx
                            rely = vy - cy
                            if bane:
                                hitv = np.sqrt(relx * relx + rely * rely) <= np.float32(2.2)
                            else:
                                along = relx * px + rely * py
                                if along < np.float32(-1.4):
                                    along = np.float32(-1.4)
                                if along > np.float32(1.4):
                                    along = np.float32(1.4)
                                gx = vx - (cx + along * px)
                                gy = vy - (cy + along * py)
                                hitv = np.sqrt(gx * gx + gy * gy) <= TF[typ[e, v], F_RADIUS]
                            if hitv:
                                splash[v] += HIT[tu, typ[e, v]]
                    for u in range(Un):
                        if fire[e, u] and TB[typ[e, u], B_SUICIDE]:
                            health[e, u] = 0.0
                for v in range(Un):
                    dmg = np.float32(direct[v] + splash[v])
                    absorbed = shield[e, v] if shield[e, v] < dmg else dmg
                    shield[e, v] -= absorbed
                    health[e, v] -= dmg - absorbed
                    if dmg > _Z:
                        since_dmg[e, v] = 0.0
                    if health[e, v] < _Z:
                        health[e, v] = 0.0
                for u in range(Un):
                    if fire[e, u]:
                        fired_at[e, u] = tgt[e, u]
        # healing (numpy ran this pass over the whole batch whenever some medivac healed)
        if any_heal_now:
            for e in range(E):
                for v in range(Un):
                    got[v] = 0.0
                for u in range(Un):
                    en = energy[e, u] * np.float32(3.0)
                    am = heal_tick if heal_tick < en else en
                    amount[u] = am * (np.float32(1.0) if heal[e, u] else _Z)
                    if heal[e, u]:
                        got[tgt[e, u]] += amount[u]
                for v in range(Un):
                    room = np.float64(TF[typ[e, v], F_HMAX] - health[e, v])
                    g = got[v]
                    ap = (g if g < room else room) * (1.0 if ua[e, v] else 0.0)
                    frac[v] = ap / (g if g > 1e-9 else 1e-9) if g > 0 else 0.0
                    health[e, v] += np.float32(ap)
                for u in range(Un):
                    tt = tgt[e, u] if tgt[e, u] >= 0 else 0
                    spent = np.float64(amount[u]) * frac[tt]
                    energy[e, u] -= np.float32(spent / 3.0)
                    if heal[e, u]:
                        fired_at[e, u] = tgt[e, u]
        for e in range(E):
            ta_e = tick_s if not over[e] else _Z  # numpy's tick * active
            for u in range(Un):
                tu = typ[e, u]
                if any_heal_t:
                    g = energy_tick * (np.float32(1.0) if (TB[tu, B_HEALER] and live[e, u]) else _Z)
                    en = energy[e, u] + g
                    energy[e, u] = en if en < np.float32(200.0) else np.float32(200.0)
                # cooldowns (restart at base + jitter after firing, else count down)
                cooldown[e, u] -= ta_e
                if fire[e, u]:  # base + jitter draw [k, u] of this step's block (the counter moved past it)
                    jit = jit_lo + jit_span * _draw(kc[0, e], kc[1, e] - np.uint64(ticks * Un), k * Un + u)
                    cooldown[e, u] = TF[tu, F_BASE_CD] + jit
                # shields regenerate after a delay without damage
                since_dmg[e, u] += ta_e
                if live[e, u] and TB[tu, B_HAS_SHIELD] and since_dmg[e, u] >= shield_delay:
                    sh = shield[e, u] + shield_tick
                    smax = TF[tu, F_SMAX]
                    shield[e, u] = sh if sh < smax else smax
            if n_fire:  # only damage kills
                active = not over[e]
                for u in range(Un):
                    if ua[e, u] and not health[e, u] > _Z:
                        ua[e, u] = False
                    live[e, u] = ua[e, u] and active
        # push-apart of overlapping living units (numpy clamped the whole batch when some pair overlapped)
        found = False
        for e in range(E):
            if _push_sums(e, pos, typ, live, TF, TB, sx, sy):
                found = True
        if found:
            _apply_push(pos, typ, TF, walls, sx, sy)

    # ---- bookkeeping after the 8 ticks
    death_r = 10.0
    win_r = 200.0
    scale_r = 20.0
    for e in range(E):
        active = not over[e]
        actf = np.float32(1.0) if active else _Z
        for u in range(Un):
            l = hp_before[e, u] - (health[e, u] + shield[e, u])
            if l < _Z:
                l = _Z
            loss[u] = l * actf
        dmg_dealt[e] += _pw_sum(loss, A, M)
        dmg_taken[e] += _pw_sum(loss, 0, A)
        kills = 0
        for m in range(M):
            um = A + m
            ehp = (health[e, um] + shield[e, um]) if ua[e, um] else _Z
            mn = min_hp[e, m]
            nm = mn if mn < ehp else ehp
            dmin[m] = mn - nm
            min_hp[e, m] = nm
            if enemy_alive0[e, m] and not ua[e, um]:
                kills += 1
        r_damage = _pw_sum(dmin, 0, M) * actf
        if not active:
            kills = 0
        allies_gone = True
        enemies_gone = True
        for u in range(Un):
            if ua[e, u] and not TB[typ[e, u], B_HEALER]:
                if u < A:
                    allies_gone = False
                else:
                    enemies_gone = False
        ended = active and (allies_gone or enemies_gone)
        win = ended and enemies_gone and not allies_gone
        lost = ended and allies_gone and not enemies_gone
        if active:
            tcount[e] += 1
        timeout = active and not ended and tcount[e] >= limit
        if win:
            result[e] = 1
        elif lost:
            result[e] = -1
        if sparse:
            team = (np.float32(1.0) if win else _Z) - (np.float32(1.0) if lost else _Z)
        elif only_pos:
            team = np.float32(((np.float64(r_damage) + death_r * kills) + win_r * (1.0 if win else 0.0))
                              / np.float64(max_reward[e]) * scale_r)
        else:  # SMAC's reward_only_positive=False: minus neg_scale x (damage taken + 10 per ally lost)
            ally_lost = 0
            if active:
                for a in range(A):
                    if slot0[e, a] and not ua[e, a]:
                        ally_lost += 1
            r_taken = np.float64(_pw_sum(loss, 0, A))
            team = np.float32((((np.float64(r_damage) + death_r * kills) + win_r * (1.0 if win else 0.0))
                               - neg_scale * (r_taken + death_r * ally_lost)) / np.float64(max_reward[e]) * scale_r)
        team = team * actf
        for a in range(A):
            reward[e, a] = team * (np.float32(1.0) if slot0[e, a] else _Z)
            dead_now = (not ua[e, a]) and active
            term[e, a] = term[e, a] or dead_now or ended
            trunc[e, a] = trunc[e, a] or (timeout and not term[e, a])
        over[e] = over[e] or ended or timeout
        if sparse:
            kf = 0.0
            ef[3, e] = np.float32(np.float64(r_damage) * kf)
        else:
            kf32 = (np.float32(scale_r) / max_reward[e]) * actf
            kf = np.float64(kf32)
            ef[3, e] = r_damage * kf32
        ef[4, e] = np.float32((kills * death_r) * kf)
        ef[5, e] = np.float32(((1.0 if win else 0.0) * win_r) * kf)
        ef[6, e] = team
        won_out[e] = win
        if active and icfg[9]:
            _record(e, typ, pos, uf, ua, fired_at, ei, rpf, rpb, rpi)

    for e in range(E):
        observe_env(e, typ, pos, uf, ua, over, last_action, TF, TB, type_bit, walls, icfg, masks, obs)
    return -1


def work_sizes(E: int, A: int, M: int) -> dict[str, tuple[int, ...]]:
    """Shapes of :func:`step`'s work arrays for ``E`` envs of ``A`` allies and ``M`` enemies."""
    Un = A + M
    return {"wf32": (E, 10 * Un + M * A + 2 * Un + M), "wf64": (2 * E + 4, Un), "wi64": (2, E, Un), "wb": (6, E, Un)}

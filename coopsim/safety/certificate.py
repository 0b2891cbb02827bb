"""Factored safety certificates over the coupling graph, and the greedy repair that uses them.

A joint action ``a`` is *certified* at a state when every combination of plausible outcomes of the
agents of every constraint satisfies it, and all-stay from every such outcome is safe at the next
step. For the built-in constraints the second condition follows from the first: they are predicates
on positions/loads after the step (plus swaps, which all-stay never makes), and the stay action never
slips, so all-stay from a safe state keeps it. Both are checked by the same tables.

Factorization: a pairwise constraint ``(i, j)`` becomes a table ``ok[m, a_i, a_j]`` (``A x A``
entries, each checking ``K x K`` outcome pairs); a resource cap over group ``g`` needs only each
member's worst-case load ``w_i[a] = max_k load(i, a, k)`` over its plausible outcomes, because the
worst combination of independent members is the sum of their worst cases. Building the certificate
costs ``O(M A^2 K^2 + N A K)`` for ``M`` active pairs; checking one joint action costs ``O(M + N)``;
repairing it touches only the neighbourhoods of the agents it changes. Separation pairs are active
only when their plausible outcome sets can come within the separation distance (k-d tree query), so
with bounded density the cost is linear in ``N``.

Papers followed: the "certify a state-action only if every plausible successor is certifiably safe"
rule of single-agent zero-violation safe exploration (Turchetta et al., "Safe exploration in finite
Markov decision processes with Gaussian processes", NeurIPS 2016; Wachi & Sui, ICML 2020), factored
over agents as in factored shields for MARL (ElSayed-Aly et al., "Safe multi-agent reinforcement
learning via shielding", AAMAS 2021), which need a known model; here the model is a confidence set.
"""
from __future__ import annotations

from itertools import product

import numpy as np
from scipy.spatial import cKDTree

from coopsim.safety.constraints import KeepConnected, PairConstraint, ResourceCap
from coopsim.safety.graph import CouplingGraph
from coopsim.safety.state import SafetyState

_CHUNK = 2048


class SafetyCertificate:
    """Certificate of one env's joint actions under given plausible outcome sets.

    Args:
        state: a single-env :class:`SafetyState` (``E == 1``; use ``state.env(e)``).
        plausible: bool ``[N, A, K]`` plausible outcomes (default: the prior, ``state.outcome_mask[0]``);
            must be a subset of the prior.

    Attributes:
        pairs: int64 ``[M, 2]`` active pairwise constraints (``i < j``).
        pair_constraint: int64 ``[M]`` index into ``state.constraints`` of each pair.
        ok: bool ``[M, A, A]`` pair table: ``ok[m, a_i, a_j]`` certified for pair ``m``.
        worst_load: float64 ``[N, A]`` worst-case load after each action.
        groups: int64 ``[N]`` resource group of each agent (-1: none), caps float64 ``[G]``.
        graph: the :class:`CouplingGraph` of the active constraints.
    """

    def __init__(self, state: SafetyState, plausible: np.ndarray | None = None):
        if state.num_envs != 1:
            raise ValueError(f"SafetyCertificate works on one env; got E={state.num_envs} (use state.env(e))")
        self.state = state
        self.N, self.A = state.num_agents, state.num_actions
        self.stay = state.stay_action
        self.pos = state.positions[0]
        self.out = state.outcomes[0]
        self.mask = state.outcome_mask[0] if plausible is None else (np.asarray(plausible, bool) & state.outcome_mask[0])
        # reach: how far an agent's plausible outcomes can be from its position (for active-pair search)
        disp = np.sqrt(((self.out - self.pos[:, None, None, :]) ** 2).sum(-1))
        self.reach = np.where(self.mask, disp, 0.0).max(axis=(1, 2))
        pairs, cidx, names = [], [], []
        self.group_constraints: list[ResourceCap] = []
        for ci, c in enumerate(state.constraints):
            if isinstance(c, KeepConnected):
                p = c.tree_edges(self.pos)
            elif isinstance(c, PairConstraint):
                p = self._near_pairs(c)
            elif isinstance(c, ResourceCap):
                self.group_constraints.append(c)
                continue
            else:
                raise TypeError(f"unsupported constraint type {type(c).__name__}")
            pairs.append(p)
            cidx.append(np.full(len(p), ci, np.int64))
            names += [c.name] * len(p)
        self.pairs = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
        self.pair_constraint = np.concatenate(cidx) if cidx else np.zeros(0, np.int64)
        self.ok = self._pair_tables()
        # resource caps: one hyperedge per group
        loads = np.where(self.mask, state.outcome_loads[0], -np.inf)
        self.worst_load = loads.max(-1)
        self.group_of: list[np.ndarray] = []  # per ResourceCap constraint: group id per agent
        self.caps: list[np.ndarray] = []
        hyper = []
        for c in self.group_constraints:
            g = c.group_array(self.N)
            self.group_of.append(g)
            self.caps.append(c.cap_array())
            for gi in range(len(c.caps)):
                hyper.append((c.name, np.flatnonzero(g == gi)))
        self.graph = CouplingGraph(self.N, self.pairs, names, hyper)
        # incidence lists: pairs touching each agent (CSR)
        ends = np.concatenate([self.pairs[:, 0], self.pairs[:, 1]])
        pid = np.concatenate([np.arange(len(self.pairs))] * 2)
        order = np.argsort(ends, kind="stable")
        self._inc_pairs = pid[order]
        self._inc_ptr = np.searchsorted(ends[order], np.arange(self.N + 1))

    # --- construction ---------------------------------------------------------------------------
    def _near_pairs(self, c: PairConstraint) -> np.ndarray:
        idx = c.members(self.N)
        if len(idx) < 2:
            return np.zeros((0, 2), np.int64)
        r = c.interaction_radius()
        pts = self.pos[idx]
        if not np.isfinite(r):
            ii, jj = np.triu_indices(len(idx), 1)
            p = np.stack([idx[ii], idx[jj]], 1)
        else:
            # two agents interact only if their plausible outcomes can come within r of each other,
            # or if they can swap (outcome of one within reach of the other's position)
            search = 2.0 * float(self.reach[idx].max(initial=0.0)) + r
            p = cKDTree(pts).query_pairs(search + 1e-9, output_type="ndarray")
            if p.size == 0:
                return np.zeros((0, 2), np.int64)
            p = idx[np.sort(p, 1)]
            d = np.sqrt(((self.pos[p[:, 0]] - self.pos[p[:, 1]]) ** 2).sum(-1))
            p = p[d <= self.reach[p[:, 0]] + self.reach[p[:, 1]] + r + 1e-9]
        p = np.sort(p, 1)
        return p[np.lexsort((p[:, 1], p[:, 0]))].astype(np.int64)

    def _pair_tables(self) -> np.ndarray:
        M, A = len(self.pairs), self.A
        ok = np.ones((M, A, A), bool)
        cons = self.state.constraints
        for start in range(0, M, _CHUNK):
            sl = slice(start, min(M, start + _CHUNK))
            i, j = self.pairs[sl, 0], self.pairs[sl, 1]
            oi = self.out[i][:, :, None, :, None, :]  # [m, A, 1, K, 1, d]
            oj = self.out[j][:, None, :, None, :, :]  # [m, 1, A, 1, K, d]
            pi = self.pos[i][:, None, None, None, None, :]
            pj = self.pos[j][:, None, None, None, None, :]
            both = self.mask[i][:, :, None, :, None] & self.mask[j][:, None, :, None, :]
            bad = np.zeros(both.shape, bool)
            for ci in np.unique(self.pair_constraint[sl]):
                sel = self.pair_constraint[sl] == ci
                bad[sel] = cons[ci].violates(pi[sel], oi[sel], pj[sel], oj[sel])
            ok[sl] = ~(bad & both).any(axis=(-1, -2))
        return ok

    # --- checking -------------------------------------------------------------------------------
    def pair_ok(self, joint: np.ndarray) -> np.ndarray:
        """bool ``[..., M]``: each active pair certified under joint actions ``joint`` int ``[..., N]``."""
        m = np.arange(len(self.pairs))
        return self.ok[m, joint[..., self.pairs[:, 0]], joint[..., self.pairs[:, 1]]]

    def group_load(self, joint: np.ndarray) -> list[np.ndarray]:
        """Worst-case summed load per group, one float64 ``[..., G]`` per resource constraint."""
        w = np.take_along_axis(np.broadcast_to(self.worst_load, joint.shape + (self.A,)), joint[..., None], -1)[..., 0]
        res = []
        for g, caps in zip(self.group_of, self.caps):
            onehot = (g[:, None] == np.arange(len(caps))[None, :]).astype(np.float64)
            res.append(w @ onehot)
        return res

    def certified(self, joint: np.ndarray) -> np.ndarray:
        """bool ``[...]``: joint actions int ``[..., N]`` certified (every constraint, every plausible outcome)."""
        joint = np.asarray(joint, np.int64)
        good = self.pair_ok(joint).all(-1)
        for load, caps in zip(self.group_load(joint), self.caps):
            good = good & (load <= caps + 1e-9).all(-1)
        return good

    def violated_agents(self, joint: np.ndarray) -> np.ndarray:
        """int64 ``[N]``: number of uncertified hyperedges each agent takes part in under ``joint`` ``[N]``."""
        cnt = np.zeros(self.N, np.int64)
        bad = ~self.pair_ok(joint)
        np.add.at(cnt, self.pairs[bad, 0], 1)
        np.add.at(cnt, self.pairs[bad, 1], 1)
        for load, caps, g in zip(self.group_load(joint), self.caps, self.group_of):
            over = load > caps + 1e-9
            cnt += np.where(g >= 0, over[np.clip(g, 0, None)], False).astype(np.int64)
        return cnt

    def _local_ok(self, i: int, joint: np.ndarray, loads: list[np.ndarray]) -> np.ndarray:
        """bool ``[A]``: actions of agent ``i`` certified with every hyperedge of ``i``, others fixed."""
        good = np.ones(self.A, bool)
        pids = self._inc_pairs[self._inc_ptr[i]:self._inc_ptr[i + 1]]
        if len(pids):
            p = self.pairs[pids]
            first = p[:, 0] == i
            other = np.where(first, p[:, 1], p[:, 0])
            tab = self.ok[pids]  # [q, A, A]
            rows = np.where(first[:, None], tab[np.arange(len(pids)), :, joint[other]],
                            tab[np.arange(len(pids)), joint[other], :])
            good &= rows.all(0)
        for load, caps, g in zip(loads, self.caps, self.group_of):
            if g[i] >= 0:
                rest = load[g[i]] - self.worst_load[i, joint[i]]
                good &= rest + self.worst_load[i] <= caps[g[i]] + 1e-9
        return good

    # --- repair ---------------------------------------------------------------------------------
    def default_preference(self, joint: np.ndarray) -> np.ndarray:
        """float ``[N, A]``: prefer actions whose intended next state is close to the proposed one's."""
        intended = self.state.intended[0]
        prop = intended[np.arange(self.N), joint]  # [N, d]
        return -np.sqrt(((intended - prop[:, None, :]) ** 2).sum(-1))

    def repair(self, joint: np.ndarray, preference: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Greedy deterministic repair of a proposed joint action.

        Keeps ``joint`` if certified. Otherwise repeatedly takes the agent in the most uncertified
        hyperedges (ties: lowest index) among those not yet fixed to stay, and gives it the most
        preferred action (``preference`` float ``[N, A]``, higher first; ties: lowest action)
        certified with all its hyperedges given the others' current actions; if it has none, or it
        is being repaired a third time, it stays (and is never changed again). Each agent is
        changed at most three times, so the loop ends after at most ``3 N`` changes; it touches
        only neighbourhoods of changed agents.

        Args:
            joint: int64 ``[N]`` proposed joint action (not modified).
            preference: float ``[N, A]`` scores; default :meth:`default_preference`.

        Returns:
            ``(safe_joint, changed)``: int64 ``[N]`` new array, bool ``[N]`` agents whose action differs.
        """
        joint = np.array(joint, dtype=np.int64, copy=True)
        orig = joint.copy()
        if self.certified(joint):
            return joint, np.zeros(self.N, bool)
        pref = self.default_preference(orig) if preference is None else np.asarray(preference, np.float64)
        viol = self.violated_agents(joint)
        frozen = np.zeros(self.N, bool)
        visits = np.zeros(self.N, np.int64)
        loads = self.group_load(joint)
        while True:
            cand = np.flatnonzero((viol > 0) & ~frozen)
            if len(cand) == 0:
                break
            i = int(cand[np.lexsort((cand, -viol[cand]))[0]])
            visits[i] += 1
            good = self._local_ok(i, joint, loads)
            if visits[i] >= 3 or not good.any():
                new = self.stay
                frozen[i] = True
            else:
                acts = np.flatnonzero(good)
                new = int(acts[np.lexsort((acts, -pref[i, acts]))[0]])
                if new == self.stay:
                    frozen[i] = True
            if new != joint[i]:
                for load, g in zip(loads, self.group_of):
                    if g[i] >= 0:
                        load[g[i]] += self.worst_load[i, new] - self.worst_load[i, joint[i]]
                joint[i] = new
            # recompute violation counts locally: i and its neighbours
            touched = np.concatenate([[i], self.graph.neighbours(i)])
            viol_all = self.violated_agents(joint) if len(touched) > 64 else None
            if viol_all is not None:
                viol = viol_all
            else:
                viol[touched] = self._count_local(touched, joint, loads)
        return joint, joint != orig

    def _count_local(self, agents: np.ndarray, joint: np.ndarray, loads: list[np.ndarray]) -> np.ndarray:
        out = np.zeros(len(agents), np.int64)
        for n, i in enumerate(agents):
            pids = self._inc_pairs[self._inc_ptr[i]:self._inc_ptr[i + 1]]
            if len(pids):
                p = self.pairs[pids]
                out[n] += int((~self.ok[pids, joint[p[:, 0]], joint[p[:, 1]]]).sum())
            for load, caps, g in zip(loads, self.caps, self.group_of):
                if g[i] >= 0 and load[g[i]] > caps[g[i]] + 1e-9:
                    out[n] += 1
        return out

    # --- maximization over certified joint actions --------------------------------------------
    def maximize(self, scores: np.ndarray, max_enumerate: int = 3125) -> tuple[np.ndarray, bool]:
        """Joint action maximizing ``sum_i scores[i, a_i]`` over certified joint actions.

        Exact per coupling-graph component (the team value is a sum of per-agent terms and the
        constraints are hyperedges, so components are independent): a component whose joint action
        space has at most ``max_enumerate`` entries is solved by enumeration; a larger one by the
        greedy :meth:`repair` of the per-agent argmax with ``scores`` as preference.

        Args:
            scores: float ``[N, A]`` per-agent action values (higher is better).

        Returns:
            ``(joint int64 [N], exact)``; ``exact`` is False if some component used the greedy repair.
        """
        scores = np.asarray(scores, np.float64)
        joint = np.argmax(scores, axis=1).astype(np.int64)  # ties: lowest action
        exact = True
        comps = self.graph.components()
        big: list[np.ndarray] = []
        # singleton components: best action whose own worst-case load fits its group's cap
        for comp in comps:
            if len(comp) == 1:
                i = int(comp[0])
                base = joint.copy()
                loads = self.group_load(base)
                good = self._local_ok(i, base, loads)
                if not good.any():
                    good[self.stay] = True
                acts = np.flatnonzero(good)
                joint[i] = int(acts[np.lexsort((acts, -scores[i, acts]))[0]])
            elif self.A ** len(comp) <= max_enumerate:
                cand = np.array(list(product(range(self.A), repeat=len(comp))), np.int64)  # [B, n] lexicographic
                full = np.broadcast_to(joint, (len(cand), self.N)).copy()
                full[:, comp] = cand
                sel = np.isin(self.pairs, comp).all(1)
                m = np.flatnonzero(sel)
                good = self.ok[m, full[:, self.pairs[m, 0]], full[:, self.pairs[m, 1]]].all(-1)
                w = self.worst_load[comp, cand]  # [B, n]
                for g, caps in zip(self.group_of, self.caps):
                    gc = g[comp]
                    for gi in np.unique(gc[gc >= 0]):
                        good &= w[:, gc == gi].sum(-1) <= caps[gi] + 1e-9
                val = np.where(good, scores[comp, cand].sum(-1), -np.inf)
                if not good.any():  # current state unsafe: all-stay
                    joint[comp] = self.stay
                else:
                    joint[comp] = cand[int(np.argmax(val))]
            else:
                big.append(comp)
        if big:
            exact = False
            fixed, _ = self.repair(joint, preference=scores)
            for comp in big:
                joint[comp] = fixed[comp]
        return joint, exact

"""One registry, the single source of truth for every component (after Gymnasium's registration).

Components are declared as entry points in ``pyproject.toml`` under four groups:
``coopsim.scenarios``, ``coopsim.agents``, ``coopsim.channels``, ``coopsim.shields``. Each entry's
name is a versioned id (``family/Name-vN``, e.g. ``mapf/MGMAPF-v0``) and its value a lazy
``"module:attr"`` reference to a factory (a class, or a :class:`Variant` that fixes some params of
one). The CLI, the docs and the tests enumerate the registry and nothing else; third-party packages
add components by declaring entry points of their own.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ValidationError

from coopsim.errors import ConfigError, CrossKeyError, RegistryError, value_text

KINDS = {"scenario": "coopsim.scenarios", "agent": "coopsim.agents", "channel": "coopsim.channels", "shield": "coopsim.shields"}
ID_RE = re.compile(r"^(?:[\w.-]+/)?[\w.+-]+-v\d+$")


@dataclass(frozen=True)
class Variant:
    """A registered id that is one class with some params fixed (e.g. ``smac/3m-v0`` = SMAC with ``map_name='3m'``).

    ``defaults`` are applied first; user params override them unless listed in ``fixed``.
    """

    cls: type
    defaults: dict[str, Any] = field(default_factory=dict)
    fixed: tuple[str, ...] = ()

    @property
    def Params(self) -> type[BaseModel]:  # noqa: N802 - mirrors the class attribute
        return self.cls.Params

    def __call__(self, *args: Any, **params: Any) -> Any:
        """Build ``cls`` with ``defaults`` under ``params``; a ``fixed`` param given another value is refused, as
        :func:`make_scenario` / :func:`make_component` refuse it (``Grid4x4(height=5)`` is not a 4x4 grid).

        Raises:
            ConfigError: key ``<k>``, naming the id that fixes it and the id to use instead.
        """
        _check_fixed(self, params)
        return self.cls(*args, **{**self.defaults, **params})


@dataclass(frozen=True)
class Spec:
    """A registry entry: its kind, id, and lazy ``module:attr`` reference."""

    kind: str
    id: str
    entry_point: str

    def load(self) -> Any:
        try:
            return _load_ep(self.kind, self.id)
        except (ImportError, AttributeError) as exc:  # a broken or optional component
            from coopsim.errors import DependencyNotInstalled

            raise DependencyNotInstalled(f"{self.kind} '{self.id}' ({self.entry_point}) could not be loaded: {exc}") from exc

    @property
    def Params(self) -> type[BaseModel]:  # noqa: N802
        return self.load().Params

    def doc(self) -> str:
        """First docstring line of the component; for a :class:`Variant`, followed by the params it fixes."""
        obj = self.load()
        cls = obj.cls if isinstance(obj, Variant) else obj
        first = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        if isinstance(obj, Variant) and obj.defaults:
            first += "  [" + ", ".join(f"{k}={v!r}" for k, v in obj.defaults.items()) + "]"
        return first


def _eps(kind: str):
    if kind not in KINDS:
        raise RegistryError(f"unknown component kind '{kind}'; valid kinds: {', '.join(KINDS)}")
    return entry_points(group=KINDS[kind])


def _load_ep(kind: str, id_: str) -> Any:
    for ep in _eps(kind):
        if ep.name == id_:
            return ep.load()
    raise _unknown(kind, id_)


def _unknown(kind: str, id_: str) -> RegistryError:
    ids = list_ids(kind)
    same_case = [i for i in ids if i.lower() == str(id_).strip().lower()]  # ids are lower case: RANDOM-V0
    close = same_case or difflib.get_close_matches(id_, ids, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    m = re.fullmatch(r"smac/((?:protoss|terran|zerg)_\d+_vs_\d+)-v0", str(id_).strip())
    if kind == "scenario" and m and "smac/SMAC-v0" in ids:  # a procedural map has no id of its own
        hint = (f" A map without its own id is reached through the generic one: scenario.id=smac/SMAC-v0 with "
                f"scenario.params.map_name={m.group(1)}.")
    return RegistryError(f"unknown {kind} id '{id_}'.{hint} Registered {kind} ids: {', '.join(ids) or '(none)'}")


def list_ids(kind: str) -> list[str]:
    """Sorted ids registered for ``kind`` (``scenario``, ``agent``, ``channel``, ``shield``)."""
    return sorted({ep.name for ep in _eps(kind)})


def specs(kind: str) -> list[Spec]:
    return [Spec(kind, ep.name, ep.value) for ep in sorted(_eps(kind), key=lambda e: e.name)]


def spec(kind: str, id_: str) -> Spec:
    for s in specs(kind):
        if s.id == id_:
            return s
    raise _unknown(kind, id_)


def validate_params(kind: str, id_: str, params: dict[str, Any], *, file: str | None = None, key_prefix: str = "") -> BaseModel:
    """Validate ``params`` against the component's ``Params`` schema.

    Raises:
        RegistryError: unknown id.
        ConfigError: a param is unknown or has an invalid value (names the key, the value and what is valid).
    """
    factory = spec(kind, id_).load()
    params = dict(params or {})
    if isinstance(factory, Variant):
        _check_fixed(factory, params, kind=kind, id_=id_, file=file, key_prefix=key_prefix)
        params = {**factory.defaults, **params}
    reject_bools(params, factory.Params, file=file, key_prefix=key_prefix)
    try:
        return factory.Params(**params)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, factory.Params, file=file, key_prefix=key_prefix, owner=f"'{id_}'") from None


def _check_fixed(factory: Variant, params: dict[str, Any], *, kind: str | None = None, id_: str | None = None,
                 file: str | None = None, key_prefix: str = "") -> None:
    """Refuse a param that ``factory`` fixes (``Variant.fixed``) given another value than its default.

    ``kind`` / ``id_``: the registered id (found in the registry when not given: a variant built directly in Python);
    named in the message with what to use instead (:func:`_fixed_hint`).

    Raises:
        ConfigError: key ``<key_prefix><k>``.
    """
    for k in factory.fixed:
        if k in params and params[k] != factory.defaults.get(k):
            if id_ is None:
                kind, id_ = _variant_id(factory)
            by = f"id '{id_}'" if id_ else f"this {factory.cls.__name__} variant"
            hint = _fixed_hint(kind, id_, factory, k, params[k], key_prefix) if id_ else ""
            raise ConfigError(f"'{k}' is fixed to {factory.defaults.get(k)!r} by {by}; got {params[k]!r}."
                              + (f" {hint}" if hint else ""), file=file, key=f"{key_prefix}{k}", value=params[k])


def _variant_id(factory: Variant) -> tuple[str | None, str | None]:
    """``(kind, id)`` under which ``factory`` is registered, or ``(None, None)``."""
    for kind in KINDS:
        for ep in sorted(_eps(kind), key=lambda e: e.name):
            try:
                if ep.load() is factory:
                    return kind, ep.name
            except Exception:  # noqa: BLE001 - an optional component that cannot be loaded here
                continue
    return None, None


def checked_params(model: type[BaseModel], params: dict[str, Any], owner: str) -> BaseModel:
    """``params`` validated as ``model`` with the checks a run config's component params get (a quoted number or
    boolean, :func:`coopsim.platform.config.reject_quoted_scalars`; :func:`reject_bools`;
    :func:`pydantic_to_config_error`), for a component built directly in Python (``MAPFCore(num_agents=0)``,
    ``MGMAPFCore(max_steps='3')``), so it refuses a bad param as ``coopsim validate`` does; ``owner`` names the
    class in the message.

    Raises:
        ConfigError: names the key, the value and what is valid (no file).
    """
    from coopsim.platform.config import reject_quoted_scalars

    reject_quoted_scalars(params, model)
    reject_bools(params, model)
    try:
        return model(**params)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, model, file=None, owner=owner) from None


def _fixed_hint(kind: str, id_: str, factory: Variant, k: str, value: Any, key_prefix: str) -> str:
    """What to do instead of setting a param an id fixes: pick the id that fixes it to ``value`` (listing the ids of
    the same family that fix ``k`` on the same class, e.g. every ``smac/<map>-v0``), or an id of the same class that
    leaves ``k`` free (e.g. ``coop_game/Grid-v0`` for any height). Only registered ids are named."""
    family = id_.split("/", 1)[0] + "/" if "/" in id_ else ""
    siblings: dict[Any, str] = {}
    sibling_fixed: dict[str, dict[str, Any]] = {}
    free: list[tuple[int, str, Any]] = []  # (preference, id, factory) of the ids that take any ``k``
    own = {f: factory.defaults.get(f) for f in factory.fixed if f != k}
    for ep in sorted(_eps(kind), key=lambda e: e.name):
        if family and not ep.name.startswith(family):
            continue
        try:
            f = ep.load()
        except Exception:
            continue
        if isinstance(f, Variant) and f.cls is factory.cls:
            if k in f.fixed:
                siblings.setdefault(f.defaults.get(k), ep.name)
                sibling_fixed[ep.name] = {g: f.defaults.get(g) for g in f.fixed if g != k}
            elif all(own.get(g, _NONE) == f.defaults.get(g) for g in f.fixed):
                free.append((len(f.defaults), ep.name, f))
        elif f is factory.cls:
            free.append((-1, ep.name, f))
    id_key = key_prefix.removesuffix("params.") + "id" if key_prefix.endswith("params.") else "the id"
    setting = f"{id_key}=" if key_prefix.endswith("params.") else "id "
    free_hint = ""
    if free:
        _, free_id, free_factory = min(free, key=lambda x: (x[0], x[1]))
        try:  # named only when that id takes this value (smac/SMAC-v0 takes zerg_7_vs_9, not the typo '3mm')
            defaults = free_factory.defaults if isinstance(free_factory, Variant) else {}
            free_factory.Params(**{**defaults, k: value})
            free_hint = f"set any {k} with {setting}{free_id} and {key_prefix}{k}={value!r}"
        except Exception:
            free_hint = ""
    try:
        known = value in siblings
    except TypeError:  # an unhashable value (a YAML mapping or list) fixes no id
        known = False
    if known:
        sib = siblings[value]
        also = {g: v for g, v in sibling_fixed[sib].items() if own.get(g, _NONE) != v}
        if not also:
            return f"To use {k}={value!r}, choose its id: {setting}{sib}"
        fixes = ", ".join(f"{g}={v!r}" for g, v in also.items())
        return (f"To use {k}={value!r}, choose its id: {setting}{sib} (it also fixes {fixes})"
                + (f", or {free_hint}" if free_hint else ""))
    pattern = id_.replace(str(factory.defaults.get(k)), f"<{k}>", 1)
    if len(siblings) > 1 and all(pattern.replace(f"<{k}>", str(v), 1) == sid for v, sid in siblings.items()):
        vals = ", ".join(str(v) for v in sorted(siblings, key=str))
        listed = f"choose the {k} with {setting}{pattern}; {k}s: {vals}"
    else:  # the ids do not follow one pattern (coop_game/Grid4x4-v0 fixes height and width): name each
        listed = f"ids that fix {k}: " + ", ".join(f"{sid} ({k}={v!r})" for v, sid in
                                                  sorted(siblings.items(), key=lambda kv: kv[1]))
    hint = f"{free_hint}; {listed}" if free_hint else listed
    return hint[0].upper() + hint[1:]


def reject_bools(data: dict[str, Any], model: type[BaseModel], *, file: str | None = None, key_prefix: str = "") -> None:
    """Refuse ``true``/``false`` (or YAML ``yes``/``no``) for an int or float field of ``model``, or for an item
    that should be an int or a float inside a list or tuple field (``list[int]``, ``tuple[float, float]``,
    ``list[tuple[float, float]] | None``, ...): pydantic would silently turn them into 1 and 0. Keys that are not
    fields of ``model`` are left to pydantic. The same check for the run config, its ``train:`` section and
    component params (:func:`validate_params`).

    Raises:
        ConfigError: names the key (``key_prefix`` + field) and the value.
    """
    for k, v in data.items():
        f = model.model_fields.get(k)
        if f is None:
            continue
        if isinstance(v, bool) and _numeric_field(model, k):
            raise ConfigError(f"invalid value {value_text(v)}: a number is required, not a boolean", file=file,
                              key=f"{key_prefix}{k}", value=v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and _bool_field(f.annotation):
            # pydantic would read 1 / 0 as true / false while the run's stored config kept the number (two runs of
            # one setting then differ in a report)
            write = {1: " (write true)", 0: " (write false)"}.get(v, "") if v in (0, 1) else ""
            raise ConfigError(f"invalid value {v!r}: a boolean (true or false) is required, not a number{write}",
                              file=file, key=f"{key_prefix}{k}", value=v)
        if isinstance(v, (list, tuple)):
            item = _bool_for_number(v, f.annotation)
            if item is not _NONE:
                raise ConfigError(f"invalid value {value_text(item)} in {value_text(v)}: a number is required, "
                                  "not a boolean", file=file, key=f"{key_prefix}{k}", value=v)


_NONE = object()


def _bool_field(annotation: Any) -> bool:
    """Whether ``annotation`` takes a boolean and no number: ``bool``, ``Optional[bool]``, ``Annotated[bool, ...]``."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _bool_field(args[0])
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and _bool_field(rest[0])
    return annotation is bool


def _bool_for_number(value: Any, annotation: Any) -> Any:
    """The first boolean in ``value`` at a place where ``annotation`` takes an int or a float (and no bool),
    looking into lists, tuples, unions and ``Annotated``; ``_NONE`` if there is none."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _bool_for_number(value, args[0])
    if origin in (typing.Union, types.UnionType):
        if isinstance(value, bool) and bool in args:
            return _NONE
        for a in args:
            found = _bool_for_number(value, a)
            if found is not _NONE:
                return found
        return _NONE
    if isinstance(value, bool):
        return value if annotation in (int, float) else _NONE
    if origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        if origin is tuple and args[-1] is not Ellipsis:
            pairs = zip(value, args)
        else:
            pairs = ((v, args[0]) for v in value)
        for v, a in pairs:
            found = _bool_for_number(v, a)
            if found is not _NONE:
                return found
    return _NONE


def _numeric_field(model: type[BaseModel], key: str) -> bool:
    """True if ``model.key`` takes an int or a float but not a bool (pydantic would coerce True to 1)."""
    import typing

    f = model.model_fields.get(key)
    if f is None:
        return False
    args = typing.get_args(f.annotation) or (f.annotation,)
    return bool not in args and any(a in (int, float) for a in args)


def _model_at(model: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    """The pydantic model of the nested field ``path`` of ``model`` (``Optional`` unwrapped); None if not a model."""
    import typing

    for p in path:
        f = model.model_fields.get(p)
        if f is None:
            return None
        ann = f.annotation
        cands = [a for a in (typing.get_args(ann) or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not cands:
            return None
        model = cands[0]
    return model


def _did_you_mean(key: object, valid: Any) -> str:
    """`` (did you mean 'x'?)`` for the closest valid key (difflib), or ``''``."""
    import difflib

    close = difflib.get_close_matches(str(key), [str(k) for k in valid], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def pydantic_to_config_error(exc: ValidationError, model: type[BaseModel], *, file: str | None, key_prefix: str = "",
                             owner: str | None = None) -> ConfigError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    value = err.get("input")
    if err["type"] == "missing" and len(err["loc"]) > 1:
        parent = ".".join(str(p) for p in err["loc"][:-1])
        msg = f"missing required key '{loc}' ('{parent}' is given, so it needs its '{err['loc'][-1]}' too)"
        return ConfigError(msg, file=file, key=f"{key_prefix}{loc}")
    if err["type"] == "missing":
        required = ", ".join(k for k, f in model.model_fields.items() if f.is_required())
        msg = f"missing required key '{loc}' (required keys: {required})"
        # a misspelled key is both missing and unknown: name the unknown one given in its place
        extra = [str(e["loc"][-1]) for e in exc.errors() if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
        if extra:
            import difflib

            close = difflib.get_close_matches(str(err["loc"][-1]), extra, n=1)
            msg += (f"; unknown key {close[0]!r} given instead (did you mean {loc!r}?)" if close
                    else f"; unknown keys given: {', '.join(map(repr, extra))}")
        return ConfigError(msg, file=file, key=f"{key_prefix}{loc}")
    if err["type"] == "extra_forbidden":
        sub = _model_at(model, [str(p) for p in err["loc"][:-1]])
        if len(err["loc"]) > 1 and sub is not None:  # a misspelled key below the top: that level's valid keys
            parent = ".".join(str(p) for p in err["loc"][:-1])
            msg = (f"unknown parameter {loc!r} (value {value_text(value)}){_did_you_mean(err['loc'][-1], sub.model_fields)}; "
                   f"valid keys of '{key_prefix}{parent}': {', '.join(sub.model_fields)}")
            return ConfigError(msg, file=file, key=f"{key_prefix}{loc}", value=value)
        valid = ", ".join(sorted(model.model_fields))
        hint = _did_you_mean(err["loc"][-1], model.model_fields)
        msg = (f"unknown parameter {loc!r} (value {value_text(value)}){hint}; valid parameters: {valid}" if valid else
               f"unknown parameter {loc!r} (value {value_text(value)}); {owner or 'it'} takes no parameters (remove params)")
    elif err["type"] == "model_type":  # e.g. `agents: random-v0`; do not name the internal pydantic class
        eg = f", e.g. {{id: {value}}}" if isinstance(value, str) else ""
        msg = f"invalid value {value_text(value)}: must be a mapping {{id: ..., params: {{...}}}}{eg}"
    else:
        finfo = model.model_fields.get(str(err["loc"][0])) if err["loc"] else None
        desc = f" ({finfo.description})" if finfo is not None and finfo.description else ""
        text = err["msg"].removeprefix("Value error, ")
        if _not_finite(value) and err["type"] in ("less_than_equal", "less_than", "greater_than_equal",
                                                   "greater_than", "finite_number"):
            # 'nan' compares false with any bound and 'inf' is past every one: the bound is not the reason
            text = "must be a finite number"
        elif err["type"] == "int_parsing_size":  # e.g. 1e30 for an integer: pydantic calls it an input string
            text = "is too large for an integer parameter"
        msg = f"invalid value {value_text(value)}: {text}{desc}"
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, CrossKeyError):  # a check across keys: its other keys, addressed as this one
            parent = "".join(f"{p}." for p in err["loc"][:-1])
            # the same check's refusals of later keys of the same params, in one message when the check joins them
            same = [e for e in exc.errors()[1:] if list(e["loc"][:-1]) == list(err["loc"][:-1])
                    and type((e.get("ctx") or {}).get("error")) is type(cause)]
            joined = cause.join([e["ctx"]["error"] for e in same]) if same else None
            others = tuple(str(e["loc"][-1]) for e in same) if joined else ()
            also = tuple(f"{key_prefix}{parent}{k}" for k in (*cause.also, *others))
            return ConfigError(joined or msg, file=file, key=f"{key_prefix}{loc}", value=value, also=also)
    return ConfigError(msg, file=file, key=f"{key_prefix}{loc}", value=value)


def _not_finite(value: Any) -> bool:
    """``value`` is NaN or infinite, as a float or as the text an override gives ('nan', '-inf', 'Infinity')."""
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def make_scenario(id_: str, num_envs: int = 1, **params: Any):
    """Build the batched core of scenario ``id_`` with ``num_envs`` envs (``num_envs`` and params validated).

    Raises:
        ConfigError: ``num_envs`` is not an integer >= 1 (a float or a bool is refused, not truncated), or a param
            is invalid.
    """
    from coopsim.platform.scenario import check_num_envs

    num_envs = check_num_envs(num_envs)
    validate_params("scenario", id_, params)
    return spec("scenario", id_).load()(num_envs=num_envs, **params)


def make(id_: str, render_mode: str | None = None, **params: Any):
    """Build the PettingZoo ``ParallelEnv`` view (:class:`~coopsim.platform.scenario.ScenarioEnv`) of scenario
    ``id_`` with one env.

    Args:
        id_: a registered scenario id, e.g. ``"coop_game/Grid4x4-v0"`` (``coopsim list`` shows them).
        render_mode: None, or one of the scenario's ``metadata["render_modes"]``: ``"rgb_array"`` for
            :meth:`~coopsim.platform.scenario.ScenarioEnv.render` frames (uint8 ``[H, W, 3]``) on the scenarios that
            draw them (MG-MAPF, SMAC, coop_game grids); with None, ``render()`` returns None as PettingZoo's envs do.
        **params: the scenario's params (validated as for :func:`make_scenario`); ``num_envs`` only as 1 (an int,
            what the view has): the view has one env (:func:`make_scenario` builds a batched core).

    Raises:
        RegistryError: an unknown id.
        ConfigError: an invalid param; ``num_envs`` other than the integer 1; ``render_mode`` not a string or None,
            or a mode the scenario does not list (both naming the value and the scenario's valid modes).
    """
    import numpy as np

    from coopsim.platform.scenario import ScenarioEnv, check_render_mode

    if "num_envs" in params:
        n = params.pop("num_envs")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n != 1:
            raise ConfigError(f"make() builds the one-env PettingZoo view and takes no num_envs other than 1 (got "
                              f"{n!r}); for a batched core use make_scenario({id_!r}, num_envs={n!r})",
                              key="num_envs", value=n)
    core = make_scenario(id_, num_envs=1, **params)
    try:  # the modes of this instance (coop_game's graph world draws no frame), also for a mode that is no string
        check_render_mode(render_mode, core.metadata, f"scenario '{id_}'", getattr(core, "render_hint", None))
    except ConfigError:
        core.close()
        raise
    return ScenarioEnv(core, render_mode=render_mode)


def make_component(kind: str, id_: str, *args: Any, **params: Any):
    """Build an agent (``args = (scenario,)``), channel or shield from the registry."""
    validate_params(kind, id_, params)
    return spec(kind, id_).load()(*args, **params)

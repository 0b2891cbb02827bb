"""Run configuration: a typed schema (pydantic v2) read from YAML, with ``key=value`` overrides.

A run config names one component of each kind, each as ``{id, params}``::

    name: mapf-random-32-32-10
    scenario: {id: mapf/MGMAPF-v0, params: {map: random-32-32-10, num_agents: 64}}
    agents:   {id: mapf/prioritized-v0}
    channel:  {id: ideal-v0}          # default
    shield:   {id: passthrough-v0}    # default
    seeds: [0, 1, 2, 3, 4]
    episodes: 1                       # per seed
    max_steps: 512                    # overrides scenario.params.max_steps
    replays: 1                        # replay files kept per seed (default: every episode's)

Every error names the file, the dotted key, the bad value and what is valid (:class:`ConfigError`).
"""
from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from coopsim.errors import ConfigError, CoopsimError, short_repr
from coopsim.platform import registry


class ComponentConfig(BaseModel):
    # ser_json_inf_nan: an allowed inf (e.g. a trace's recover_at_s: .inf) is dumped as .inf, not as null
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
    id: str
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("params", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v


#: longest run name: the run directory name adds a time stamp and an id (file names stop at 255 bytes)
NAME_MAX = 150
#: the characters a run name may have besides (unicode) letters and digits
NAME_CHARS = "._+-"
#: largest run seed: seeds are 0 .. 2**31 - 1, which every consumer takes (torch.manual_seed, numpy, ns-3's
#: RngSeed/RngRun, the scripts' seed * 1_000_003 + k offsets)
SEED_MAX = 2**31 - 1
#: most episodes per seed; with :data:`SEED_MAX` every episode seed ``seed * episodes + e`` stays below 2**63
#: (an int64, as torch and ns-3 need)
EPISODES_MAX = 10**9


class RunConfig(BaseModel):
    """Schema of a run config (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")  # as ComponentConfig's
    name: str = Field(description="run name; the run directory is runs/<name>-<UTC time>-<short id>")
    scenario: ComponentConfig
    agents: ComponentConfig
    channel: ComponentConfig = Field(default_factory=lambda: ComponentConfig(id="ideal-v0"))
    shield: ComponentConfig = Field(default_factory=lambda: ComponentConfig(id="passthrough-v0"))
    seeds: list[int] = Field(default_factory=lambda: [0],
                             description=f"one or more integer seeds, each 0 .. {SEED_MAX} (2**31 - 1)")
    episodes: int = Field(1, ge=1, le=EPISODES_MAX,
                          description=f"episodes per seed, an integer 1 .. {EPISODES_MAX:,} (10**9)")
    max_steps: int | None = Field(None, ge=1, description="episode step limit, an integer >= 1")
    out_dir: str = Field("runs", description="parent folder of run directories")
    replays: int | None = Field(None, ge=0, le=EPISODES_MAX,
                                description="replay files kept per seed (replays/seed<S>_ep<E>.npz, scenarios that "
                                "record them): the first N episodes of each seed; 0 = none; null (default) = every "
                                "episode")
    #: trainer settings, read by ``coopsim train`` (schema owned by the trainer)
    train: dict[str, Any] | None = None

    @field_validator("channel", "shield", mode="before")
    @classmethod
    def _null_is_default(cls, v: Any, info: Any) -> Any:
        # `channel: null` means what leaving it out means, as `params: null` and `train: null` do
        return cls.model_fields[info.field_name].default_factory() if v is None else v

    @field_validator("seeds", "episodes", "max_steps", "replays", mode="before")
    @classmethod
    def _no_quoted_ints(cls, v: Any) -> Any:
        # pydantic would turn "40" into 40 silently: a quoted number is more likely a mistake than meant
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, str):
                t = x.strip()
                if not t:  # 'episodes=' with nothing after it (''[:1] would be 'in' any string below)
                    raise ValueError("is empty: give an integer (or a list of integers for seeds, e.g. seeds=[0,1,2])")
                if t[:1] in "[{(" or t[-1:] in "]})":  # e.g. seeds=[0,1 (unclosed): YAML gave up, it is a string
                    raise ValueError(f"is not a valid list: {x!r} (check the brackets, e.g. seeds=[0,1,2])")
                if t.lstrip("+-").isdigit() and t.isascii():  # (other digits are a string unquoted too)
                    raise ValueError(f"must be an integer, not the string {x!r} (remove the quotes)")
                raise ValueError(f"must be an integer, not the string {x!r}")
        return v

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds_a_list(cls, v: Any) -> Any:
        # seeds: 3 could mean seed 3 or three seeds: say both rather than guess
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if not float(v).is_integer() or v < 0:
                raise ValueError(f"must be a list of integer seeds >= 0, e.g. seeds=[0, 1, 2]; not {v!r}")
            v = int(v)
            n = v if v >= 1 else None
            as_count = f", or seeds=[{', '.join(str(i) for i in range(n))}] for {n} seeds" if n and n <= 10 else ""
            raise ValueError(f"must be a list of integer seeds, not the single number {v!r}: write seeds=[{v!r}] for "
                             f"that one seed{as_count}")
        return v

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not v:
            raise ValueError("must be a non-empty name, e.g. my-run")
        bad = sorted({c for c in v if not (c.isalnum() or c in NAME_CHARS)})
        if bad:  # it names a directory and is printed inside suggested shell commands
            raise ValueError(f"must use letters, digits and {' '.join(NAME_CHARS)} only (no slashes, spaces or shell "
                             f"characters); not {' '.join(repr(c) for c in bad)}")
        if len(v.encode("utf-8")) > NAME_MAX:  # the run directory adds -<UTC time>-<id>; names stop at 255 bytes
            raise ValueError(f"is {len(v)} characters ({len(v.encode('utf-8'))} bytes in UTF-8) long; at most "
                             f"{NAME_MAX} bytes (the run directory adds a time stamp and an id)")
        return v

    @field_validator("out_dir")
    @classmethod
    def _out_dir_ok(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must be a folder path, e.g. runs (not empty)")
        out = os.path.expanduser(v)  # out_dir=~/x is the home folder's x, not ./~/x
        if out.startswith("~"):  # ~user of no such user: expanduser leaves it, which would make a folder named ~user
            raise ValueError(f"starts with '{out.split('/')[0]}', but there is no such user's home folder; write "
                             "the full path, or ~/... for your own home folder")
        return out

    @field_validator("seeds")
    @classmethod
    def _seeds_ok(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("must list at least one seed, e.g. [0, 1, 2]")
        if len(set(v)) != len(v):
            raise ValueError("must not repeat a seed")
        if any(s < 0 for s in v):
            raise ValueError("seeds must be >= 0")
        big = [s for s in v if s > SEED_MAX]
        if big:
            raise ValueError(f"seed {big[0]} is too large (at most {SEED_MAX})")
        return v

    def scenario_params(self) -> dict[str, Any]:
        p = dict(self.scenario.params)
        if self.max_steps is not None:
            p["max_steps"] = self.max_steps
        return p


def _yaml_error(path: str, exc: yaml.YAMLError) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    if "'\\t'" in problem:  # YAML indents with spaces only
        problem += " (YAML indents with spaces, never tabs: replace the tab with spaces)"
    return ConfigError(f"not valid YAML{where}: {problem}", file=path)


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line = key, line


#: most values a YAML document may hold once its aliases (``*name``) are expanded: a config is at most thousands; a few
#: nested aliases of lists ("billion laughs") would otherwise expand to gigabytes when validated or printed
MAX_YAML_VALUES = 1_000_000


def _expanded_size(node: yaml.Node, memo: dict[int, int], path: set[int]) -> int:
    """Values in ``node`` with every alias expanded (memoized per node: an alias is the same node object)."""
    k = id(node)
    if k in memo:
        return memo[k]
    if k in path:
        raise yaml.constructor.ConstructorError(None, None, "a recursive alias (a collection that contains itself) "
                                                "cannot be a config value", node.start_mark)
    path.add(k)
    if isinstance(node, yaml.SequenceNode):
        n = 1 + sum(_expanded_size(c, memo, path) for c in node.value)
    elif isinstance(node, yaml.MappingNode):
        n = 1 + sum(_expanded_size(a, memo, path) + _expanded_size(b, memo, path) for a, b in node.value)
    else:
        n = 1
    path.discard(k)
    memo[k] = n
    return n


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping with the same key twice (plain YAML keeps the last one), a recursive
    alias, and a document whose aliases expand to more than :data:`MAX_YAML_VALUES` values."""

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        n = _expanded_size(node, {}, set())
        if n > MAX_YAML_VALUES:
            raise yaml.constructor.ConstructorError(
                None, None, f"the document's aliases (*name) expand to {n:,} values, more than the {MAX_YAML_VALUES:,} "
                "a config may hold; write the values out or use fewer nested aliases", node.start_mark)
        return self.construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                except TypeError:  # unhashable: the base class reports it
                    continue
                if dup:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads 1e5 and 2.5e-3 as strings (its floats need a dot and a signed exponent); YAML 1.2 and
# every user read them as numbers: so does coopsim, in config files and in overrides (1e5 -> 100000, an int when
# written without a dot and whole; 2.5e-3 -> 0.0025)
_E_NUMBER = "tag:coopsim:e-number"


def _construct_e_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | int:
    text = loader.construct_scalar(node)
    x = float(text)
    return int(x) if "." not in text and x.is_integer() and abs(x) < 2**63 else x


UniqueKeyLoader.add_implicit_resolver(
    _E_NUMBER, re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"), list("-+0123456789."))
UniqueKeyLoader.add_constructor(_E_NUMBER, _construct_e_number)


class YamlNumberText(str):
    """A plain (unquoted) YAML scalar that YAML 1.1 (PyYAML) reads as a number but that is not written as a plain
    decimal number, kept as the text written: base 60 (``1:30``, ``1:30.5``), hexadecimal (``0x10``), binary
    (``0b101``), a leading zero (``064``, ``08``: :class:`LeadingZeroInt`) or digits with underscores (``1_000``,
    ``1_000.5``).

    YAML 1.1 reads ``max_steps: 1:30`` as 90 and ``name: 0x10`` as 16; YAML 1.2 (and most readers) read them as
    strings, and nobody means YAML 1.1's number in a config. So the loader keeps such a scalar as this string, and the
    schema decides (:func:`reject_yaml11_numbers`): a numeric field refuses it, naming YAML 1.1's reading and the
    plain decimal to write; a string field (``name: 0x10``) takes the text as written, ``"0x10"`` (pydantic makes it
    a plain ``str``).
    """

    form: str  # "base 60", "hexadecimal", "binary", "leading zero" or "underscores"
    reading: int | float | None  # YAML 1.1's number (None: YAML 1.1 reads it as a string, e.g. 08)
    where: str  # "line 2, column 47" in a config file, "" in a command-line override

    def decimal(self) -> str:
        """The plain decimal number to write instead: ``90`` for ``1:30``, ``1000.5`` for ``1_000.5``."""
        return repr(self.reading) if isinstance(self.reading, float) else str(self.reading)

    def problem(self) -> str:
        """What is wrong and what to write instead, e.g. ``line 2, column 12: 1:30 is YAML 1.1 base 60 (= 90); write
        90``."""
        where, decimal = (f"{self.where}: " if self.where else ""), self.decimal()
        if self.form == "underscores":
            return f"{where}{self} has underscores, which YAML 1.1 drops (= {decimal}); write {decimal}"
        return f"{where}{self} is YAML 1.1 {self.form} (= {decimal}); write {decimal}"


class LeadingZeroInt(YamlNumberText):
    """A plain YAML integer written with a leading zero (``064``, ``08``, ``-007``), kept as the text written.

    YAML 1.1 (PyYAML) reads ``064`` as the octal number 52 and ``08`` / ``09`` (not octal) as strings, which pydantic
    would then turn into 8 / 9: nobody means either in a config. A numeric field refuses it, naming the decimal to
    write; a string field (``name: 007``) takes the text as written, ``"007"`` (see :class:`YamlNumberText`).
    """

    @property
    def octal(self) -> int | None:
        """YAML 1.1's octal reading (None for 08, 09, 019: not octal, read as strings)."""
        return self.reading

    def decimal(self) -> str:
        return str(int(self.replace("_", ""), 10))

    def problem(self) -> str:
        """E.g. ``line 2, column 47: 064 has a leading zero, which YAML 1.1 reads as the octal number 52; write 64``."""
        reading = f"the octal number {self.octal}" if self.octal is not None else f"the string {str(self)!r}"
        where = f"{self.where}: " if self.where else ""
        return f"{where}{self} has a leading zero, which YAML 1.1 reads as {reading}; write {self.decimal()}"


def _yaml11_form(text: str) -> str | None:
    """How ``text``, a plain scalar YAML 1.1 resolves as an int or a float, is written when not as a plain decimal
    number (:attr:`YamlNumberText.form`); None for a plain decimal (``12``, ``-3``, ``0.5``, ``1.5e-3``, ``.inf``)."""
    digits = text.lstrip("+-")
    if ":" in digits:
        return "base 60"
    if digits.startswith("0x"):
        return "hexadecimal"
    if digits.startswith("0b"):
        return "binary"
    if re.fullmatch(r"0[0-9_]+", digits):  # an int: a float has a dot (01.5 is 1.5 in every YAML)
        return "leading zero"
    if "_" in digits:
        return "underscores"
    return None


def _number_text(loader: yaml.SafeLoader, node: yaml.ScalarNode, form: str,
                 reading: int | float | None) -> YamlNumberText:
    out = (LeadingZeroInt if form == "leading zero" else YamlNumberText)(loader.construct_scalar(node))
    mark = node.start_mark
    out.form, out.reading = form, reading
    out.where = f"line {mark.line + 1}, column {mark.column + 1}" if getattr(loader, "record_marks", True) else ""
    return out


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | YamlNumberText:
    form = _yaml11_form(loader.construct_scalar(node))  # 064, 0x10, 0b101, 1:30, 1_000: see YamlNumberText
    value = loader.construct_yaml_int(node)
    return value if form is None else _number_text(loader, node, form, value)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | YamlNumberText:
    form = _yaml11_form(loader.construct_scalar(node))  # 1:30.5, 1_000.5: see YamlNumberText
    value = loader.construct_yaml_float(node)
    return value if form is None else _number_text(loader, node, form, value)


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
# 08, 09, 019, -08: not octal, so YAML 1.1 resolves them to strings; the same LeadingZeroInt as 064 instead
_LEADING_ZERO = "tag:coopsim:leading-zero"
UniqueKeyLoader.add_implicit_resolver(_LEADING_ZERO, re.compile(r"^[-+]?0[0-9_]*[89][0-9_]*$"), list("-+0"))
UniqueKeyLoader.add_constructor(_LEADING_ZERO, lambda loader, node: _number_text(loader, node, "leading zero", None))


class _OverrideLoader(UniqueKeyLoader):
    """The loader of a command-line override's value: a line and column there would point into the override text,
    not into a file."""

    record_marks = False


def reject_yaml11_numbers(data: dict[str, Any], model: type[BaseModel], *, file: str | None = None,
                          key_prefix: str = "") -> None:
    """Refuse a :class:`YamlNumberText` (``1:30``, ``0x10``, ``0b101``, ``064``, ``08``, ``1_000`` as written in
    YAML) where ``model`` takes a number and no string: at a field, inside a list, tuple or dict field, or at a field
    of a nested model. A field that takes a string (``name``, a ``Union[int, str]``, ``Any``) keeps the text as
    written; keys that are not fields of ``model`` are left to pydantic.

    Raises:
        ConfigError: key ``key_prefix`` + the dotted field path; names the value, YAML 1.1's reading of it and the
            decimal number to write (and the line and column in a config file).
    """
    for k, v in data.items():
        f = model.model_fields.get(k)
        found = None if f is None else _number_text_at_number(v, f.annotation, [str(k)])
        if found is not None:
            text, path = found
            raise ConfigError(text.problem(), file=file, key=key_prefix + ".".join(path), value=str(text))


#: the former name of :func:`reject_yaml11_numbers` (it refused leading zeros only)
reject_leading_zeros = reject_yaml11_numbers


def _number_text_at_number(value: Any, annotation: Any, path: list[str]) -> tuple[YamlNumberText, list[str]] | None:
    """The first :class:`YamlNumberText` in ``value`` (and its field path) at a place where ``annotation`` takes an
    int or a float and no string, looking into lists, tuples, dicts, unions, ``Annotated`` and nested models."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _number_text_at_number(value, args[0], path)
    union = origin in (typing.Union, types.UnionType)
    if union and isinstance(value, YamlNumberText) and any(a is str or a is Any for a in args):
        return None  # e.g. scen: Union[int, str]: the text as written
    if not union and isinstance(value, YamlNumberText):
        if origin in (list, tuple) and args:  # seeds=0x10 (a --grid seeds value): its number is refused first
            return _number_text_at_number(value, args[0], path)
        numeric = annotation in (int, float) or (origin is typing.Literal and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in args))
        return (value, path) if numeric else None
    return _first_inside(value, annotation, path, _number_text_at_number)


def _first_inside(value: Any, annotation: Any, path: list[str], at: Callable[[Any, Any, list[str]], Any]) -> Any:
    """The first result that is not None of ``at(member, its annotation, its field path)`` over the members of a
    union ``annotation`` (``value`` against each) or the items of a list, tuple, dict or nested-model ``value`` as
    ``annotation`` types them; None when there is none (or ``value`` is none of those). The walk
    :func:`_number_text_at_number` and :func:`_quoted_scalar_at` share."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = ((value, a, path) for a in args)
    elif origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        pairs = zip(value, args) if origin is tuple and args[-1] is not Ellipsis else ((v, args[0]) for v in value)
        members = ((v, a, path) for v, a in pairs)
    elif origin is dict and isinstance(value, dict) and len(args) == 2:
        members = ((v, args[1], [*path, str(k)]) for k, v in value.items())
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
        fields = annotation.model_fields
        members = ((v, fields[k].annotation, [*path, str(k)]) for k, v in value.items() if k in fields)
    else:
        return None
    for v, a, p in members:
        found = at(v, a, p)
        if found is not None:
            return found
    return None


def whole_floats_to_ints(data: dict[str, Any], model: type[BaseModel]) -> None:
    """In place: a whole float (``1500.0``, e.g. written ``1.5e3``) where ``model`` takes an int and no float becomes
    that int (at a field, inside a list, tuple or dict field, or at a field of a nested model), as pydantic reads it:
    the run's stored ``config.yaml`` then shows ``1500``, not ``1500.0``. Floats of ``2**53`` and more (not every such
    integer is a float) and keys that are not fields of ``model`` are left as they are."""
    for k, v in list(data.items()):
        f = model.model_fields.get(k)
        if f is not None:
            new = _whole_float_as_int(v, f.annotation)
            if new is not v:
                data[k] = new


def _whole_float_as_int(value: Any, annotation: Any) -> Any:
    """``value`` with each whole float at a place where ``annotation`` takes an int and no float made that int;
    ``value`` itself when nothing changes."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _whole_float_as_int(value, args[0])
    if origin in (typing.Union, types.UnionType):
        bare = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in args]
        if isinstance(value, float):
            return _whole_float_as_int(value, int) if int in bare and float not in bare and Any not in bare else value
        for a in args:  # e.g. list[int] | None: the member for this kind of value
            new = _whole_float_as_int(value, a)
            if new is not value:
                return new
        return value
    if isinstance(value, float):
        return int(value) if annotation is int and value.is_integer() and abs(value) < 2**53 else value
    if origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        items = zip(value, args) if origin is tuple and args[-1] is not Ellipsis else ((v, args[0]) for v in value)
        new = [_whole_float_as_int(v, a) for v, a in items]
        if len(new) != len(value) or all(n is v for n, v in zip(new, value)):  # a tuple of the wrong length: pydantic's
            return value
        return type(value)(new)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        new = {k: _whole_float_as_int(v, args[1]) for k, v in value.items()}
        return new if any(new[k] is not v for k, v in value.items()) else value
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
        out = dict(value)
        whole_floats_to_ints(out, annotation)
        return out if any(out[k] is not v for k, v in value.items()) else value
    return value


def reject_bools(data: dict[str, Any], model: type[BaseModel], *, file: str | None = None,
                 key_prefix: str = "", quoted: bool = True) -> None:
    """The checks before pydantic coerces a value of the run config, its ``train:`` section or a component's params:
    ``true``/``false`` for a number (:func:`coopsim.platform.registry.reject_bools`), a number YAML 1.1 reads from
    other than a plain decimal (``1:30``, ``0x10``, ``064``, ``1_000``) for a number (:func:`reject_yaml11_numbers`)
    and, with ``quoted``, a quoted number or boolean (``'0.5'``, ``"true"``) for a number or a boolean
    (:func:`reject_quoted_scalars`; the run config's own ``seeds``, ``episodes`` and ``max_steps`` refuse quoted
    numbers in :meth:`RunConfig._no_quoted_ints`). Then a whole float for an int (``1.5e3``) is made that int in
    ``data`` (:func:`whole_floats_to_ints`), so that the run's stored config shows it as pydantic reads it.

    Raises:
        ConfigError: names the key and the value.
    """
    reject_yaml11_numbers(data, model, file=file, key_prefix=key_prefix)
    if quoted:
        reject_quoted_scalars(data, model, file=file, key_prefix=key_prefix)
    registry.reject_bools(data, model, file=file, key_prefix=key_prefix)
    whole_floats_to_ints(data, model)


#: the strings pydantic (lax mode) reads as a boolean, lower-cased and stripped
_BOOL_STRINGS = {"true": "true", "t": "true", "yes": "true", "y": "true", "on": "true", "1": "true",
                 "false": "false", "f": "false", "no": "false", "n": "false", "off": "false", "0": "false"}
_PLAIN_DECIMAL = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")


def reject_quoted_scalars(data: dict[str, Any], model: type[BaseModel], *, file: str | None = None,
                          key_prefix: str = "") -> None:
    """Refuse a string (a quoted ``'0.5'`` in YAML or an override) where ``model`` takes a number, or a boolean, and
    no string: at a field, inside a list, tuple or dict field, or at a field of a nested model. Pydantic would read
    ``'0.5'`` as 0.5 (and ``'true'`` as True) while the run's stored ``config.yaml`` kept the string, which a later
    ``--resume`` with the number then found different. Strings pydantic cannot read as a number (or a boolean) are
    left to pydantic, which refuses them; fields that take a string (``Union[int, str]``, ``Any``) keep the text.

    Raises:
        ConfigError: key ``key_prefix`` + the dotted field path; names the value, what is required and the value to
            write instead (without quotes).
    """
    for k, v in data.items():
        f = model.model_fields.get(k)
        found = None if f is None else _quoted_scalar_at(v, f.annotation, [str(k)])
        if found is None:
            continue
        text, kind, path, write = found
        inside = f" in {v!r}" if text is not v else ""
        required = {"int": "an integer", "float": "a number", "bool": "a boolean (true or false)"}[kind]
        desc = f" ({f.description})" if f.description else ""  # as registry.pydantic_to_config_error's errors
        raise ConfigError(f"invalid value {text!r}{inside}: {required} is required, not a string "
                          f"({quoted_advice(text, write)}){desc}", file=file, key=key_prefix + ".".join(path),
                          value=v)


def _scalar_kind(annotation: Any) -> str | None:
    """``"int"``, ``"float"`` or ``"bool"`` when ``annotation`` (``Annotated`` unwrapped) takes only that kind of
    scalar (a ``Literal`` of numbers is ``"float"``); None otherwise (a string, ``Any``, a container, a model)."""
    import typing

    if typing.get_origin(annotation) is typing.Annotated:
        return _scalar_kind(typing.get_args(annotation)[0])
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "int"
    if annotation is float:
        return "float"
    if typing.get_origin(annotation) is typing.Literal:
        args = typing.get_args(annotation)
        if args and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in args):
            return "float"
    return None


def _plain_reading(text: str) -> Any:
    """What ``text`` is read as when written without quotes in a config or an override (this module's loader: YAML
    1.1's booleans, ``1e5`` a number, ``064`` a :class:`LeadingZeroInt`); the text itself when YAML refuses it (an
    override's value is then taken as written, :func:`parse_override`)."""
    try:
        return yaml.load(text, Loader=_OverrideLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        return text


def quoted_advice(text: str, write: str) -> str:
    """The advice for the string ``text`` given where a number or a boolean is required and ``write`` is that value
    written out (:func:`_quoted_write`): ``remove the quotes: 0.5`` when the text could only
    have come as a string by being quoted (written plain it is a number or a boolean, or a YAML 1.1 form such as
    ``1_000`` that is refused as such), else ``write 1e+50``: an unquoted ``1e5_0`` (Python's float reads it),
    ``t`` (pydantic's true) or Arabic-Indic digits are strings as well, with no quotes to remove."""
    plain = _plain_reading(text)
    quoted = not isinstance(plain, str) or isinstance(plain, YamlNumberText)
    return f"remove the quotes: {write}" if quoted else f"write {write}"


def _quoted_write(text: str, kind: str) -> str | None:
    """How to write the string ``text`` without quotes as the ``kind`` (``"int"``, ``"float"``, ``"bool"``) pydantic
    reads from it (``'0.5'`` -> ``0.5``, ``'1e-3'`` -> ``1e-3``, ``'1_000'`` -> ``1000``, ``'yes'`` -> ``true``);
    None when pydantic reads no such value from it, or reads nan or an infinity (``train.lr=nan`` unquoted gives the
    same text as ``'nan'``: left to pydantic, whose finite check names it)."""
    t = text.strip()
    if kind == "bool":
        return _BOOL_STRINGS.get(t.lower())
    try:
        x = float(t)
    except ValueError:
        return None
    if not math.isfinite(x):  # a bare nan / inf override arrives as this same text: pydantic's finite check says it
        return None
    leading_zero = isinstance(_plain_reading(t), LeadingZeroInt)  # '010': write 10 (010 plain is refused)
    if _PLAIN_DECIMAL.match(t) and not leading_zero:
        return t.lstrip("+")
    return str(int(x)) if (kind == "int" or leading_zero) and x.is_integer() and abs(x) < 2**53 else repr(x)


def _never_a_string(annotation: Any) -> bool:
    """Whether pydantic never takes a string for ``annotation``: None, a list, tuple, set or dict, a model."""
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _never_a_string(typing.get_args(annotation)[0])
    return (annotation is type(None) or origin in (list, tuple, set, frozenset, dict)
            or annotation in (list, tuple, set, frozenset, dict)
            or (isinstance(annotation, type) and issubclass(annotation, BaseModel)))


def _quoted_scalar_at(value: Any, annotation: Any, path: list[str]) -> tuple[str, str, list[str], str] | None:
    """The first string in ``value`` that pydantic would read as a number or a boolean at a place where
    ``annotation`` takes only numbers (or only booleans), as ``(string, kind, field path, what to write)``; looking
    into lists, tuples, dicts, unions, ``Annotated`` and nested models."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _quoted_scalar_at(value, args[0], path)
    if isinstance(value, str) and not isinstance(value, YamlNumberText):  # those: reject_yaml11_numbers
        members = [a for a in (args if origin in (typing.Union, types.UnionType) else (annotation,))
                   if not _never_a_string(a)]
        kinds = {_scalar_kind(a) for a in members}
        if not members or None in kinds:  # a member takes the string (str, Any, a string Literal, ...)
            return None
        kind = "bool" if kinds == {"bool"} else "int" if kinds == {"int"} else "float" if "bool" not in kinds else None
        if kind is None:  # e.g. int | bool: whichever pydantic picks, the string is still refused below
            kind = "float" if _quoted_write(value, "float") is not None else "bool"
        write = _quoted_write(value, kind)
        return None if write is None else (value, kind, path, write)
    return _first_inside(value, annotation, path, _quoted_scalar_at)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"scenario.params.num_agents=128"`` -> (``["scenario", "params", "num_agents"]``, ``128``).

    Raises:
        ConfigError: if the text has no ``=`` or an empty key.
    """
    if "=" not in text:
        if text.lower().endswith((".yaml", ".yml")):  # `coopsim validate a.yaml b.yaml`: a second config file
            raise ConfigError(f"{text!r} looks like a second config file, but a command takes one config (the words "
                              "after it are key.path=value overrides); give each its own command, e.g. "
                              "for f in configs/safety/*.yaml; do coopsim validate \"$f\"; done")
        raise ConfigError(f"override {text!r} must look like key.path=value, e.g. scenario.params.num_agents=128")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"override {text!r} has an empty key; write key.path=value")
    try:
        value = yaml.load(raw, Loader=_OverrideLoader) if raw.strip() else ""  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for i, p in enumerate(parts[:-1]):
            if node.get(p) is None:
                node[p] = {}
            if not isinstance(node[p], dict):
                whole = ".".join(parts[:i + 1])
                raise ConfigError(f"command-line override {text!r}: '{whole}' is {short_repr(node[p])}, not a mapping, so "
                                  f"no key can be set inside it; set the whole value instead, e.g. {whole}=[5] for a "
                                  f"list", key=".".join(parts))
            node = node[p]
        node[parts[-1]] = value
    return data


def read_yaml_text(p: Path, shown: str | None = None,
                   expected: str = "a YAML run config, e.g. configs/mapf/random-32-32-10.yaml") -> str:
    """The text of the YAML file ``p``, decoded as UTF-8.

    Raises:
        ConfigError: the file cannot be read, or is not UTF-8 text (e.g. an image given by mistake).
    """
    shown = shown or str(p)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=shown) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"not a UTF-8 text (YAML) file (byte {raw[exc.start:exc.start + 1]!r} at line {line}); give "
                          f"the path of {expected}", file=shown) from None


def load_raw(path: str | Path) -> dict[str, Any]:
    path = str(path)
    p = Path(path)
    if p.is_dir():
        raise ConfigError("is a directory, not a file (give the path of a YAML run config, e.g. "
                          "configs/mapf/random-32-32-10.yaml)", file=path)
    if p.exists() and not p.is_file():  # /dev/zero, a FIFO: reading it would hang or never end
        raise ConfigError("not a regular file (give the path of a YAML run config, e.g. "
                          "configs/mapf/random-32-32-10.yaml)", file=path)
    if not p.is_file():
        raise ConfigError("file not found (give the path of a YAML run config, e.g. configs/mapf/random-32-32-10.yaml)", file=path)
    text = read_yaml_text(p, path)
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(f"duplicate key {exc.key!r} (each key may appear once in a mapping; remove one)",
                          file=f"{path}, line {exc.line}") from None
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None
    if not isinstance(data, dict):
        if data is None:  # an empty file (or only comments)
            raise ConfigError("the file is empty (or only comments): a run config is a mapping with keys name, "
                              "scenario, agents, ...; see configs/ for examples", file=path)
        raise ConfigError(f"top level must be a mapping with keys name, scenario, agents, ...; got {type(data).__name__}", file=path)
    return data


#: the component sections of a run config whose ``params`` may name files (a Params field marked
#: ``json_schema_extra={"file": True}``, e.g. MG-MAPF's ``map`` and ``scen``, or such a field of a nested model, e.g.
#: bandwidth-v0's ``trace: {kind: csv, path: ...}``; ``{"file": True, "dir": True}``: a file or a directory)
_FILE_PARAM_SECTIONS = {"scenario": "scenario", "agents": "agent", "channel": "channel", "shield": "shield"}


def resolve_file_params(data: dict[str, Any], config_dir: Path) -> None:
    """Make the file params of ``data``'s components absolute, in place: a relative path names a file in the working
    folder or, failing that, beside the config file; the run's stored ``config.yaml`` then works from any folder. A
    value that is no such file (a shipped map name, a missing file) is left for the component's own check. Flagged
    fields of nested models (a CSV capacity trace's ``path``) are resolved too. The ``train:`` section's
    ``init_policy`` (a policy file or a seed directory) is resolved the same way."""
    for section, kind in _FILE_PARAM_SECTIONS.items():
        comp = data.get(section)
        if not (isinstance(comp, dict) and isinstance(comp.get("id"), str) and isinstance(comp.get("params"), dict)):
            continue
        try:
            factory = registry.spec(kind, comp["id"]).load()
        except Exception:  # noqa: BLE001 - an unknown or broken id is reported by validation, with its key
            continue
        _resolve_model_files(comp["params"], getattr(getattr(factory, "cls", factory), "Params", None), config_dir)
    train = data.get("train")
    if isinstance(train, dict) and isinstance(train.get("init_policy"), str):
        # train.init_policy (TrainSchedule): a policy file or a seed directory, found the same way
        train["init_policy"] = _found_path(train["init_policy"], config_dir, Path.exists)


def _resolve_model_files(params: dict[str, Any], model: Any, config_dir: Path) -> None:
    """Resolve (:func:`_found_path`) the fields of ``params`` that ``model`` (a pydantic model class) flags as files,
    in place, and those of nested models: a dict value of a field typed as a model or a union of models (a union
    member with a ``kind`` field only when the dict's ``kind`` is its own)."""
    for name, f in (getattr(model, "model_fields", None) or {}).items():
        value = params.get(name)
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        if extra.get("file") and isinstance(value, str) and not value.isdigit():
            params[name] = _found_path(value, config_dir, Path.exists if extra.get("dir") else Path.is_file)
        elif isinstance(value, dict):
            for sub in _model_classes(f.annotation):
                kind = sub.model_fields.get("kind")
                if kind is None or value.get("kind") == kind.default:
                    _resolve_model_files(value, sub, config_dir)


def _model_classes(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic model classes in a field annotation (the model itself, or the members of a union/Optional)."""
    if isinstance(annotation, type):
        return [annotation] if issubclass(annotation, BaseModel) else []
    return [m for a in getattr(annotation, "__args__", ()) for m in _model_classes(a)]


def _found_path(value: str, config_dir: Path, kind: Any) -> str:
    """``value`` as an absolute path when it is relative and ``kind`` (``Path.is_file``, ``Path.exists``) holds for it
    in the working folder or, failing that, beside the config; ``value`` unchanged otherwise."""
    rel = Path(value).expanduser()
    if value and not rel.is_absolute():
        for base in (Path.cwd(), config_dir):
            if kind(base / rel):
                return str((base / rel).resolve())
    return value


def load_config(path: str | Path, overrides: list[str] | None = None, *, check_components: bool = True) -> RunConfig:
    """Read, override and validate a run config, including each component's params.

    Of overrides that set the same key the last counts (``[*BASE, "seeds=[3]"]`` from Python); the ``coopsim``
    command refuses a key typed twice (:func:`check_unique_overrides`).

    Raises:
        ConfigError: anything invalid, with file, key, value and what is valid; a ``scenario.params.max_steps``
            override that the top-level ``max_steps`` would replace (:func:`check_max_steps_conflict`).
        RegistryError: an unknown component id (lists the registered ids).
    """
    overrides = list(overrides or [])
    raw = load_raw(path)
    in_file_sections = set(raw)  # apply_overrides adds to raw in place
    data = apply_overrides(raw, overrides)
    resolve_file_params(data, Path(path).parent)
    try:
        cfg = validate_config(data, file=str(path), check_components=False)
        check_max_steps_conflict(cfg, path, overrides)  # before the params are checked: the loser is never checked
        if check_components:
            validate_components(cfg, file=str(path))
        return cfg
    except ConfigError as exc:
        if isinstance(exc, _MaxStepsConflict):  # addressed to the right override already
            raise
        section = (exc.key or "").split(".")[0]
        if (exc.key == f"{section}.id" and section not in in_file_sections and isinstance(data.get(section), dict)
                and "id" not in data[section]):  # an override made the section (shield.params.x=1): it needs an id
            exc = ConfigError(f"missing required key '{section}.id': the file has no '{section}' section, so an "
                              f"override that sets a key in it needs {section}.id=<a registered id> as well "
                              f"(`coopsim list` shows them)",
                              file=exc.file, key=exc.key, value=exc.value, also=(section,))
        raise blame_override(exc, path, overrides) from None


def override_keys(overrides: list[str] | tuple[str, ...]) -> list[tuple[str, Any, str]]:
    """``(dotted key, value, text)`` of each valid override text, in order; texts that are no valid override are left
    out (:func:`apply_overrides` reports them)."""
    out = []
    for text in overrides:
        try:
            parts, value = parse_override(text)
        except ConfigError:
            continue
        out.append((".".join(p.strip() for p in parts), value, text))
    return out


def check_unique_overrides(overrides: list[str], path: str | Path) -> None:
    """Refuse a key given twice among the command-line ``overrides`` (``episodes=2 episodes=3``): one of the values
    would be dropped without a word, so the command line is ambiguous (as ``coopsim sweep`` refuses a ``--grid`` key
    given twice). The ``coopsim`` commands call it; :func:`load_config` does not (from Python, a later override of
    a key in a list built from a base list counts). Keys are compared as parsed (``episodes`` and `` episodes``); a
    key beside one of its parent or child keys (``channel.params={} channel.params.x=1``) is allowed. Texts that are
    no valid override are left to :func:`apply_overrides`, which reports them.

    Raises:
        ConfigError: key the repeated key; names both overrides and says which to keep.
    """
    first: dict[str, str] = {}
    for key, value, text in override_keys(overrides):
        if key in first:
            raise ConfigError(f"is given twice on the command line ('{first[key]}' and '{text}'); give it once, "
                              f"e.g. {text.strip()}", file=f"command-line override '{text}' (config {path})",
                              key=key, value=value)
        first[key] = text


class _MaxStepsConflict(ConfigError):
    """:func:`check_max_steps_conflict`'s error (load_config passes it on unchanged)."""


def check_max_steps_conflict(cfg: RunConfig, path: str | Path, overrides: list[str]) -> None:
    """Refuse a ``scenario.params.max_steps`` given on the command line beside a different top-level ``max_steps``
    (from the file or the command line): the top-level key overrides the scenario's param (module docstring,
    :meth:`RunConfig.scenario_params`), so the override would be ignored without a word. A top-level ``max_steps``
    override of a file's ``scenario.params.max_steps`` is that documented override and allowed, and so are both in the
    file (as before: a run's stored ``config.yaml`` may hold both, and ``--resume`` reads it).

    Raises:
        ConfigError: key ``scenario.params.max_steps``; names both keys and values and what to give instead.
    """
    top, sc = cfg.max_steps, cfg.scenario.params.get("max_steps")
    if top is None or sc is None:
        return
    if isinstance(sc, (int, float)) and not isinstance(sc, bool) and sc == top:  # 500 and 500.0 agree
        return
    parsed = [(k, t) for k, _, t in override_keys(overrides)]
    target = "scenario.params.max_steps"
    sc_text = next((t for k, t in reversed(parsed) if k == target or target.startswith(k + ".")), None)
    if sc_text is None:  # the scenario's max_steps is the file's
        return
    top_text = next((t for k, t in reversed(parsed) if k == "max_steps"), None)
    top_where = f"'{top_text}' on the command line" if top_text else f"max_steps: {top} in the file"
    shown = sc if not isinstance(sc, str) else repr(str(sc))
    raise _MaxStepsConflict(
        f"{shown} conflicts with the top-level max_steps ({top_where}), which overrides scenario.params.max_steps, so "
        f"{shown} would be ignored; give the episode step limit once, as the top-level key: keep max_steps={top} "
        f"and drop scenario.params.max_steps, or give max_steps={sc} instead",
        file=f"command-line override '{sc_text}' (config {path})", key=target, value=sc, also=("max_steps",))


#: keys a top-level override hands on to a component's params (the error then names the key the user typed)
_PASSED_ON = {"scenario.params.max_steps": "max_steps"}


def blame_override(exc: ConfigError, path: str | Path, overrides: list[str]) -> ConfigError:
    """``exc`` re-addressed to the command-line override its key came from (``command-line override 'k=v'
    (config FILE)``: the value is not in the file), or ``exc`` itself when no override sets that key.

    The last override that sets the key is the one whose value counts (``episodes=1 episodes=-1`` blames
    ``episodes=-1``; a sweep's grid values come after the fixed overrides); an override of exactly the key wins
    over one of a parent or child key; a top-level ``max_steps`` override is blamed for
    ``scenario.params.max_steps``, which it sets. An error across keys (``exc.also``) whose own key no override
    sets is blamed on the override of one of its other keys. A component's param (``channel.params.trace``) that no
    override sets, refused after an override of that component's id (``channel.id=ideal-v0``), is blamed on the id
    override, with the hint to pass ``channel.params={}`` beside it."""
    parsed = []
    for text in overrides:
        try:
            parts, _ = parse_override(text)
        except ConfigError:
            continue
        parsed.append((".".join(parts), text))
    if not exc.key:
        return exc
    alias = _PASSED_ON.get(exc.key)

    def matches(key: str, exact: bool) -> bool:
        if exact:
            return key == exc.key or key == alias
        return exc.key.startswith(key + ".") or key.startswith(exc.key + ".")

    for exact in (True, False):
        for key, text in reversed(parsed):
            if not matches(key, exact):
                continue
            msg = str(exc)[len(str(path)) + 2:] if str(exc).startswith(f"{path}: ") else str(exc)
            if key == alias:
                msg = msg.replace(f"key '{exc.key}'", f"key '{alias}' (passed on to {exc.key})", 1)
            new = ConfigError(msg, file=f"command-line override '{text}' (config {path})")
            new.key, new.value = (alias if key == alias else exc.key), exc.value
            return new
    parts = exc.key.split(".")
    if len(parts) >= 3 and parts[1] == "params":  # a component's param refused after its id was overridden
        for key, text in reversed(parsed):
            if key == f"{parts[0]}.id":
                return ConfigError(f"{exc.message}; the file's {parts[0]}.params were written for the file's {parts[0]}.id: "
                                   f"pass {parts[0]}.params={{}} (or the new component's params) with '{text}'",
                                   file=f"command-line override '{text}' (config {path})", key=exc.key, value=exc.value)
    for other in getattr(exc, "also", ()):  # a check across keys: the override that set the other key
        for key, text in reversed(parsed):
            if key == other or other.startswith(key + ".") or key.startswith(other + "."):
                return ConfigError(exc.message, file=f"command-line override '{text}' (config {path})",
                                   key=exc.key, value=exc.value)
    return exc


def check_buildable(cfg: RunConfig, *, file: str | None = None) -> None:
    """Build every component and reset the scenario with each seed's first episode seed, then let the agent
    act once and the scenario step once with its joint action, then reset the channel as the first episode does.

    Catches what only construction reveals (a bad map or scen file, more agents than a scen file
    has rows, an agent built for another scenario family) before a sweep starts or without running
    (``coopsim validate``); ``run_config`` makes the same checks on the components it runs.

    Raises:
        CoopsimError: the first problem, as the run would report it.
    """
    from coopsim.platform.runner import RunParts, check_first_step, check_resets

    parts = RunParts(cfg, file=file)
    try:
        check_resets(parts.scenario, cfg, file=file)
        check_first_step(parts, cfg, file=file)
        # the channel as the first episode resets it: what only the scenario's sizes reveal (a trace file's rate
        # columns against num_agents) is refused here, not at the run's first episode
        sc, seed = parts.scenario, cfg.seeds[0] * cfg.episodes
        parts.channel.reset(seed, num_envs=sc.num_envs, num_agents=sc.num_agents, dt_s=sc.dt_s, scenario=sc)
    finally:
        parts.close()


#: top-level keys that mark the input of an experiment script (not a run config), and the script
EXPERIMENT_FILES = (
    (("senders", "sender_params", "oracle", "anchor_seeds"), "python -m coopsim.comm.ns3.experiment",
     "run it with `python -m coopsim.comm.ns3.experiment FILE`"),
    (("channels",), "python -m coopsim.agents.ddacom.evaluate",
     "that script reads configs/mpe/channels.yaml itself: `python -m coopsim.agents.ddacom.evaluate`"),
)


def experiment_file_hint(data: Any) -> str | None:
    """A hint when ``data`` (a config file's top level) looks like the input of an experiment script rather than a
    run config (e.g. it has ``senders``), like the results file of one (its --out), or has none of a run config's
    keys ``name``, ``scenario``, ``agents`` at all (another results file, e.g. a benchmark's JSON); None otherwise."""
    if not isinstance(data, dict) or {"name", "agents"} <= set(data):
        return None
    if {"seeds_done", "summary", "runs"} <= set(data):  # what those scripts write (their --out), not what they read
        script = ("python -m coopsim.agents.ddacom.evaluate" if "args" in data and "oracle" not in data
                  else "python -m coopsim.comm.ns3.experiment")
        return (f"this looks like a results file that `{script}` writes (its --out), not a config: its tables are "
                f"in 'summary'; give `coopsim` a run config such as configs/examples/line-random.yaml")
    for keys, script, usage in EXPERIMENT_FILES:
        if any(k in data for k in keys):
            return (f"this looks like an experiment file of `{script}`, not a run config; {usage}, or give "
                    "`coopsim` a run config such as configs/examples/line-random.yaml")
    required = ("name", "scenario", "agents")
    if data and not any(difflib.get_close_matches(str(k).lower(), required, n=1, cutoff=0.7) for k in data):
        # e.g. benchmarks/results/smac_speed.json (a misspelt 'nmae' is a config, named by the missing-key message)
        return ("it has none of a run config's keys name, scenario, agents: not a run config (a results file?); "
                "give `coopsim` a run config such as configs/examples/line-random.yaml")
    return None


def validate_config(data: dict[str, Any], *, file: str | None = None, check_components: bool = True) -> RunConfig:
    # quoted=False: seeds, episodes and max_steps refuse a quoted number themselves (RunConfig._no_quoted_ints)
    reject_bools(data, RunConfig, file=file, quoted=False)
    try:
        cfg = RunConfig(**data)
    except ValidationError as exc:
        err = registry.pydantic_to_config_error(exc, RunConfig, file=file)
        hint = experiment_file_hint(data)
        if hint:
            new = ConfigError(f"{str(err)[len(f'{file}: ') if file and str(err).startswith(f'{file}: ') else 0:]}"
                              f" ({hint})", file=file)
            new.key, new.value = err.key, err.value
            err = new
        raise err from None
    if check_components:
        validate_components(cfg, file=file)
    return cfg


def validate_components(cfg: RunConfig, *, file: str | None = None) -> None:
    for kind, comp, params in (
        ("scenario", cfg.scenario, cfg.scenario_params()),
        ("agent", cfg.agents, cfg.agents.params),
        ("channel", cfg.channel, cfg.channel.params),
        ("shield", cfg.shield, cfg.shield.params),
    ):
        field = "agents" if kind == "agent" else kind
        try:
            registry.spec(kind, comp.id)
        except CoopsimError as exc:
            raise ConfigError(str(exc), file=file, key=f"{field}.id", value=comp.id) from None
        model = check_component_params(kind, comp.id, params, file=file, key_prefix=f"{field}.params.")
        whole_floats_to_ints(comp.params, model)  # valid: 1.5e3 for an int is stored as 1500 (the run's config.yaml)


def check_component_params(kind: str, id_: str, params: dict[str, Any], *, file: str | None,
                           key_prefix: str) -> type[BaseModel]:
    """A registered component's ``params`` as a run config's are checked (``coopsim validate``): a YAML 1.1 or
    quoted number, a boolean for a number, the component's schema, nan or inf; returns its Params model.

    Raises:
        ConfigError: names ``file`` and the key ``<key_prefix><name>`` with the value.
    """
    model = registry.spec(kind, id_).load().Params
    reject_yaml11_numbers(params, model, file=file, key_prefix=key_prefix)
    reject_quoted_scalars(params, model, file=file, key_prefix=key_prefix)  # '64' for a number
    registry.validate_params(kind, id_, params, file=file, key_prefix=key_prefix)
    _reject_non_finite(kind, id_, params, file=file, key_prefix=key_prefix)
    return model


def _non_finite(v: Any) -> bool:
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, str):  # 'inf', 'Infinity', '1e400' (YAML reads them as text; pydantic would make them floats)
        try:
            return not math.isfinite(float(v))
        except ValueError:
            return False
    if isinstance(v, (list, tuple)):  # not into mappings: a nested model (e.g. a trace) checks its own fields
        return any(_non_finite(x) for x in v)
    return False


def _reject_non_finite(kind: str, id_: str, params: dict[str, Any], *, file: str | None, key_prefix: str) -> None:
    """A nan or +-inf param (``.nan``, ``.inf`` in YAML) is refused, as config.yaml could not store it faithfully
    and no finite-valued param means it; except where the param's own default is that value (``inf = never``).

    Raises:
        ConfigError: key ``<field>.params.<name>``.
    """
    try:
        cls = registry.spec(kind, id_).load()
    except CoopsimError:
        return
    cls = cls.cls if isinstance(cls, registry.Variant) else cls
    fields = getattr(getattr(cls, "Params", None), "model_fields", {})
    for k, v in params.items():
        if not _non_finite(v):
            continue
        f = fields.get(k)
        d = getattr(f, "default", None)
        if isinstance(v, float) and isinstance(d, float) and math.isinf(d) and v == d:
            continue
        raise ConfigError(f"invalid value {v!r}: must be a finite number (not nan or inf)", file=file,
                          key=f"{key_prefix}{k}", value=v)


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True), sort_keys=False)

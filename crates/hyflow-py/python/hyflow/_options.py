"""Keyword arguments to the CLI's options.

Each function's keywords are the CLI's long options with ``_`` for ``-``; they are turned into
``--long-option=value`` and parsed by the CLI's own definitions in the engine, so defaults,
ranges and error messages are the CLI's. Here only the names are checked, so that a
misspelt keyword is a ``TypeError`` naming the keyword, as for any Python function.
"""

from __future__ import annotations

import functools
import json
import os
import textwrap
from dataclasses import dataclass

from . import _hyflow

#: CLI options that write files; the Python functions return the same data instead.
CLI_OUTPUTS = {
    "replay": {"json": "result.summary", "rule_stats": "result.rules", "decisions": "decisions=True"},
    "sim": {"json": "result.summary", "timeseries": "result.series", "decisions": "decisions=True"},
    "topk": {"json": "result.flows"},
    "eval_topk": {"json": "the returned DataFrame", "csv": "the returned DataFrame"},
    "trace": {"json": "result.record"},
}

@dataclass(frozen=True)
class Option:
    """One option of a command, as the CLI defines it."""

    name: str  #: the keyword (long option with ``_``)
    long: str  #: the CLI's long option, without dashes
    flag: bool  #: present or not, rather than taking a value
    positional: bool  #: a positional argument on the command line
    kind: str  #: int, float, path, str, choice or flag
    value_name: str | None  #: the value's name in the CLI's help
    default: str | None  #: the default as the CLI shows it
    choices: tuple[str, ...]  #: the allowed values, if a fixed set
    help: str  #: the CLI's help text

    @property
    def python_type(self) -> str:
        """The type a keyword takes, for stubs and docs."""
        return {"flag": "bool", "int": "int", "float": "float", "path": "str | os.PathLike[str]"}.get(self.kind, "str")

    def typed_default(self):
        """The default as a Python value (``None`` where the engine decides)."""
        if self.flag:
            return False
        if self.default is None:
            return None
        kind = self.python_type
        try:
            if kind == "int":
                return int(self.default)
            if kind == "float":
                return float(self.default)
        except ValueError:
            return self.default
        return self.default


@functools.cache
def options(command: str) -> dict[str, Option]:
    """The options of ``command`` (``replay``, ``sim``, ``topk``, ``eval_topk``, ``trace``,
    ``gen_traffic``, ...) by keyword, in the CLI's help order."""
    out = {}
    for o in json.loads(_hyflow.options(command)):
        name = o["long"].replace("-", "_")
        out[name] = Option(
            name=name,
            long=o["long"],
            flag=o["flag"],
            positional=o["positional"],
            kind=o["kind"],
            value_name=o["value_name"],
            default=o["default"],
            choices=tuple(o["choices"]),
            help=" ".join(o["help"].split()),
        )
    return out


def _text(value) -> str:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def argv(command: str, kwargs: dict) -> list[str]:
    """The command line ``kwargs`` stand for; ``None`` values are left out (the default)."""
    known = options(command)
    out: list[str] = []
    positionals: list[str] = []
    for name, value in kwargs.items():
        if value is None:
            continue
        if name in CLI_OUTPUTS.get(command, {}):
            raise TypeError(f"{command}(): '{name}' is the CLI's output option; use {CLI_OUTPUTS[command][name]}")
        opt = known.get(name)
        if opt is None:
            names = [k for k in known if k not in CLI_OUTPUTS.get(command, {})]
            raise TypeError(f"{command}() got an unexpected keyword argument '{name}' (options: {', '.join(names)})")
        if opt.flag:
            if not isinstance(value, bool):
                raise TypeError(f"{command}(): '{name}' is a flag: True or False, not {value!r}")
            if value:
                out.append(f"--{opt.long}")
        elif opt.positional:
            positionals.append(_text(value))
        else:
            if isinstance(value, bool):
                raise TypeError(f"{command}(): '{name}' takes a {opt.python_type}, not {value!r}")
            text = _text(value)
            # `find="min_cores"` as well as the CLI's `min-cores`: keywords are spelt with `_`.
            if opt.choices and text not in opt.choices and text.replace("_", "-") in opt.choices:
                text = text.replace("_", "-")
            out.append(f"--{opt.long}={text}")
    if positionals:
        out.append("--")
        out.extend(positionals)
    return out


def document(command: str, intro: str) -> str:
    """A docstring: ``intro`` and every keyword with its default and the CLI's help."""
    lines = [intro.strip(), "", "Keyword arguments (the CLI's long options, ``-`` as ``_``):", ""]
    for o in options(command).values():
        if o.name in CLI_OUTPUTS.get(command, {}):
            continue
        default = "" if o.default is None or o.flag else f" (default {o.default})"
        kind = " | ".join(repr(c) for c in o.choices) if o.choices else o.python_type
        lines.append(f"    {o.name}: {kind}{default}")
        if o.help:
            lines.extend(textwrap.wrap(o.help, width=92, initial_indent=" " * 8, subsequent_indent=" " * 8,
                                       break_on_hyphens=False))
    return "\n".join(lines)

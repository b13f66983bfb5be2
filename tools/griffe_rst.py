"""A griffe extension: read dpkit's reStructuredText-flavoured docstrings as Markdown.

dpkit's docstrings write code as ``double backticks`` (already code in Markdown), name other
objects with Sphinx roles (``:class:`~dpkit.noise.RandomSource```), write powers as ``2**-20`` and
introduce examples with ``::``. The API reference renders docstrings as Markdown, where a role
would show its markup and ``**`` would start bold text. This extension rewrites, outside code
spans only: a role becomes inline code with the object's name (the last component when the target
starts with ``~``), a ``*`` or ``**`` between operands is escaped, and a paragraph ending in ``::``
ends in ``:``. Roles are not turned into links on purpose: many name modules that have no page of
their own, and an unresolved link fails the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_CODE = re.compile(r"(``.+?``|`[^`\n]+`)")
_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
_STAR = re.compile(r"(?<=[\w)\]])(\*\*?)(?=[-\w(])")


def _outside_code(text: str) -> str:
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = _STAR.sub(lambda m: "\\*" * len(m.group(1)), parts[i])
    return "".join(parts)


def convert(text: str) -> str:
    """The Markdown reading of one docstring."""

    def role(m: re.Match[str]) -> str:
        target = m.group(2).strip()
        if m.group(1) == "~":
            target = target.rsplit(".", 1)[-1]
        return f"`{target}`"

    text = _ROLE.sub(role, text)
    text = re.sub(r"(?<=\S)::$", ":", text, flags=re.M)
    text = re.sub(r"^::$", "", text, flags=re.M)
    return _outside_code(text)


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring of the loaded objects (see the module docstring)."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)

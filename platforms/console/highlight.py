"""A tiny syntax highlighter: escaped HTML with ``<span class=...>`` around what matters.

Diffs: added, removed, hunk and file-header lines. Shell commands: the program of each
command, flags, quoted strings, operators, variables and comments. Nothing else is coloured;
everything is escaped, so what the agent asked for is shown exactly, character for character.
"""

from __future__ import annotations

import re
from html import escape

__all__ = ["highlight_code", "highlight_diff", "highlight_shell"]

_DIFF_CLASSES = (
    ("diff --git", "hd"),
    ("index ", "hd"),
    ("+++", "hd"),
    ("---", "hd"),
    ("*** ", "hd"),  # apply_patch envelopes: *** Begin Patch, *** Add File: ...
    ("@@", "hunk"),
    ("+", "add"),
    ("-", "del"),
)


def highlight_diff(diff: str) -> str:
    lines = []
    for line in diff.split("\n"):
        css = next((c for prefix, c in _DIFF_CLASSES if line.startswith(prefix)), None)
        text = escape(line)
        lines.append(f'<span class="{css}">{text}</span>' if css else text)
    return "\n".join(lines)


_SHELL_TOKEN = re.compile(
    r"""(?P<comment>(?<!\S)\#[^\n]*)
      |(?P<string>'[^']*'?|"(?:[^"\\]|\\.)*"?)
      |(?P<op>&&|\|\||[|;&<>]+|\n)
      |(?P<var>\$\{[^}]*\}?|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9?@#$!*-])
      |(?P<space>[ \t]+)
      |(?P<word>[^\s'"|;&<>$]+|\$)
      |(?P<other>[\s\S])""",
    re.VERBOSE,
)


def highlight_shell(command: str) -> str:
    out: list[str] = []
    at_start = True  # the next word is the program of a command
    for match in _SHELL_TOKEN.finditer(command):
        kind, text = match.lastgroup, match.group()
        safe = escape(text)
        if kind in ("space", "other"):
            out.append(safe)
        elif kind == "word":
            if at_start and "=" in text and not text.startswith("="):
                out.append(f'<span class="var">{safe}</span>')  # VAR=value before the program
            elif at_start:
                out.append(f'<span class="prog">{safe}</span>')
                at_start = False
            elif text.startswith("-"):
                out.append(f'<span class="flag">{safe}</span>')
            else:
                out.append(safe)
        else:
            out.append(f'<span class="{kind}">{safe}</span>')
            if kind == "op":
                at_start = text not in (">", "<", ">>", "<<", "2>", "&>")
            else:
                at_start = at_start and kind == "comment"
    return "".join(out)


_SHELLS = frozenset({"sh", "bash", "shell", "zsh", "console"})


def highlight_code(code: str, language: str) -> str | None:
    """A code block of the agent's Markdown, coloured if it is a diff or a shell script
    (None: left plain); gateway.render.markdown.console_html's highlighter."""
    if language in ("diff", "patch"):
        return highlight_diff(code)
    if language in _SHELLS:
        return highlight_shell(code)
    return None

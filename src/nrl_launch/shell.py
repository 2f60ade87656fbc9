"""Shell quoting: the one function through which every user value reaches a shell.

`quote()` returns a `ShellWord`, a str that bash reads back as exactly the original value. The
Jinja environment refuses to print any str that is not a `ShellWord`, so a template cannot
forget to quote a value.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

__all__ = ["ShellWord", "join", "quote", "sourced"]

# Control characters (C0 and DEL) cannot sit raw in a rendered script: a newline would let a
# value end a heredoc or a comment line early. Such values use bash's $'...' form instead.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}
# In '...' every character is literal, but shellcheck takes a `$` or a backquote for an
# expansion that was meant to happen (SC2016) and a backslash before the closing quote for an
# attempt to escape it (SC1003). In $'...' they are plainly literal (the backslash escaped).
_MISREAD = re.compile(r"[$`\\]")
# Words that need no quotes, but that shellcheck misreads as array elements: a `,` as a
# mistaken separator (SC2054), and digits and `=` at the start, or after a `+` or `@` (where an
# extglob such as `+(...)` could start), as a mistaken `[index]=value` (SC2191): `a,b`, `=x`,
# `1=x`, `a+=x`. Such words are quoted in a script.
_ARRAY_MISREAD = re.compile(r",|(?:^|[+@])[0-9]*=")
# bash's reserved words need no quotes as an argument either, but shellcheck reads a bare
# `then` or `fi` in an array or a command as a misplaced keyword (SC1010 and friends).
_RESERVED = frozenset(
    [
        "!",
        "case",
        "coproc",
        "do",
        "done",
        "elif",
        "else",
        "esac",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "select",
        "then",
        "time",
        "until",
        "while",
        "{",
        "}",
        "[[",
        "]]",
    ]
)


class ShellWord(str):
    """A string already quoted for bash: safe to paste into a script as one word."""

    __slots__ = ()


def quote(value: str | int | ShellWord, *, script: bool = False) -> ShellWord:
    """Quote `value` so that bash reads it back byte for byte as one word.

    With `script`, the word is for a script that shellcheck reads (the templates' `q` filter), and
    quoted so that shellcheck finds nothing to say about it: a value with `$`, a backquote or a
    backslash is written $'...' instead of '...', and `a,b` or `=x` is quoted although bash
    would not need it. A command line printed for a user to paste keeps the plainer '...'.

    Raises:
        ValueError: the value holds a NUL byte, which no shell word or argv entry can carry.
        TypeError: the value is not a str or an int (bools and None never belong in a script).
    """
    if isinstance(value, ShellWord):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"cannot shell-quote a {type(value).__name__}: {value!r}")
    text = str(value)
    if "\x00" in text:
        raise ValueError("a NUL byte cannot be passed to a shell")
    if _CONTROL.search(text) or (script and _MISREAD.search(text)):
        escaped = "".join(
            _NAMED_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if _CONTROL.match(ch) else ch)
            for ch in text
        )
        return ShellWord(f"$'{escaped}'")
    word = shlex.quote(text)
    if script and word == text and (_ARRAY_MISREAD.search(text) or text in _RESERVED):
        word = f"'{text}'"
    return ShellWord(word)


def join(words: Iterable[str | int]) -> ShellWord:
    """Quote each word and join them with spaces: one command line for bash."""
    return ShellWord(" ".join(quote(w) for w in words))


# Words that may come before a command without being it (`then source x`, `{ . x; }`).
_LEAD_WORDS = {"then", "do", "else", "{", "!"}


def sourced(setup: str) -> list[tuple[str, bool]]:
    """The files a setup command sources (`source X`, `. X`), in order, each with whether a
    `cd` (or pushd) came before it: a relative X then resolves somewhere else. Words with
    `$` or a backquote are left out (their value is the job's); a setup with an open quote,
    which bash refuses, gives none."""
    lexer = shlex.shlex(setup, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an open quote: bash refuses it too
        return []
    found: list[tuple[str, bool]] = []
    moved = False
    command: list[str] = []
    for token in [*tokens, ";"]:
        if token and all(c in lexer.punctuation_chars for c in token):
            while command and command[0] in _LEAD_WORDS:
                command.pop(0)
            if command[:1] in (["cd"], ["pushd"]):
                moved = True
            elif (
                len(command) > 1
                and command[0] in ("source", ".")
                and not any(c in command[1] for c in "$`")
            ):
                found.append((command[1], moved))
            command = []
        else:
            command.append(token)
    return found

"""The words of a command line as the CLI declares them, for the remote forwarder: which are
options, which are an option's values, and which are the command's arguments (its JOBIDs).

The forwarder must tell a job id from an option's value (`status --experiment 4242`) before it
knows where a command runs. What it knows comes from the command itself (typer's click command,
handed over by the CLI: its options, how many values each takes, its arguments), never from a
list kept here: a new option is known the moment it is declared. Imports nothing heavy: the
CLI reads it before it knows whether a command goes to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Grammar", "Word", "given", "job_ids", "split", "texts", "value", "without"]

JOBID = "JOBID"  # the metavar of every argument that names jobs (cli.status.job_argument)


@dataclass(frozen=True)
class Grammar:
    """A command's options (every spelling -> its canonical name and how many values it takes;
    0: a flag) and its arguments in order (metavar, nargs; -1: as many as there are)."""

    options: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    arguments: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, command: Any) -> Grammar:
        """The grammar of a click command (typer's own click: read by its attributes); None
        (a command this CLI does not have): options are read as flags, words as arguments."""
        options: dict[str, tuple[str, int]] = {}
        arguments: list[tuple[str, int]] = []
        for param in getattr(command, "params", ()):
            if param.param_type_name == "argument":
                arguments.append((str(param.metavar or param.name).upper(), int(param.nargs)))
                continue
            takes = 0 if param.is_flag or param.count else int(param.nargs)
            for spellings in (param.opts, param.secondary_opts):
                if spellings:
                    name = max(spellings, key=len)  # --job for -f/--job
                    options |= {s: (name, takes) for s in spellings}
        return cls(options, tuple(arguments))

    @property
    def names_jobs(self) -> bool:
        """Whether the command's arguments are job ids (status, logs, cancel...)."""
        return any(metavar == JOBID for metavar, _ in self.arguments)


@dataclass(frozen=True)
class Word:
    """One word of a command line: an option (its canonical names: several for `-qf`; and a
    value given in the same word, `--tail=5`), an option's value, an argument (its metavar;
    "" past the last one), or `--` itself."""

    text: str
    kind: Literal["option", "value", "argument", "end"]
    names: tuple[str, ...] = ()
    attached: str | None = None


def split(grammar: Grammar, words: Sequence[str]) -> list[Word]:
    """`words` (a command's, after its name) as click reads them: options and their values up
    to `--`, every other word (and every one after `--`) an argument."""
    out: list[Word] = []
    owed = 0  # values the last option still takes from the next words
    ended = False
    for text in words:
        if owed:
            out.append(Word(text, "value", out[-1].names[-1:]))
            owed -= 1
        elif ended or not text.startswith("-") or text == "-":
            out.append(Word(text, "argument"))
        elif text == "--":
            out.append(Word(text, "end"))
            ended = True
        else:
            word, owed = _option(grammar.options, text)
            out.append(word)
    return _assign(grammar.arguments, out)


def _option(options: Mapping[str, tuple[str, int]], text: str) -> tuple[Word, int]:
    """An option word, and how many of the next words are its values."""
    if text.startswith("--") or text in options:
        spelling, eq, attached = text.partition("=")
        name, takes = options.get(spelling, (spelling, 0))  # unknown: a flag
        if eq:
            return Word(text, "option", (name,), attached), max(takes - 1, 0)
        return Word(text, "option", (name,)), takes
    # Short options together (-qf FILE, -n4): each a flag, up to one that takes a value, which
    # is the rest of the word (or the next words).
    names: list[str] = []
    for i, letter in enumerate(text[1:], start=1):
        name, takes = options.get(f"-{letter}", (f"-{letter}", 0))
        names.append(name)
        if takes:
            rest = text[i + 1 :]
            if rest:
                return Word(text, "option", tuple(names), rest), takes - 1
            return Word(text, "option", tuple(names)), takes
    return Word(text, "option", tuple(names)), 0


def _assign(arguments: Sequence[tuple[str, int]], words: list[Word]) -> list[Word]:
    """Each argument word named by the argument it fills, as click fills them: in order, one
    that takes any number leaving enough words for those after it."""
    given = [i for i, w in enumerate(words) if w.kind == "argument"]
    metavars: list[str] = []
    left = len(given)
    for k, (metavar, nargs) in enumerate(arguments):
        after = sum(n for _, n in arguments[k + 1 :] if n > 0)
        take = max(left - after, 0) if nargs < 0 else min(nargs, left)
        metavars += [metavar] * take
        left -= take
    metavars += [""] * left
    named = list(words)
    for i, metavar in zip(given, metavars, strict=True):
        named[i] = Word(words[i].text, "argument", (metavar,))
    return named


def job_ids(words: Sequence[Word]) -> list[str]:
    """The words that fill the command's JOBID argument."""
    return [w.text for w in words if w.kind == "argument" and w.names == (JOBID,)]


def value(words: Sequence[Word], name: str) -> str | None:
    """The (last) value given to option `name` (canonical), or None."""
    found = None
    for i, w in enumerate(words):
        if w.kind == "option" and w.names[-1:] == (name,):
            if w.attached is not None:
                found = w.attached
            elif i + 1 < len(words) and words[i + 1].kind == "value":
                found = words[i + 1].text
    return found


def given(words: Sequence[Word], name: str) -> bool:
    """Whether option `name` (canonical) is among the words."""
    return any(w.kind == "option" and name in w.names for w in words)


def without(words: Sequence[Word], *names: str) -> list[Word]:
    """The words with options `names` (canonical; each given alone in its word) and their
    values left out."""
    kept: list[Word] = []
    dropping = False
    for w in words:
        if w.kind == "value" and dropping:
            continue
        dropping = w.kind == "option" and len(w.names) == 1 and w.names[0] in names
        if not dropping:
            kept.append(w)
    return kept


def texts(words: Sequence[Word]) -> list[str]:
    return [w.text for w in words]

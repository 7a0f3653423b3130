"""The argument parser of every (sub)command: no abbreviations, and an argument it does not
know refused with the command's own usage and the flag most likely meant.

``--colum DOI`` is not taken for ``--column``: an abbreviation that works today would change
meaning, silently, the day a flag ``--columns`` is added. A flag from another tool
(``--sep``, pandas' name for our ``--delimiter``) or a typo is answered with the nearest of
the command's own flags. Standard library only (``--help`` must work on any install).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["ALIASES", "Parser", "meant", "unrecognized"]

#: What the input file is called in the usage lines: it is given without a flag.
INPUT = "IN"

#: Flags other tools spell differently -> ours, the first one the command has (``IN``: the
#: input file, which takes no flag). Typos and abbreviations need no entry: the nearest flag
#: is found by spelling.
ALIASES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("--sep", "--separator", "--seperator", "--field-separator", "--fs", "-d",
                     "-t", "-F"), ("--delimiter",)),
    **dict.fromkeys(("--charset", "--input-encoding", "--in-encoding", "-e"), ("--encoding",)),
    **dict.fromkeys(("--out-encoding", "--output-charset"), ("--output-encoding",)),
    **dict.fromkeys(("--na", "--nulls", "--null-values", "--missing", "--na-rep"),
                    ("--na-values",)),
    **dict.fromkeys(("--col", "--field", "-c"), ("--column",)),
    **dict.fromkeys(("--outfile", "--out-file", "--output-file"), ("--output",)),
    **dict.fromkeys(("--output-format", "--out-format", "--to"), ("--format",)),
    **dict.fromkeys(("--in-format", "--from"), ("--input-format",)),
    **dict.fromkeys(("--input", "--in", "--infile", "--input-file", "--file", "-i", "-f"),
                    (INPUT,)),
    **dict.fromkeys(("--retries", "--max-retries", "--tries", "--attempts"),
                    ("--max-attempts",)),
    **dict.fromkeys(("--mailto", "--email", "--user-agent", "--polite"), ("--contact",)),
    **dict.fromkeys(("--jobs", "-j", "--threads", "--parallel", "--workers"),
                    ("--concurrency", "--workers")),
    **dict.fromkeys(("--url", "--proxy", "--proxy-url", "--server", "--endpoint"),
                    ("--base-url",)),
    **dict.fromkeys(("--rps", "--rate-limit", "--requests-per-second"), ("--rate",)),
    **dict.fromkeys(("--quiet", "-q", "--silent", "--no-progress-bar"), ("--no-progress",)),
}

#: A negative number, which argparse reads as a value, not a flag.
_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` that takes no abbreviation and refuses what it does
    not know at once, with its own usage (argparse would leave it to the top-level parser,
    whose usage says nothing of the subcommand's flags). The parsers of its subcommands are
    of this class too (``add_subparsers`` makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        #: What this parser was given: a required flag found missing may be one mistyped.
        self._given = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(self._given, namespace)
        if extras:
            self.error(unrecognized(self, extras))
        return namespace, extras

    def error(self, message: str) -> NoReturn:
        """argparse checks the required arguments before it refuses the unknown ones: when
        one is missing and a flag the command does not know was given (``--outptu`` for
        ``--output``), the unknown flag is the mistake to name."""
        if message.startswith("the following arguments are required"):
            strays = [item for item in getattr(self, "_given", ()) if self._unknown_flag(item)]
            if strays:
                message = unrecognized(self, strays)
        super().error(message)

    def _unknown_flag(self, item: str) -> bool:
        """Whether argparse reads ``item`` as a flag this parser does not have: not a value
        (``-``, ``-5``, ``'-, NA'`` with its space), not one of ours with its value attached
        (``-oout.csv``, ``--output=x``)."""
        found = self._parse_optional(item)
        if found is None:
            return False
        entries = found if isinstance(found, list) else [found]  # a list from Python 3.12
        return all(entry[0] is None for entry in entries)


def unrecognized(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The error for arguments ``parser`` does not take: the first unknown flag and the one
    most likely meant, or where the options are listed."""
    flags = [item for item in extras if item.startswith("-") and item != "-"
             and not _NUMBER.match(item)]
    if not flags:
        listed = " ".join(extras)
        return (f"unrecognized argument{'s' if len(extras) > 1 else ''} {listed}; "
                f"{parser.prog} --help says what it takes")
    flag = flags[0].split("=", 1)[0]
    guess = meant(flag, parser)
    if guess == INPUT:
        return (f"unrecognized argument {flag}; the input file takes no flag: it is {INPUT} "
                "in the usage above")
    if guess is not None:
        return f"unrecognized argument {flag}; did you mean {guess}?"
    return f"unrecognized argument {flag}; {parser.prog} --help lists the options"


def meant(flag: str, parser: argparse.ArgumentParser) -> str | None:
    """The flag of ``parser`` that ``flag`` most likely meant: another tool's name for it
    (:data:`ALIASES`), else the one it abbreviates, else the nearest in spelling; None when
    none is near."""
    known = list(parser._option_string_actions)
    inputs = [action.metavar for action in parser._actions
              if not action.option_strings and action.metavar == INPUT]
    for candidate in ALIASES.get(flag, ()):
        if candidate in known or candidate in inputs:
            return candidate
    started = [option for option in known if option.startswith(flag) and len(flag) > 2]
    found = difflib.get_close_matches(flag, started, n=1, cutoff=0.0) if started else (
        difflib.get_close_matches(flag, known, n=1, cutoff=0.75))
    return found[0] if found else None

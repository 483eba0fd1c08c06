"""Errors kvplan raises for things a user can fix.

The hierarchy::

    KvplanError                 anything kvplan reports as "Error: ... / Hint: ..."
    ├── CardError               a model or hardware card is malformed, incomplete or unknown
    │   ├── UnknownCardError    no card of that name (carries did-you-mean suggestions)
    │   └── MissingFigureError  a card lacks a figure the requested computation needs
    ├── InputError              a bad flag value, file or trace row
    │   └── UnitError           a size or duration that does not parse ("12x", "-5")
    └── InfeasibleError         a result, not a mistake: nothing fits / no plan meets the SLOs
        └── AnswerNo            the same, when the command's output already says so (no Error line)

The command line's one error boundary maps ``InfeasibleError`` to exit code 1 and every
other ``KvplanError`` to exit code 2; nothing else in the CLI exits 1.
"""

from __future__ import annotations


class KvplanError(Exception):
    """Base class: a message for the user and an optional hint for what to do next."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def prefixed(self, prefix: str) -> "KvplanError":
        """The same error (same class, hint and fields) with ``prefix`` before its message.

        Subclasses take different constructor arguments (``UnknownCardError`` needs its
        suggestions), so the copy is made without calling ``__init__`` again.
        """
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.message = f"{prefix}{self.message}"
        clone.args = (clone.message,)
        return clone


class CardError(KvplanError):
    """A card is malformed, incomplete or cannot be found."""


class UnknownCardError(CardError):
    """No card has this name or alias."""

    def __init__(self, kind: str, name: str, suggestions: list[str], hint: str | None = None) -> None:
        hint = hint or (
            f"did you mean {', '.join(repr(s) for s in suggestions)}?"
            if suggestions
            else f"run 'kvplan cards list' to see the {kind} cards, or pass a path"
        )
        super().__init__(f"unknown {kind} '{name}'", hint)
        self.kind = kind
        self.name = name
        self.suggestions = suggestions


class MissingFigureError(CardError):
    """A card lacks a figure needed for the requested computation; kvplan never guesses it."""


class InputError(KvplanError):
    """A bad option value, input file or trace row."""


class UnitError(InputError):
    """A quantity (tokens, bytes, seconds) that does not parse or is out of range."""


class InfeasibleError(KvplanError):
    """The question has an answer, and the answer is 'no': exit code 1, not a crash."""

    exit_code = 1


class AnswerNo(InfeasibleError):
    """The answer is "no" and the output already written says why: exit code 1, no Error/Hint lines."""

    def __init__(self, message: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint)

"""Putting a token's value into a `run.shell` script as data: one shell word, whatever it holds.

A value goes into the script quoted for the place its token sits in, so bash reads it back exactly:
- outside quotes: `shlex.quote` (a `'…'` word; `'` as `'"'"'`);
- inside `"…"`: `\\`, `$`, `` ` `` and `"` escaped with a backslash (a bare `'…'` there would be text,
  and `$(…)` inside it would run);
- inside `'…'`: each `'` as `'\\''`; inside `$'…'`: `\\` and `'` escaped;
- in a here-document body: like `"…"` but `"` kept (an unquoted delimiter), as is (a quoted one);
  a value whose line would end the here-document early is refused;
- in a comment: newlines become spaces (a newline would end the comment).
Places where no quoting keeps a value one word — inside backquotes, `${…}`, `$((…))` or `((…))`, or
right after a backslash — take only plain values (letters, digits, `_.,:/@%+=-`); anything else is a
QuoteError that names the token and the fix.

`{{config.KEY|raw}}` puts the value in as is (shell syntax the spec's author means; the existing engine
does this for every token). Its text is read by the same scanner, so what follows is still quoted right.

The scanner follows bash's quoting rules closely enough to know the context of each token: quotes,
backslashes, `$(…)` with nested parentheses, backquotes, `${…}`, arithmetic, comments and
here-documents. It is a quoting scanner, not a parser (a `case` pattern's `)` inside `$(…)` is read
as the end of the substitution).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field


class QuoteError(ValueError):
    """A value that cannot be put at its place in a script as one word. `hint` says how to fix it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

_PLAIN = re.compile(r"[A-Za-z0-9_.,:/@%+=\-]*")
_WORD_BREAK = set(" \t\n;&|()<>")


@dataclass
class _Frame:
    kind: str  # cmd (top level or `$(`), dq, sq, ansi, bt, param, arith, comment, heredoc
    depth: int = 0  # open parentheses (cmd inside `$(`, arith) or braces (param)
    closer: str = ""  # cmd: ")" inside `$(`, "" at top level
    delim: str = ""  # heredoc: its delimiter
    strip_tabs: bool = False  # heredoc: `<<-`
    quoted: bool = False  # heredoc: the delimiter was quoted (a literal body)
    line: str = ""  # heredoc: the current line so far
    line_token: str = ""  # heredoc: the token whose value the current line holds
    at_word_start: bool = True  # cmd: the next character starts a word (a `#` there is a comment)
    pending: list[tuple[str, bool, bool]] = field(default_factory=list)  # cmd: heredocs to read after \n


class ShellScanner:
    """The quoting context at each point of a script fed to it piece by piece."""

    def __init__(self) -> None:
        self.stack: list[_Frame] = [_Frame("cmd")]
        self.escaped = False  # the last character was an unquoted (or double-quoted) backslash
        self._text = ""
        self._i = 0
        self._inserting = ""  # the token whose value is being fed, for messages

    @property
    def top(self) -> _Frame:
        return self.stack[-1]

    def context(self) -> str:
        """Where the next character lands: a frame kind, or `escaped` right after a backslash."""
        return "escaped" if self.escaped else self.top.kind

    def signature(self) -> list[tuple[str, int, str]]:
        return [(f.kind, f.depth, f.delim) for f in self.stack]

    def feed(self, text: str, inserted: str = "") -> None:
        self._text, self._i, self._inserting = text, 0, inserted
        while self._i < len(text):
            self._step()

    # --- the scanner ---------------------------------------------------------------------------

    def _peek(self, n: int = 1) -> str:
        return self._text[self._i + 1: self._i + 1 + n]

    def _step(self) -> None:
        ch = self._text[self._i]
        frame = self.top
        if self.escaped:
            self.escaped = False
            frame.at_word_start = False
            if frame.kind == "heredoc":
                self._heredoc_char(frame, ch)
            self._i += 1
            return
        handler = getattr(self, f"_in_{frame.kind}")
        handler(frame, ch)

    def _advance(self, n: int = 1) -> None:
        self._i += n

    def _push(self, frame: _Frame, n: int) -> None:
        self.stack.append(frame)
        self._advance(n)

    def _pop(self, n: int = 1) -> None:
        self.stack.pop()
        self._advance(n)

    def _dollar(self, ch: str) -> bool:
        """`$(`, `$((`, `${`, `` ` `` open a frame in every context that expands; True when one did."""
        if ch == "`":
            self._push(_Frame("bt"), 1)
            return True
        if ch != "$":
            return False
        if self._peek(2) == "((":
            self._push(_Frame("arith"), 3)
            return True
        if self._peek() == "(":
            self._push(_Frame("cmd", closer=")"), 2)
            return True
        if self._peek() == "{":
            self._push(_Frame("param"), 2)
            return True
        return False

    def _in_cmd(self, frame: _Frame, ch: str) -> None:
        word_start, frame.at_word_start = frame.at_word_start, ch in _WORD_BREAK
        if ch == "\\":
            self.escaped = True
            self._advance()
        elif ch == "'":
            self._push(_Frame("sq"), 1)
        elif ch == '"':
            self._push(_Frame("dq"), 1)
        elif ch == "$" and self._peek() == "'":
            self._push(_Frame("ansi"), 2)
        elif self._dollar(ch):
            pass
        elif ch == "#" and word_start:
            self._push(_Frame("comment"), 1)
        elif ch == "(" and word_start and self._peek() == "(":
            self._push(_Frame("arith"), 2)
        elif ch == "(":
            frame.depth += 1
            self._advance()
        elif ch == ")" and frame.closer == ")" and frame.depth == 0:
            self._pop()
        elif ch == ")":
            frame.depth = max(frame.depth - 1, 0)
            self._advance()
        elif ch == "<" and self._peek(2)[:1] == "<" and self._peek(2)[1:] != "<":
            self._heredoc_operator(frame)
        elif ch == "\n" and frame.pending:
            self._advance()
            for delim, strip_tabs, quoted in reversed(frame.pending):  # the first one is read first
                self.stack.append(_Frame("heredoc", delim=delim, strip_tabs=strip_tabs, quoted=quoted))
            frame.pending.clear()
        else:
            self._advance()

    def _heredoc_operator(self, frame: _Frame) -> None:
        """`<<WORD` / `<<-WORD`: read the delimiter word; its body starts after the line ends."""
        j = self._i + 2
        strip_tabs = self._text[j: j + 1] == "-"
        j += strip_tabs
        while j < len(self._text) and self._text[j] in " \t":
            j += 1
        start = j
        while j < len(self._text) and self._text[j] not in _WORD_BREAK:
            if self._text[j] in "'\"":  # a quoted part may hold spaces
                close = self._text.find(self._text[j], j + 1)
                j = len(self._text) if close < 0 else close + 1
            else:
                j += 1
        word = self._text[start:j]
        if word:
            quoted = any(q in word for q in "'\"\\")
            frame.pending.append((re.sub(r"['\"\\]", "", word), strip_tabs, quoted))
        self._i = j
        frame.at_word_start = False

    def _in_dq(self, frame: _Frame, ch: str) -> None:
        if ch == "\\":
            self.escaped = True
            self._advance()
        elif ch == '"':
            self._pop()
        elif not self._dollar(ch):
            self._advance()

    def _in_sq(self, frame: _Frame, ch: str) -> None:
        if ch == "'":
            self._pop()
        else:
            self._advance()

    def _in_ansi(self, frame: _Frame, ch: str) -> None:
        if ch == "\\":
            self._advance(2)
        elif ch == "'":
            self._pop()
        else:
            self._advance()

    def _in_bt(self, frame: _Frame, ch: str) -> None:
        if ch == "\\":
            self._advance(2)
        elif ch == "`":
            self._pop()
        else:
            self._advance()

    def _in_param(self, frame: _Frame, ch: str) -> None:
        if ch == "\\":
            self._advance(2)
        elif ch == "{":
            frame.depth += 1
            self._advance()
        elif ch == "}" and frame.depth == 0:
            self._pop()
        elif ch == "}":
            frame.depth -= 1
            self._advance()
        elif ch in "'\"" or self._dollar(ch):
            if ch in "'\"":
                self._push(_Frame("sq" if ch == "'" else "dq"), 1)
        else:
            self._advance()

    def _in_arith(self, frame: _Frame, ch: str) -> None:
        if ch == "(":
            frame.depth += 1
            self._advance()
        elif ch == ")" and frame.depth == 0 and self._peek() == ")":
            self._pop(2)
        elif ch == ")":
            frame.depth = max(frame.depth - 1, 0)
            self._advance()
        elif not self._dollar(ch):
            self._advance()

    def _in_comment(self, frame: _Frame, ch: str) -> None:
        if ch == "\n":
            self.stack.pop()  # the newline itself belongs to the command level (heredocs start there)
        else:
            self._advance()

    def _in_heredoc(self, frame: _Frame, ch: str) -> None:
        if not frame.quoted and ch == "\\":
            self.escaped = True
            frame.line += ch
            self._advance()
        elif not frame.quoted and self._dollar(ch):
            frame.line += "$"  # the expansion is part of this line; it is never the delimiter
        else:
            self._heredoc_char(frame, ch)
            self._advance()

    def _heredoc_char(self, frame: _Frame, ch: str) -> None:
        if self._inserting:
            frame.line_token = self._inserting
        if ch != "\n":
            frame.line += ch
            return
        self._end_heredoc_line(frame)

    def _end_heredoc_line(self, frame: _Frame) -> None:
        line = frame.line.lstrip("\t") if frame.strip_tabs else frame.line
        token, frame.line, frame.line_token = frame.line_token, "", ""
        if line != frame.delim:
            return
        if token:
            raise QuoteError(f"the value of {{{{{token}}}}} would end the here-document "
                             f"'{frame.delim}' early",
                             "keep the delimiter out of the value, or pass it as a file or an env value")
        self.stack.remove(frame)


def quote_value(value: str, context: str, token: str) -> str:
    """`value` written so bash reads it back as itself in `context` (see the module doc)."""
    if context == "cmd":
        return shlex.quote(value)
    if context == "dq":
        return re.sub(r'([\\$`"])', r"\\\1", value)
    if context == "sq":
        return value.replace("'", "'\\''")
    if context == "ansi":
        return value.replace("\\", "\\\\").replace("'", "\\'")
    if context == "heredoc":
        return value
    if context == "heredoc-expanding":
        return re.sub(r"([\\$`])", r"\\\1", value)
    if context == "comment":
        return value.replace("\n", " ")
    if _PLAIN.fullmatch(value):
        return value
    where = {"escaped": "right after a backslash", "bt": "inside `…`", "param": "inside ${…}",
             "arith": "inside an arithmetic $((…)) or ((…))"}[context]
    raise QuoteError(
        f"{{{{{token}}}}} {where} can hold only a plain value (letters, digits, _.,:/@%+=-), got {value!r}",
        "move the token outside (e.g. $(…) instead of `…`, a quoted word instead of ${…}), "
        f"or write {{{{{token}|raw}}}} if the value is meant as shell syntax",
    )


def insert(scanner: ShellScanner, value: str, token: str, raw: bool) -> str:
    """The text that puts `value` at the scanner's position, fed through the scanner."""
    if raw:
        scanner.feed(value, inserted=token)
        return value
    context = scanner.context()
    if context == "heredoc" and not scanner.top.quoted:
        context = "heredoc-expanding"
    text = quote_value(value, context, token)
    before = scanner.signature()
    scanner.feed(text, inserted=token)
    if scanner.signature() != before:  # a quoting rule above is wrong for this value: never run it
        raise QuoteError(f"the value of {{{{{token}}}}} cannot be quoted at its place in the command",
                         f"write {{{{{token}|raw}}}} if the value is meant as shell syntax")
    if scanner.top.kind == "cmd":
        scanner.top.at_word_start = False
    return text

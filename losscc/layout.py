"""Line layout of the generated code, in black's default style, without running black.

The generated code is written one statement per line, already spaced as black spaces it.
:func:`layout` passes each one-line statement through black's line model
(:mod:`losscc.lines`) and splitting (:mod:`losscc.linesplit`): lines longer than
:data:`LINE_LENGTH` are split as black splits them, redundant parentheses after
``=``/``return``/``if`` are dropped and plain strings take double quotes.  This covers the
Python the templates and the lowering write (assignments, calls, operators, subscripts,
comparisons, ternaries, ``if``/``return``/``raise``/``def``/``class``/``from`` lines), so
``black`` and ``ruff format`` leave the output unchanged (``tests/test_generated_style.py``).

A long line that ends in a comment gets the comment on its own line above it.
"""

from __future__ import annotations

import io
import re
import tokenize
from functools import lru_cache

from . import lines
from .lines import CLOSING, KEYWORDS, LINE_LENGTH, OPENING, Leaf, Line, line_str
from .linesplit import transform_line

__all__ = ["LINE_LENGTH", "layout", "power", "single_atom", "split_line", "unary_needs_parens"]

# statements whose expression black wraps in invisible parentheses
_PAREN_KEYWORDS = {"return", "if", "elif", "while", "del", "assert"}


def _leaves(text: str) -> tuple[list[Leaf], str] | None:
    """Tokens of one logical line (and its trailing comment), or None if it is not one."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    leaves: list[Leaf] = []
    comment = ""
    prev_end = None
    stripped = text.strip()
    fstring = getattr(tokenize, "FSTRING_START", None)
    nested = 0
    for tok in toks:
        if fstring is not None and tok.type in (fstring, tokenize.FSTRING_END) or nested:
            # Python 3.12 tokenizes f-strings in parts: one STRING leaf, as on 3.10 and 3.11
            if tok.type == fstring:
                nested += 1
                if nested == 1:
                    fstart = tok.start[1]
            elif tok.type == tokenize.FSTRING_END:
                nested -= 1
                if nested == 0:
                    prefix = "" if prev_end is None else stripped[prev_end:fstart]
                    prev_end = tok.end[1]
                    leaves.append(Leaf("STRING", stripped[fstart:tok.end[1]], prefix))
            continue
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.COMMENT:
            comment = tok.string
            continue
        if tok.start[0] != 1 or tok.end[0] != 1:
            return None
        prefix = "" if prev_end is None else stripped[prev_end:tok.start[1]]
        prev_end = tok.end[1]
        if tok.type == tokenize.NAME:
            leaves.append(Leaf("NAME", tok.string, prefix))
        elif tok.type == tokenize.NUMBER:
            leaves.append(Leaf("NUMBER", tok.string, prefix))
        elif tok.type == tokenize.STRING:
            leaves.append(Leaf("STRING", _double_quoted(tok.string), prefix))
        elif tok.type == tokenize.OP:
            leaves.append(Leaf(tok.string, tok.string, prefix))
        else:
            return None
    _classify(leaves)
    return leaves, comment


def _double_quoted(s: str) -> str:
    """A plain single-quoted string in double quotes, as black prefers (strings with quotes
    or escapes inside are left as they are)."""
    if re.fullmatch(r"[fbr]{0,2}'[^'\"\\\n]*'", s):
        q = s.index("'")
        return s[:q] + '"' + s[q + 1:-1] + '"'
    return s


def _classify(leaves: list[Leaf]) -> None:
    stack: list[Leaf] = []
    is_def = bool(leaves) and leaves[0].value == "def"
    for i, leaf in enumerate(leaves):
        prev = leaves[i - 1] if i else None
        operand_before = prev is not None and (prev.type in ("NAME", "NUMBER", "STRING") and prev.value not in KEYWORDS
                                               or prev.type in CLOSING or prev.value in ("None", "True", "False"))
        if leaf.type in ("-", "+", "~") and not operand_before:
            leaf.role = "unary"
        elif leaf.type in ("*", "**") and not operand_before:
            leaf.role = "vararg"
        elif leaf.type == "NAME" and leaf.value in ("if", "else") and i > 0:
            leaf.role = "ternary"
        elif leaf.type == "NAME" and leaf.value in ("in", "not") and i > 0:
            nxt = leaves[i + 1] if i + 1 < len(leaves) else None
            if leaf.value == "in" or (nxt is not None and nxt.value == "in") or (prev and prev.value == "is"):
                leaf.role = "cmp"
        if leaf.type in OPENING:
            if leaf.type == "(" and is_def and not stack and prev is not None and prev.type == "NAME":
                leaf.kind = "def"
            elif operand_before:
                leaf.kind = "call" if leaf.type == "(" else "subscript"
            else:
                leaf.kind = "atom"
            stack.append(leaf)
        elif leaf.type in CLOSING and stack:
            leaf.kind = stack.pop().kind


def _with_invisible_parens(leaves: list[Leaf]) -> list[Leaf]:
    """Black's invisible parentheses around a statement's expression (after `=`, `return`,
    `if` ...); redundant real ones are made invisible, as black does."""
    if not leaves:
        return leaves
    start = None
    end = len(leaves)
    kind = "atom"
    first = leaves[0]
    if first.value == "from":
        start = next((i + 1 for i, leaf in enumerate(leaves) if leaf.value == "import"), None)
        kind = "import"
    elif first.type == "NAME" and first.value in _PAREN_KEYWORDS:
        start = 1
        if first.value in ("if", "elif", "while") and leaves[-1].type == ":":
            end = len(leaves) - 1
    else:
        depth = 0
        for i, leaf in enumerate(leaves):
            if leaf.type in OPENING:
                depth += 1
            elif leaf.type in CLOSING:
                depth -= 1
            elif depth == 0 and leaf.type in ("=", "+=", "-=", "*=", "/="):
                start = i + 1
    if start is None or start >= end:
        return leaves
    body = leaves[start:end]
    if (body[0].type == "(" and body[-1].type == ")" and _matching(body, 0) == len(body) - 1
            and not _is_tuple(body)):
        body[0].value = body[-1].value = ""
        return leaves
    lpar = Leaf("(", "", body[0].prefix, kind=kind)
    body[0].prefix = body[0].ws = ""
    rpar = Leaf(")", "", "", kind=kind)
    return leaves[:start] + [lpar] + body + [rpar] + leaves[end:]


def _matching(leaves: list[Leaf], i: int) -> int:
    depth = 0
    for j in range(i, len(leaves)):
        if leaves[j].type in OPENING:
            depth += 1
        elif leaves[j].type in CLOSING:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _is_tuple(body: list[Leaf]) -> bool:
    depth = 0
    for leaf in body[1:-1]:
        if leaf.type in OPENING:
            depth += 1
        elif leaf.type in CLOSING:
            depth -= 1
        elif depth == 0 and leaf.type == ",":
            return True
    return len(body) == 2


def split_line(text: str) -> list[str] | None:
    """One logical line (4-space indentation) laid out in lines of at most LINE_LENGTH
    where it can be; None if it is not one logical line."""
    done = _split_line(text, lines.LINE_LENGTH)
    return None if done is None else list(done)


@lru_cache(maxsize=8192)
def _split_line(text: str, width: int) -> tuple[str, ...] | None:
    """split_line, remembered: a tree's modules repeat most of their lines (a full check
    lays out about 13600 lines, 3200 of them distinct); `width` is lines.LINE_LENGTH, which
    the split reads, so that a changed width is not served from the memory."""
    indent = len(text) - len(text.lstrip(" "))
    got = _leaves(text)
    if got is None or indent % 4:
        return None
    leaves, comment = got
    line = Line(indent // 4)
    for leaf in _with_invisible_parens(leaves):
        line.append(leaf, preformatted=True, track_bracket=True)
    out = [line_str(ln) for ln in transform_line(line)]
    if not comment:
        return tuple(out)
    if len(out) == 1 and len(out[0]) + 2 + len(comment) <= lines.LINE_LENGTH:
        return (f"{out[0]}  {comment}",)
    return (" " * indent + comment, *out)


def layout(text: str) -> str:
    """Every line that is one whole statement laid out as black lays it out: split where it
    is longer than LINE_LENGTH, redundant parentheses after `=`/`return`/`if` dropped,
    plain strings in double quotes."""
    rows = text.split("\n")
    out: list[str] = []
    starts = _statement_lines(text)
    for n, ln in enumerate(rows, start=1):
        if n in starts:
            done = _split_line(ln, lines.LINE_LENGTH)
            if done is not None:
                out += done
                continue
        out.append(ln)
    return "\n".join(out)


def _statement_lines(text: str) -> set[int]:
    """Numbers of the lines that hold one whole logical line (not in a string or a bracket)."""
    single: set[int] = set()
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return single
    start = None
    multi = False
    for tok in toks:
        if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.COMMENT and start is None:
            continue
        if start is None:
            start = tok.start[0]
            multi = False
        if tok.start[0] != tok.end[0] or tok.start[0] != start:
            multi = True
        if tok.type == tokenize.NEWLINE:
            if not multi:
                single.add(start)
            start = None
    return single


_SIMPLE = re.compile(r"-?(?:[A-Za-z_][A-Za-z_0-9]*(?:\.[A-Za-z_][A-Za-z_0-9]*)*|[0-9][0-9.e+-]*)\Z")


def power(base: str, exponent: str) -> str:
    """`base ** exponent` spaced as black does: hugged when both operands are simple
    (a name, a number, an attribute chain)."""
    if _SIMPLE.match(base) and not base.startswith("-") and _SIMPLE.match(exponent):
        return f"{base}**{exponent}"
    return f"{base} ** {exponent}"


def single_atom(code: str) -> bool:
    """A name, a number or one parenthesised expression (black puts `-(x**2)` in parentheses
    for such a base)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*|[0-9][0-9.e+-]*", code):
        return True
    if code.startswith("(") and code.endswith(")"):
        depth = 0
        for i, ch in enumerate(code):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return i == len(code) - 1
    return False


def unary_needs_parens(code: str) -> bool:
    """Whether black parenthesises `code` after a unary operator: a power whose base is a
    plain name, number or parenthesised expression (`-(x**2)`, but `-f(x) ** 2`)."""
    depth = 0
    for i, ch in enumerate(code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and code.startswith("**", i):
            return single_atom(code[:i].rstrip())
    return False

"""Line layout of the generated code: long statements split the way black's default style does.

The generated code is written one statement per line, already spaced as black spaces it.
:func:`layout` splits each line longer than :data:`LINE_LENGTH` with black's
right-hand-split / delimiter-split algorithm (black 24, default mode), restricted to the
Python the templates and the lowering produce: assignments, calls, operators, subscripts,
comparisons, ternaries, ``if``/``return``/``raise``/``def``/``class`` lines.  So the
output is what ``black`` and ``ruff format`` leave unchanged, and no formatter is needed
(or imported) when code is generated; ``tests/test_generated_style.py`` checks the
committed tree with both.

A long line that ends in a comment gets the comment on its own line above it.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Iterator

LINE_LENGTH = 88

COMMA_PRIORITY = 18
TERNARY_PRIORITY = 16
LOGIC_PRIORITY = 14
STRING_PRIORITY = 12
COMPARATOR_PRIORITY = 10
MATH_PRIORITIES = {"|": 9, "^": 8, "&": 7, "<<": 6, ">>": 6, "+": 5, "-": 5, "*": 4, "/": 4,
                   "//": 4, "%": 4, "@": 4, "~": 3, "**": 2}
DOT_PRIORITY = 1
OPENING = {"(": ")", "[": "]", "{": "}"}
CLOSING = {")": "(", "]": "[", "}": "{"}
COMPARATORS = {"<", ">", "==", "!=", "<=", ">=", "<>"}
KEYWORDS = {"and", "or", "not", "in", "is", "if", "else", "elif", "return", "raise", "def", "class",
            "lambda", "for", "while", "del", "assert", "yield", "import", "from", "None", "True",
            "False", "pass", "with", "as", "await", "async"}
FORCE_OPTIONAL_PARENTHESES = "force"


class CannotSplit(Exception):
    pass


class Leaf:
    """One token of a logical line, with the facts black reads off its syntax tree."""

    __slots__ = ("type", "value", "prefix", "ws", "role", "kind", "opening_bracket", "bracket_depth")

    def __init__(self, type_: str, value: str, prefix: str = "", role: str = "", kind: str = ""):
        self.type = type_          # NAME NUMBER STRING, or the operator / bracket itself
        self.value = value         # "" for black's invisible parentheses
        self.prefix = prefix
        self.ws = prefix           # the canonical whitespace before it
        self.role = role           # unary vararg ternary logic cmp dot
        self.kind = kind           # brackets: atom call def subscript
        self.opening_bracket: Leaf | None = None
        self.bracket_depth = 0

    def __str__(self) -> str:
        return self.prefix + self.value

    def copy(self) -> "Leaf":
        new = Leaf(self.type, self.value, self.ws, self.role, self.kind)
        return new


class Tracker:
    def __init__(self):
        self.depth = 0
        self.match: dict = {}
        self.delimiters: dict[int, int] = {}
        self.previous: Leaf | None = None
        self.invisible: list[Leaf] = []

    def mark(self, leaf: Leaf) -> None:
        if self.depth == 0 and leaf.type in CLOSING and (0, leaf.type) not in self.match:
            return
        if leaf.type in CLOSING:
            self.depth -= 1
            opening = self.match.pop((self.depth, leaf.type))
            leaf.opening_bracket = opening
            if not leaf.value:
                self.invisible.append(leaf)
        leaf.bracket_depth = self.depth
        if self.depth == 0:
            delim = split_before_priority(leaf, self.previous)
            if delim and self.previous is not None:
                self.delimiters[id(self.previous)] = delim
            elif leaf.type == ",":
                self.delimiters[id(leaf)] = COMMA_PRIORITY
        if leaf.type in OPENING:
            self.match[self.depth, OPENING[leaf.type]] = leaf
            self.depth += 1
            if not leaf.value:
                self.invisible.append(leaf)
        self.previous = leaf

    def max_priority(self, exclude=()) -> int:
        values = [p for k, p in self.delimiters.items() if k not in exclude]
        if not values:
            raise ValueError("no delimiters")
        return max(values)

    def count(self, priority: int) -> int:
        return sum(1 for p in self.delimiters.values() if p == priority)


def split_before_priority(leaf: Leaf, previous: Leaf | None) -> int:
    if leaf.role in ("vararg", "unary"):
        return 0
    if leaf.type == "." and (previous is None or previous.type in CLOSING):
        return DOT_PRIORITY
    if leaf.type in MATH_PRIORITIES:
        return MATH_PRIORITIES[leaf.type]
    if leaf.type in COMPARATORS:
        return COMPARATOR_PRIORITY
    if leaf.type == "STRING" and previous is not None and previous.type == "STRING":
        return STRING_PRIORITY
    if leaf.type != "NAME":
        return 0
    if leaf.role == "ternary":
        return TERNARY_PRIORITY
    if leaf.value == "is":
        return COMPARATOR_PRIORITY
    if leaf.value == "in" and leaf.role == "cmp" and not (previous is not None and previous.value == "not"):
        return COMPARATOR_PRIORITY
    if leaf.value == "not" and leaf.role == "cmp" and not (previous is not None and previous.value == "is"):
        return COMPARATOR_PRIORITY
    if leaf.value in ("and", "or"):
        return LOGIC_PRIORITY
    return 0


class Line:
    def __init__(self, depth: int = 0, inside_brackets: bool = False):
        self.depth = depth
        self.inside_brackets = inside_brackets
        self.leaves: list[Leaf] = []
        self.bt = Tracker()
        self.should_split_rhs = False
        self.magic_trailing_comma: Leaf | None = None

    def append(self, leaf: Leaf, preformatted: bool = False, track_bracket: bool = False) -> None:
        if not preformatted:
            leaf.prefix = leaf.ws if self.leaves else ""
        if self.inside_brackets or not preformatted or track_bracket:
            self.bt.mark(leaf)
            if self.has_magic_trailing_comma(leaf):
                self.magic_trailing_comma = leaf
        self.leaves.append(leaf)

    def has_magic_trailing_comma(self, closing: Leaf) -> bool:
        if not (closing.type in CLOSING and self.leaves and self.leaves[-1].type == ","):
            return False
        if closing.type == "}":
            return True
        if closing.type == "]":
            return not (closing.kind == "subscript" and closing.opening_bracket is not None
                        and one_sequence_between(closing.opening_bracket, closing, self.leaves, "["))
        return closing.opening_bracket is not None and not one_sequence_between(
            closing.opening_bracket, closing, self.leaves)

    @property
    def is_def(self) -> bool:
        return bool(self.leaves) and self.leaves[0].value == "def"

    @property
    def is_import(self) -> bool:
        return bool(self.leaves) and self.leaves[0].value in ("import", "from")

    @property
    def is_chained_assignment(self) -> bool:
        return [leaf.type for leaf in self.leaves].count("=") > 1

    def clone(self) -> "Line":
        new = Line(self.depth, self.inside_brackets)
        new.should_split_rhs = self.should_split_rhs
        new.magic_trailing_comma = self.magic_trailing_comma
        return new

    def __bool__(self) -> bool:
        return bool(self.leaves)

    def __str__(self) -> str:
        if not self.leaves:
            return "\n"
        first = self.leaves[0]
        return first.prefix + "    " * self.depth + first.value + "".join(map(str, self.leaves[1:])) + "\n"


def one_sequence_between(opening: Leaf, closing: Leaf, leaves: list[Leaf], bracket: str = "(") -> bool:
    if opening.type != bracket:
        return False
    depth = closing.bracket_depth + 1
    start = next(i for i, leaf in enumerate(leaves) if leaf is opening) + 1
    commas = 0
    for leaf in leaves[start:]:
        if leaf is closing:
            break
        if leaf.bracket_depth == depth and leaf.type == ",":
            commas += 1
            if opening.kind in ("call", "def"):
                commas += 1
                break
    return commas < 2


def line_str(line: Line) -> str:
    return str(line).strip("\n")


def short_enough(line: Line, line_length: int | None = None) -> bool:
    text = line_str(line)
    return len(text) <= (LINE_LENGTH if line_length is None else line_length) and "\n" not in text


# ---------------------------------------------------------------- transforms

def transform_line(line: Line, features: frozenset = frozenset()) -> list[Line]:
    text = line_str(line)
    if not line.should_split_rhs and not line.magic_trailing_comma and short_enough(line):
        return [line]
    if line.is_def:
        transformers = [left_hand_split]
    elif line.inside_brackets:
        transformers = [delimiter_split, rhs]
    else:
        transformers = [rhs]
    for transform in transformers:
        try:
            return run_transformer(line, transform, features, text)
        except CannotSplit:
            continue
    return [line]


def run_transformer(line: Line, transform, features: frozenset, text: str) -> list[Line]:
    result: list[Line] = []
    for new in transform(line, features):
        if line_str(new) == text:
            raise CannotSplit("unchanged")
        result.extend(transform_line(new, features))
    if (FORCE_OPTIONAL_PARENTHESES in features or transform is not rhs or not line.bt.invisible
            or any(b.value for b in line.bt.invisible) or short_enough(result[0])):
        return result
    copy = line.clone()
    for leaf in line.leaves:
        copy.append(leaf.copy())
    second = run_transformer(copy, transform, features | {FORCE_OPTIONAL_PARENTHESES}, text)
    if all(short_enough(ln) for ln in second):
        result = second
    return result


def rhs(line: Line, features: frozenset) -> Iterator[Line]:
    for omit in trailers_to_omit(line):
        lines = list(right_hand_split(line, features, omit))
        if short_enough(lines[0]):
            yield from lines
            return
    yield from right_hand_split(line, features)


def left_hand_split(line: Line, features: frozenset) -> Iterator[Line]:
    tail, body, head = [], [], []
    current = head
    matching = None
    for leaf in line.leaves:
        if current is body and leaf.type in CLOSING and leaf.opening_bracket is matching and matching is not None:
            current = tail if body else head
        current.append(leaf)
        if current is head and leaf.type in OPENING:
            matching = leaf
            current = body
    if not matching or not tail:
        raise CannotSplit("no brackets")
    parts = [build_line(head, line, matching, "head"), build_line(body, line, matching, "body"),
             build_line(tail, line, matching, "tail")]
    split_succeeded(*parts)
    yield from (p for p in parts if p)


def right_hand_split(line: Line, features: frozenset, omit=()) -> Iterator[Line]:
    yield from maybe_split_omitting_optional_parens(first_right_hand_split(line, omit), line, features, omit)


class RHS:
    def __init__(self, head, body, tail, opening, closing):
        self.head, self.body, self.tail = head, body, tail
        self.opening, self.closing = opening, closing


def first_right_hand_split(line: Line, omit=()) -> RHS:
    tail, body, head = [], [], []
    current = tail
    opening = closing = None
    for leaf in reversed(line.leaves):
        if current is body and leaf is opening:
            current = head if body else tail
        current.append(leaf)
        if current is tail and leaf.type in CLOSING and id(leaf) not in omit:
            opening, closing = leaf.opening_bracket, leaf
            current = body
    if not (opening and closing and head):
        raise CannotSplit("no brackets")
    tail.reverse()
    body.reverse()
    head.reverse()
    parts = (build_line(head, line, opening, "head"), build_line(body, line, opening, "body"),
             build_line(tail, line, opening, "tail"))
    split_succeeded(*parts)
    return RHS(*parts, opening, closing)


def maybe_split_omitting_optional_parens(r: RHS, line: Line, features: frozenset, omit=()) -> Iterator[Line]:
    if (FORCE_OPTIONAL_PARENTHESES not in features and r.opening.type == "(" and not r.opening.value
            and r.closing.type == ")" and not r.closing.value and not line.is_import
            and can_omit_invisible_parens(r)):
        omit = {id(r.closing), *omit}
        try:
            oop = first_right_hand_split(line, omit)
            after_equal = len(r.head.leaves) >= 2 and r.head.leaves[-2].type == "="
            head_brackets = any(leaf.type in OPENING or leaf.type in CLOSING for leaf in r.head.leaves[:-1])
            head_short = short_enough(r.head, LINE_LENGTH - 1)
            head_no_magic = r.head.magic_trailing_comma is None
            if not (after_equal and head_brackets and head_short and head_no_magic) or prefer_oop(oop, r):
                yield from maybe_split_omitting_optional_parens(oop, line, features, omit)
                return
        except CannotSplit as exc:
            if line.is_chained_assignment:
                pass
            elif not can_be_split(r.body) and not short_enough(r.body):
                raise CannotSplit("body too long") from exc
    for b in (r.opening, r.closing):
        if not b.value:
            b.value = b.type
    for part in (r.head, r.body, r.tail):
        if part:
            yield part


def prefer_oop(oop: RHS, r: RHS) -> bool:
    head_eq = [leaf.type for leaf in r.head.leaves].count("=")
    oop_eq = [leaf.type for leaf in oop.head.leaves].count("=")
    if head_eq > 1 and head_eq > oop_eq:
        return False
    closing_after_assign = False
    for leaf in reversed(oop.head.leaves):
        if leaf.type == "=":
            break
        if leaf.type in CLOSING:
            closing_after_assign = True
            break
    return closing_after_assign or (any(leaf.type == "=" for leaf in oop.head.leaves) and short_enough(oop.head))


def can_omit_invisible_parens(r: RHS) -> bool:
    line = r.body
    bt = line.bt
    if not bt.delimiters:
        return True
    max_priority = bt.max_priority()
    if bt.count(max_priority) > 1:
        return False
    if max_priority == DOT_PRIORITY:
        return True
    first, second = line.leaves[0], line.leaves[1]
    if first.type in OPENING and second.type not in CLOSING:
        if can_omit_opening_paren(line, first):
            return True
    penultimate, last = line.leaves[-2], line.leaves[-1]
    if last.type == ")" or last.type == "}" or (last.type == "]" and last.kind != "subscript"):
        if penultimate.type in OPENING:
            return False
        if can_omit_closing_paren(line, last):
            return True
    return False


def can_omit_opening_paren(line: Line, first: Leaf) -> bool:
    remainder = False
    length = 4 * line.depth
    index = -1
    for index, leaf in enumerate(line.leaves):
        if leaf.type in CLOSING and leaf.opening_bracket is first:
            remainder = True
        if remainder:
            length += len(str(leaf))
            if length > LINE_LENGTH:
                return False
            if leaf.type in OPENING:
                remainder = False
    return len(line.leaves) == index + 1


def can_omit_closing_paren(line: Line, last: Leaf) -> bool:
    length = 4 * line.depth
    seen_other_brackets = False
    for leaf in line.leaves:
        length += len(str(leaf))
        if leaf is last.opening_bracket:
            if seen_other_brackets or length <= LINE_LENGTH:
                return True
        elif leaf.type in OPENING:
            seen_other_brackets = True
    return False


def can_be_split(line: Line) -> bool:
    return len(line.leaves) >= 2


def split_succeeded(head: Line, body: Line, tail: Line) -> None:
    tail_len = len(str(tail).strip())
    if not body:
        if tail_len == 0:
            raise CannotSplit("same line")
        if tail_len < 3:
            raise CannotSplit("not worth it")


def inside_matching(leaves: list[Leaf]) -> set[int]:
    start = next((i for i, leaf in enumerate(leaves) if leaf.type in OPENING), None)
    if start is None:
        return set()
    stack: list = []
    ids: set[int] = set()
    for i in range(start, len(leaves)):
        leaf = leaves[i]
        if leaf.type in OPENING:
            stack.append((OPENING[leaf.type], i))
        if leaf.type in CLOSING:
            if stack and leaf.type == stack[-1][0]:
                _, s = stack.pop()
                ids.update(id(leaves[j]) for j in range(s, i + 1))
            else:
                break
    return ids


def build_line(leaves: list[Leaf], original: Line, opening: Leaf, component: str) -> Line:
    result = Line(original.depth)
    if component == "body":
        result.inside_brackets = True
        result.depth += 1
        if leaves and (original.is_import or original.is_def and opening.value == "("
                       and not any(leaf.type == "," for leaf in leaves)):
            leaves.append(Leaf(",", ","))
    track = inside_matching(leaves) if component == "head" else set()
    for leaf in leaves:
        result.append(leaf, preformatted=True, track_bracket=id(leaf) in track)
    if component == "body" and should_split_line(result, opening):
        result.should_split_rhs = True
    return result


def should_split_line(line: Line, opening: Leaf) -> bool:
    if opening.value not in "[{(":
        return False
    exclude = set()
    trailing_comma = False
    try:
        last = line.leaves[-1]
        if last.type == ",":
            trailing_comma = True
            exclude.add(id(last))
        max_priority = line.bt.max_priority(exclude)
    except (IndexError, ValueError):
        return False
    return max_priority == COMMA_PRIORITY and (trailing_comma or opening.kind in ("atom", "import"))


def delimiter_split(line: Line, features: frozenset) -> Iterator[Line]:
    if not line.leaves:
        raise CannotSplit("empty")
    last = line.leaves[-1]
    bt = line.bt
    try:
        priority = bt.max_priority(exclude={id(last)})
    except ValueError:
        raise CannotSplit("no delimiters") from None
    if priority == DOT_PRIORITY and bt.count(priority) == 1:
        raise CannotSplit("single attribute")
    current = Line(line.depth, line.inside_brackets)
    for leaf in line.leaves:
        if not current.leaves:
            leaf.prefix = ""
        current.append(leaf, preformatted=True)
        if bt.delimiters.get(id(leaf)) == priority:
            yield current
            current = Line(line.depth, line.inside_brackets)
    if current:
        if priority == COMMA_PRIORITY and current.leaves[-1].type != ",":
            current.append(Leaf(",", ","))
        yield current


def trailers_to_omit(line: Line) -> Iterator[set[int]]:
    omit: set[int] = set()
    if not line.magic_trailing_comma:
        yield omit
    length = 4 * line.depth
    opening = closing = None
    inner: set[int] = set()
    leaves = line.leaves
    for index in range(len(leaves) - 1, -1, -1):
        leaf = leaves[index]
        length += len(str(leaf))
        if length > LINE_LENGTH:
            break
        if opening:
            if leaf is opening:
                opening = None
            elif leaf.type in CLOSING:
                prev = leaves[index - 1] if index > 0 else None
                if (prev and prev.type == "," and leaf.opening_bracket is not None
                        and not one_sequence_between(leaf.opening_bracket, leaf, leaves)):
                    break
                inner.add(id(leaf))
        elif leaf.type in CLOSING:
            prev = leaves[index - 1] if index > 0 else None
            if prev and prev.type in OPENING:
                inner.add(id(leaf))
                continue
            if closing:
                omit.add(id(closing))
                omit.update(inner)
                inner.clear()
                yield omit
            if (prev and prev.type == "," and leaf.opening_bracket is not None
                    and not one_sequence_between(leaf.opening_bracket, leaf, leaves)):
                break
            if leaf.value:
                opening, closing = leaf.opening_bracket, leaf


# ---------------------------------------------------------------- tokens to a Line

_UNARY_AFTER = set(OPENING) | {",", "=", ":", "->", "+", "-", "*", "/", "//", "%", "@", "**", "~", "<", ">",
                               "==", "!=", "<=", ">=", "|", "&", "^", "<<", ">>", "+=", "-=", "*=", "/="}
# statements whose expression black wraps in invisible parentheses: keyword -> where it starts
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
    indent = len(text) - len(text.lstrip(" "))
    got = _leaves(text)
    if got is None or indent % 4:
        return None
    leaves, comment = got
    line = Line(indent // 4)
    for leaf in _with_invisible_parens(leaves):
        line.append(leaf, preformatted=True, track_bracket=True)
    lines = [line_str(ln) for ln in transform_line(line)]
    if not comment:
        return lines
    if len(lines) == 1 and len(lines[0]) + 2 + len(comment) <= LINE_LENGTH:
        return [f"{lines[0]}  {comment}"]
    return [" " * indent + comment] + lines


def layout(text: str) -> str:
    """Every line that is one whole statement laid out as black lays it out: split where it
    is longer than LINE_LENGTH, redundant parentheses after `=`/`return`/`if` dropped,
    plain strings in double quotes."""
    lines = text.split("\n")
    out: list[str] = []
    starts = _statement_lines(text)
    for n, ln in enumerate(lines, start=1):
        if n in starts:
            done = split_line(ln)
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

"""Black's line model for :mod:`losscc.layout`: leaves, bracket tracking, delimiter
priorities and lines (after black 24's ``brackets.py`` and ``lines.py``, default mode).

A :class:`Leaf` carries the few facts black reads off its syntax tree (``role``: unary,
vararg, ternary or comparison operator; ``kind``: what a bracket opens), which
:mod:`losscc.layout` works out from the tokens.
"""

from __future__ import annotations

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

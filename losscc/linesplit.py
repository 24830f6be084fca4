"""Black's splitting of one long line (after black 24's ``linegen.py``, default mode):
right-hand split with optional parentheses, left-hand split of ``def`` lines, delimiter
split, magic trailing commas, and the second opinion with forced parentheses.  Ported
function by function, names kept, so a difference from black can be traced to its source.
"""

from __future__ import annotations

from typing import Iterator

from . import lines
from .lines import (CLOSING, COMMA_PRIORITY, DOT_PRIORITY, OPENING, CannotSplit, Leaf, Line, line_str,
                    one_sequence_between, short_enough)

FORCE_OPTIONAL_PARENTHESES = "force"


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
            head_short = short_enough(r.head, lines.LINE_LENGTH - 1)
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
            if length > lines.LINE_LENGTH:
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
            if seen_other_brackets or length <= lines.LINE_LENGTH:
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
        if length > lines.LINE_LENGTH:
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

"""MapR's access-control expressions for stream permissions: `u:alice | g:ops & !u:bob`.

A stream keeps one expression per permission (produce, consume, topic,
admin, copy). The language is MapR's: `u:<user>` and `g:<group>` are true
for that user or a member of that group, `p` (public) is true for everyone,
`!` negates, `&` binds tighter than `|`, and parentheses group. An empty
expression grants nothing by itself (Kafka ACLs then decide; see
authorizer.py). Expressions are parsed once into a small tree and cached,
because the authorizer asks on every request.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import time

log = logging.getLogger(__name__)

# MapR user and group names: letters, digits and the punctuation Unix and Kerberos names use.
_NAME = re.compile(r"[A-Za-z0-9_.@$-]+")
_TOKEN = re.compile(r"\s*(?:(?P<op>[|&!()])|(?P<term>[ugUG]:[^\s|&!()]*|[pP](?![A-Za-z0-9_:]))|(?P<bad>\S))")


class ExpressionError(ValueError):
    """An expression that cannot be parsed; the message says where and why, in one line."""


@dataclasses.dataclass(frozen=True, slots=True)
class Subject:
    """Who is asking: a user name and the groups it belongs to."""

    user: str
    groups: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, slots=True)
class _User:
    name: str

    def __call__(self, who: Subject) -> bool:
        return who.user == self.name


@dataclasses.dataclass(frozen=True, slots=True)
class _Group:
    name: str

    def __call__(self, who: Subject) -> bool:
        return self.name in who.groups


@dataclasses.dataclass(frozen=True, slots=True)
class _Public:
    def __call__(self, who: Subject) -> bool:
        return True


@dataclasses.dataclass(frozen=True, slots=True)
class _Not:
    inner: Expression

    def __call__(self, who: Subject) -> bool:
        return not self.inner(who)


@dataclasses.dataclass(frozen=True, slots=True)
class _All:
    parts: tuple[Expression, ...]

    def __call__(self, who: Subject) -> bool:
        return all(part(who) for part in self.parts)


@dataclasses.dataclass(frozen=True, slots=True)
class _Any:
    parts: tuple[Expression, ...]

    def __call__(self, who: Subject) -> bool:
        return any(part(who) for part in self.parts)


Expression = _User | _Group | _Public | _Not | _All | _Any


def _tokens(text: str) -> list[tuple[str, int]]:
    """(token, column) pairs; ExpressionError on a character the language does not have."""
    out = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:  # only trailing whitespace is left
            break
        if match.group("bad") is not None:
            raise ExpressionError(f"unexpected {match.group('bad')!r} at column {match.start('bad') + 1} of "
                                  f"{text!r}: use u:USER, g:GROUP, p, !, &, | and parentheses")
        kind = "op" if match.group("op") is not None else "term"
        out.append((match.group(kind), match.start(kind) + 1))
        position = match.end()
    return out


class _Parser:
    """Recursive descent: or := and ('|' and)*; and := not ('&' not)*; not := '!' not | atom."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def _peek(self) -> str | None:
        return self.tokens[self.at][0] if self.at < len(self.tokens) else None

    def _fail(self, what: str) -> ExpressionError:
        where = f"column {self.tokens[self.at][1]}" if self.at < len(self.tokens) else "the end"
        return ExpressionError(f"{what} at {where} of {self.text!r}")

    def parse(self) -> Expression:
        tree = self._or()
        if self.at < len(self.tokens):
            raise self._fail(f"unexpected {self._peek()!r}")
        return tree

    def _or(self) -> Expression:
        parts = [self._and()]
        while self._peek() == "|":
            self.at += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else _Any(tuple(parts))

    def _and(self) -> Expression:
        parts = [self._not()]
        while self._peek() == "&":
            self.at += 1
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else _All(tuple(parts))

    def _not(self) -> Expression:
        if self._peek() == "!":
            self.at += 1
            return _Not(self._not())
        return self._atom()

    def _atom(self) -> Expression:
        token = self._peek()
        if token is None:
            raise self._fail("expected u:USER, g:GROUP, p or '('")
        if token == "(":
            self.at += 1
            inner = self._or()
            if self._peek() != ")":
                raise self._fail("missing ')'")
            self.at += 1
            return inner
        if token in ("|", "&", ")"):
            raise self._fail(f"expected u:USER, g:GROUP, p or '(' before {token!r}")
        self.at += 1
        if token.lower() == "p":
            return _Public()
        kind, _, name = token.partition(":")
        if not _NAME.fullmatch(name):
            self.at -= 1
            raise self._fail(f"{token!r} needs a {'user' if kind.lower() == 'u' else 'group'} name "
                             "of letters, digits, '_', '.', '@', '$' or '-'")
        return _User(name) if kind.lower() == "u" else _Group(name)


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Expression | None:
    """The expression's tree, or None for an empty expression (no grant); ExpressionError when malformed."""
    if not text.strip():
        return None
    return _Parser(text).parse()


def check(text: str) -> str:
    """The expression as given when it parses (for validating input); ExpressionError otherwise."""
    parse(text)
    return text


def allows(text: str, who: Subject) -> bool:
    """Whether a stored expression grants `who`; an empty or (somehow) malformed one grants nothing."""
    try:
        tree = parse(text)
    except ExpressionError:
        return False
    return tree is not None and tree(who)



class UserGroups:
    """The groups of each user for `g:` terms and Group: ACL principals, from a text file.

    One user per line, `alice: ops, iot` (# starts a comment). The file is
    read again when it changes (checked at most once a second), so adding a
    user to a group needs no restart. No file: nobody is in any group.
    """

    RECHECK_SECONDS = 1.0

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._groups: dict[str, frozenset[str]] = {}
        self._mtime: float | None = None
        self._checked = float("-inf")
        if path:
            self._load()  # a broken file stops the start, with its line number

    def _load(self) -> None:
        assert self.path is not None
        mtime = os.stat(self.path).st_mtime
        if mtime == self._mtime:
            return
        self._groups = read_user_groups(self.path)
        self._mtime = mtime

    def of(self, user: str) -> frozenset[str]:
        if self.path is None:
            return frozenset()
        now = time.monotonic()
        if now - self._checked >= self.RECHECK_SECONDS:
            self._checked = now
            try:
                self._load()
            except (OSError, ValueError) as exc:  # keep the last good mapping rather than lock everyone out
                log.warning("keeping the previous user groups: %s", exc)
        return self._groups.get(user, frozenset())


def read_user_groups(path: str) -> dict[str, frozenset[str]]:
    """Parse a user-groups file; ValueError names the file and line of a malformed entry."""
    groups: dict[str, frozenset[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            user, sep, members = line.partition(":")
            names = [g.strip() for g in members.split(",") if g.strip()]
            if not sep or not _NAME.fullmatch(user.strip()) or not all(_NAME.fullmatch(g) for g in names):
                raise ValueError(f"{path} line {number}: expected 'user: group, group', got {line!r}")
            groups[user.strip()] = groups.get(user.strip(), frozenset()) | frozenset(names)
    return groups

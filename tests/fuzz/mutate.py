"""Mutations of a seed scenario: tokens and lines deleted, duplicated, swapped or replaced,
numbers made extreme, random characters inserted.

A mutant is mostly the seed, so it gets past the parser more often than
random text and reaches the checks and the compiler with one thing wrong.
"""

import re
from typing import List

from .chooser import Chooser
from .scn_gen import WEIRD_NUMBERS, WILD_NAMES

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*|[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_.eE+KMG]*|\.\.|\s+|.',
                   re.S)
NUMBER = re.compile(r"[0-9]")
KEYWORDS = ("scenario", "seed", "param", "channel", "capacity", "thread", "replay", "leaks", "pool",
            "repeat", "for", "in", "barrier", "measure", "lives", "forever", "weighted", "self")
PUNCT = ("{", "}", "(", ")", "[", "]", "=", ",", ":", "*", "+", "-", "/", "%", "..", '"', "#", "\\", ".")


def tokens(text: str) -> List[str]:
    return TOKEN.findall(text)


def mutate(c: Chooser, seed: str) -> str:
    text = seed
    for _ in range(c.int(1, 4)):
        text = _one(c, text)
    return text


def _one(c: Chooser, text: str) -> str:
    kind = c.int(0, 9)
    if kind <= 5:
        toks = tokens(text)
        if not toks:
            return text
        solid = [i for i, t in enumerate(toks) if not t.isspace()] or [0]
        i = c.pick(solid)
        if kind == 0:      # delete a token
            del toks[i]
        elif kind == 1:    # duplicate a token
            toks.insert(i, toks[i])
        elif kind == 2:    # swap two tokens
            j = c.pick(solid)
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == 3:    # a number becomes extreme
            numbers = [k for k in solid if NUMBER.match(toks[k])] or [i]
            toks[c.pick(numbers)] = c.pick(WEIRD_NUMBERS)
        elif kind == 4:    # a name becomes another name, a keyword or a reserved one
            names = sorted({t for t in toks if t[:1].isalpha() or t[:1] == "_"}) or ["x"]
            toks[i] = c.pick(names + list(KEYWORDS) + list(WILD_NAMES))
        else:              # punctuation appears, disappears or changes
            toks[i] = c.pick(PUNCT + ("",))
        return "".join(toks)
    lines = text.split("\n")
    if kind == 6:          # delete, duplicate or swap lines
        i, j = c.int(0, len(lines) - 1), c.int(0, len(lines) - 1)
        op = c.int(0, 2)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[j])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    # insert random characters (or bytes' worth of odd text) somewhere
    at = c.int(0, len(text))
    return text[:at] + c.text(6) + text[at:]

"""Random choices behind one interface, so a generator runs under hypothesis or plain `random`.

Under hypothesis every choice is a draw, so a failing input shrinks: integers
towards their lower bound, booleans towards False (features off), picks
towards the first option. The generators are written so that "first" and
"off" mean the simplest program.
"""

import random
from typing import Sequence, TypeVar

T = TypeVar("T")

# Characters that make strings and comments interesting: quotes and
# backslashes, C comment and trigraph pieces, printf conversions, shell
# metacharacters, controls, non-ASCII letters, combining marks, right-to-left
# text, emoji, and the Unicode line and paragraph separators.
NASTY_CHARS = (
    '"', "\\", "*/", "/*", "??/", "??=", "%n", "%s", "$(", "`", ";", "'", "\t", "\r",
    "\x00", "\x01", "\x1b", "\x7f", "\x85", "é", "ß", "Ж", "中", "\u0301", "\u202e",
    "\u2028", "\u2029", "\ufeff", "😀", "\U0010ffff",
)


class Chooser:
    """The choices a generator may make."""

    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def bool(self, p: float = 0.5) -> bool:
        raise NotImplementedError

    def text(self, max_len: int) -> str:
        raise NotImplementedError

    def raw(self, max_len: int) -> bytes:
        raise NotImplementedError

    def pick(self, options: Sequence[T]) -> T:
        return options[self.int(0, len(options) - 1)]


class RandomChooser(Chooser):
    def __init__(self, rng: random.Random):
        self.rng = rng

    def int(self, lo, hi):
        return self.rng.randint(lo, hi)

    def bool(self, p=0.5):
        return self.rng.random() < p

    def text(self, max_len):
        out = []
        for _ in range(self.rng.randint(0, max_len)):
            r = self.rng.random()
            if r < 0.6:
                out.append(chr(self.rng.randint(0x20, 0x7e)))
            elif r < 0.8:
                out.append(self.rng.choice(NASTY_CHARS))
            else:
                cp = self.rng.randint(0x80, 0x10ffff)
                if 0xd800 <= cp <= 0xdfff:  # lone surrogates cannot be written as UTF-8
                    cp = 0xfffd
                out.append(chr(cp))
        return "".join(out)

    def raw(self, max_len):
        n = self.rng.randint(0, max_len)
        return bytes(self.rng.getrandbits(8) for _ in range(n))


class HypothesisChooser(Chooser):
    def __init__(self, draw):
        from hypothesis import strategies as st
        self.draw = draw
        self.st = st

    def int(self, lo, hi):
        return self.draw(self.st.integers(lo, hi))

    def bool(self, p=0.5):
        # Shrinks to 0, i.e. False: features off make the simpler program.
        return self.draw(self.st.integers(0, 999)) >= round(1000 * (1 - p))

    def text(self, max_len):
        st = self.st
        piece = st.one_of(st.characters(min_codepoint=0x20, max_codepoint=0x7e),
                          st.sampled_from(NASTY_CHARS), st.characters(blacklist_categories=("Cs",)))
        return "".join(self.draw(st.lists(piece, max_size=max_len)))

    def raw(self, max_len):
        return self.draw(self.st.binary(max_size=max_len))

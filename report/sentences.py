"""The words of a comparison: "tcmalloc is 1.50x faster than glibc (1.45–1.62), significant".

Every sentence is read off one stats.rank.Comparison (its verdict and its
interval), and its numbers are printed with as many digits as it takes for
the printed interval to say what the verdict says: a significant interval
never rounds to touch 1, and no interval prints as "1.00–1.00".
"""

from typing import Optional, Sequence, Tuple

from ..stats.rank import MIN_RUNS, Verdict
from ..stats.summary import format_values

__all__ = ["comparison_sentence", "claim_phrase", "claim_text", "verdict_phrase", "show_interval",
           "digits_for", "figures", "percent", "constant_phrase"]

# metric word -> (phrase when other is lower, when higher, whether lower is better).
# The phrase follows the direction of the numbers, so it cannot point the wrong way.
_VOCABULARY = {
    "time": ("is {f}x faster than", "is {f}x slower than", True),
    "memory": ("uses {f}x less memory than", "uses {f}x more memory than", True),
    "speed": ("is {f}x slower than", "is {f}x faster than", False),
    "throughput": ("has {f}x lower throughput than", "has {f}x higher throughput than", False),
}
MAX_DIGITS = 17     # enough for any double: a bound one ulp above 1 still prints above 1


def percent(fraction: float) -> str:
    """0.01 -> "1%", 0.0025 -> "0.25%", 0.99583 -> "99.58%"."""
    text = f"{fraction * 100:.2f}".rstrip("0").rstrip(".")
    return text + "%"


def _faithful(values: Sequence[float], texts: Sequence[str], references: Sequence[float]) -> bool:
    """Whether the printed texts keep every value on its side of every reference (strictly:
    1.004 never prints as 1.00) and distinct values distinct. Values equal to 12 significant
    digits count as one: 1.1 and 1.1000000000000003 are the same ratio reached two ways."""
    shown = [float(t) for t in texts]
    sides = all((v > r) == (s > r) and (v < r) == (s < r) for v, s in zip(values, shown) for r in references)
    return sides and len(set(shown)) == len({float(f"{v:.12g}") for v in values})


def digits_for(values: Sequence[float], references: Sequence[float] = (1.0,), start: int = 2) -> int:
    """Decimals (from ``start``) with which the printed values stay faithful (:func:`_faithful`)."""
    for digits in range(start, MAX_DIGITS + 1):
        if _faithful(values, [f"{v:.{digits}f}" for v in values], references):
            return digits
    return MAX_DIGITS


def figures(values: Sequence[float], references: Sequence[float] = (0.0,)) -> Tuple[str, ...]:
    """Figures of any size printed alike (stats.summary.format_values), with more significant
    digits where those would put a value on the wrong side of a reference or merge two values."""
    texts = format_values(*values)
    for digits in range(5, MAX_DIGITS + 1):
        if _faithful(values, texts, references):
            break
        texts = tuple(f"{v:.{digits}g}" for v in values)
    return texts


def _as_factor(c) -> Tuple[float, Tuple[float, float], bool]:
    """(factor >= 1, its interval, other is lower): other/baseline turned round when below 1."""
    low, high = c.ci if c.ci else (c.estimate, c.estimate)
    if c.estimate < 1.0:
        return 1.0 / c.estimate, (1.0 / high, 1.0 / low), True
    return c.estimate, (low, high), False


def show_interval(c, names: Optional[Tuple[str, str]] = None) -> str:
    """The interval as it is, other/baseline or other − baseline: "ratio 0.970–1.020"
    ("tcmalloc/glibc ratio 0.970–1.020" with the two names)."""
    low, high = c.ci
    if c.scale == "ratio":
        d = digits_for([low, high])
        return f"{'/'.join(names) + ' ' if names else ''}ratio {low:.{d}f}–{high:.{d}f}"
    return f"{' − '.join(names) + ' ' if names else ''}difference " + "–".join(figures([low, high]))


def _phrases(word: str, lower_is_better: bool) -> Tuple[str, str]:
    known = _VOCABULARY.get(word)
    if known is not None and known[2] != lower_is_better:
        raise ValueError(f"metric word {word!r} implies lower_is_better={known[2]}, "
                         f"but this comparison was made with lower_is_better={lower_is_better}")
    return known[:2] if known else (f"has {{f}}x lower {word} than", f"has {{f}}x higher {word} than")


def _difference_claim(c, base_name: str, word: str) -> str:
    """A significant difference no ratio can state (a value <= 0 on a side)."""
    lower, higher = _phrases(word, c.lower_is_better)
    phrase = (lower if c.estimate < 0 else higher).replace(" {f}x", "")
    return f"{phrase} {base_name} ({show_interval(c)})"


def _ratio_claim(c, base_name: str, word: str) -> str:
    factor, (low, high), other_lower = _as_factor(c)
    lower, higher = _phrases(word, c.lower_is_better)
    d = digits_for([factor, low, high])
    phrase = (lower if other_lower else higher).format(f=f"{factor:.{d}f}")
    return f"{phrase} {base_name} ({low:.{d}f}–{high:.{d}f})"


def claim_phrase(c, base_name: str, word: str) -> str:
    """"is 1.50x faster than glibc (1.45–1.62)": a significant comparison, without names or verdict."""
    return (_ratio_claim if c.scale == "ratio" else _difference_claim)(c, base_name, word)


def claim_text(c, name: str, base_name: str, word: str) -> str:
    return f"{name} {claim_phrase(c, base_name, word)}"


def verdict_phrase(c, against: str, relation: Optional[str] = None, names: Optional[Tuple[str, str]] = None) -> str:
    """A comparison that is not significant, in words that cannot contradict its interval:
    "no significant difference from glibc (ratio 0.95–1.08)", or with a ``relation`` ("ahead of"):
    "not significantly ahead of glibc (ratio 0.95–1.08)"."""
    noise = percent(c.noise) + ("" if c.scale == "ratio" else " of the baseline")
    plain = f"not significantly {relation} {against}" if relation else f"no significant difference from {against}"
    if c.ci is None:
        return f"{plain} ({c.n_other} vs {c.n_baseline} runs give no {percent(c.confidence)} interval)"
    interval = show_interval(c, names)
    if c.verdict is Verdict.EQUIVALENT:
        return f"equivalent to {against} within {noise} ({interval})"
    null = 1.0 if c.scale == "ratio" else 0.0
    if c.ci[0] > null or c.ci[1] < null:       # excludes the null, yet overlaps the band
        shown = f"not shown {relation} {against}" if relation else f"not shown to differ from {against}"
        return f"{shown} by more than {noise} ({interval})"
    return f"{plain} ({interval})"


def constant_phrase(c, base_name: str, word: str, constant: Tuple[float, float]) -> str:
    """"uses 1.50x more memory than glibc: 4.500 vs 3.000 in every run (n=4 vs n=4)": both sides gave
    one value in every run, so the values say all the interval would."""
    lower, higher = _phrases(word, c.lower_is_better)
    phrase = lower if constant[0] < constant[1] else higher
    if c.scale == "ratio":
        factor = max(c.estimate, 1.0 / c.estimate)
        phrase = phrase.format(f=f"{factor:.{digits_for([factor])}f}")
    else:
        phrase = phrase.replace(" {f}x", "")
    values = figures(constant, ())
    return f"{phrase} {base_name}: {values[0]} vs {values[1]} in every run (n={c.n_other} vs n={c.n_baseline})"


def _constant_sentence(c, name: str, base_name: str, word: str, constant: Tuple[float, float]) -> str:
    values = figures(constant, ())
    counts = f"n={c.n_other} vs n={c.n_baseline}"
    if constant[0] == constant[1]:
        return f"{name}: the same as {base_name}, {values[0]} in every run ({counts})"
    if c.significant:
        return f"{name} {constant_phrase(c, base_name, word, constant)}, significant"
    every = f"{values[0]} vs {values[1]} in every run ({counts})"
    if c.verdict is Verdict.TOO_FEW:
        return (f"{name}: {every}, but too few runs to tell: {min(c.n_other, c.n_baseline)} "
                f"(a claim needs {MIN_RUNS} on each side)")
    return f"{name}: {every}: {verdict_phrase(c, base_name)}"


def comparison_sentence(c, name: str, base_name: str, word: str = "time",
                        constant: Optional[Tuple[float, float]] = None) -> str:
    """One line for ``name`` against ``base_name``; ``constant`` = (other's, baseline's) value when
    both gave one value in every run."""
    counts = f"n={c.n_other} vs n={c.n_baseline}"
    if c.n_other == 0 or c.n_baseline == 0:
        return f"{name}: no runs to compare with {base_name} ({counts})"
    if constant is not None:
        return _constant_sentence(c, name, base_name, word, constant)
    if c.verdict is Verdict.TOO_FEW:
        return (f"{name}: too few runs to tell: {min(c.n_other, c.n_baseline)} "
                f"(a claim needs {MIN_RUNS} on each side; {counts})")
    if c.significant:
        return f"{claim_text(c, name, base_name, word)}, significant"
    return f"{name}: {verdict_phrase(c, base_name)}"

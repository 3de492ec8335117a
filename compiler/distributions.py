"""Distribution tables, computed when compiling so the program only looks them up.

`weighted`, `choice` and `histogram` become Walker alias tables (exact to
2^-32); `lognormal` and `geometric` become 4097 quantiles that the runtime
interpolates linearly (runtime/dist.h). Tables are plain data; the template
prints them.
"""

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import List, Sequence, Tuple

QUANTILE_BITS = 12  # runtime/dist.h SCN_QUANTILE_BITS
MAX_VALUE = (1 << 63) - 1


class TableError(ValueError):
    """A distribution that cannot be tabulated (bad weights, unreadable histogram)."""


@dataclass(frozen=True)
class AliasTable:
    values: Tuple[int, ...]
    prob: Tuple[int, ...]   # thresholds on 32 random bits
    alias: Tuple[int, ...]

    @property
    def max_value(self) -> int:
        return max(self.values)

    @property
    def min_value(self) -> int:
        return min(self.values)

    def mean(self) -> float:
        n = len(self.values)
        weights = [0.0] * n
        for i in range(n):
            keep = self.prob[i] / 2**32
            weights[i] += keep / n
            weights[self.alias[i]] += (1 - keep) / n
        return sum(w * v for w, v in zip(weights, self.values))


@dataclass(frozen=True)
class QuantileTable:
    quantiles: Tuple[int, ...]  # (1 << QUANTILE_BITS) + 1 points of the inverse CDF

    @property
    def max_value(self) -> int:
        return self.quantiles[-1]

    @property
    def min_value(self) -> int:
        return self.quantiles[0]

    def mean(self) -> float:
        q = self.quantiles
        return sum((q[i] + q[i + 1]) / 2 for i in range(len(q) - 1)) / (len(q) - 1)


def alias_table(pairs: Sequence[Tuple[int, float]]) -> AliasTable:
    """Vose's construction of Walker's alias table from (value, weight) pairs."""
    merged = {}
    for value, weight in pairs:
        weight = _finite(weight, f"weight of value {value}")
        if weight < 0:
            raise TableError(f"weight {weight} of value {value} is negative")
        if int(value) != value or not -MAX_VALUE <= value <= MAX_VALUE:
            raise TableError(f"value {value} is not a whole number that fits in 64 bits")
        merged[int(value)] = merged.get(int(value), 0.0) + weight
    items = [(v, w) for v, w in merged.items() if w > 0]
    if not items:
        raise TableError("every weight is zero")
    n = len(items)
    top = max(w for _, w in items)  # weights relative to the largest: a sum of huge ones stays finite
    total = sum(w / top for _, w in items)
    scaled = [w / top * n / total for _, w in items]
    prob = [0.0] * n
    alias = list(range(n))
    small = [i for i, s in enumerate(scaled) if s < 1.0]
    large = [i for i, s in enumerate(scaled) if s >= 1.0]
    while small and large:
        s, l = small.pop(), large.pop()
        prob[s], alias[s] = scaled[s], l
        scaled[l] -= 1.0 - scaled[s]
        (small if scaled[l] < 1.0 else large).append(l)
    for i in small + large:
        prob[i] = 1.0
    thresholds = tuple(min(int(round(p * 2**32)), 2**32 - 1) if p < 1.0 else 2**32 - 1 for p in prob)
    # A threshold of 2^32-1 misses one value in 2^32: negligible, and it keeps
    # the table in uint32.
    return AliasTable(tuple(v for v, _ in items), thresholds, tuple(alias))


def _finite(x, what: str) -> float:
    """A table parameter as a float; huge or infinite ones cannot be tabulated."""
    try:
        value = float(x)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise TableError(f"{what} must be a finite number, not {x}")
    return value


def _quantiles(inverse_cdf) -> QuantileTable:
    n = 1 << QUANTILE_BITS
    # Interior points at i/n; the two ends at half a step inside, so the
    # tails are finite and the table's mean stays close to the true mean.
    points = [inverse_cdf(min(max(i / n, 0.5 / n), 1 - 0.5 / n)) for i in range(n + 1)]
    values = tuple(max(0, min(MAX_VALUE, int(round(x)))) for x in points)
    return QuantileTable(values)


def lognormal_table(median: float, sigma: float) -> QuantileTable:
    median, sigma = _finite(median, "lognormal median"), _finite(sigma, "lognormal sigma")
    if median <= 0:
        raise TableError(f"lognormal median must be above 0, not {median}")
    if sigma < 0:
        raise TableError(f"lognormal sigma must not be negative, not {sigma}")
    normal = NormalDist()
    mu = math.log(median)
    log_max = math.log(MAX_VALUE)

    def quantile(u):
        x = mu + sigma * normal.inv_cdf(u)
        return math.exp(x) if x < log_max else MAX_VALUE  # exp() would overflow
    return _quantiles(quantile)


def geometric_table(mean: float) -> QuantileTable:
    """Geometric on 1, 2, 3 ... with the given mean (p = 1 / mean)."""
    mean = _finite(mean, "geometric mean")
    if mean < 1:
        raise TableError(f"geometric mean must be at least 1, not {mean}")
    if mean == 1:
        return _quantiles(lambda u: 1)
    log_q = math.log1p(-1.0 / mean)
    if log_q == 0:  # 1 / mean below float precision: every draw is past the largest value
        return _quantiles(lambda u: MAX_VALUE)
    return _quantiles(lambda u: max(1.0, math.ceil(min(math.log1p(-u) / log_q, MAX_VALUE))))


def histogram_table(path: Path) -> AliasTable:
    """The alias table of a histogram file. Read each time (the file may change between two checks in one
    process), tabulated once per content: the checks and the code generator ask for the table of each draw
    from the file (a fitted model's histograms: a thousand times per build)."""
    return _histogram_table(str(path), _histogram_text(path))


@functools.lru_cache(maxsize=512)
def _histogram_table(path: str, text: str) -> AliasTable:
    return alias_table(_histogram_rows(Path(path), text))


def read_histogram(path: Path) -> List[Tuple[int, float]]:
    """A CSV of `size,count` rows (a header row is allowed), e.g. from `scenc trace-stats`."""
    return _histogram_rows(path, _histogram_text(path))


def _histogram_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TableError(f"cannot read histogram {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TableError(f"histogram {path} is not a text file") from None


def _histogram_rows(path: Path, text: str) -> List[Tuple[int, float]]:
    rows = []
    for lineno, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row or row[0].strip().startswith("#"):
            continue
        if len(row) < 2:
            raise TableError(f"{path}:{lineno}: expected 'size,count', got {','.join(row)!r}")
        try:
            size, count = int(row[0]), float(row[1])
        except ValueError:
            if lineno == 1:
                continue  # header
            raise TableError(f"{path}:{lineno}: expected 'size,count' numbers, got {','.join(row)!r}") from None
        if not math.isfinite(count) or size > MAX_VALUE:
            raise TableError(f"{path}:{lineno}: the size and the count must be finite numbers "
                             "that fit in 64 bits")
        if size < 0 or count < 0:
            raise TableError(f"{path}:{lineno}: size and count must not be negative")
        rows.append((size, count))
    if not rows:
        raise TableError(f"{path}: the histogram has no rows")
    return rows

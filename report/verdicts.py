"""The end verdicts of a cell: "fastest: tcmalloc ...", "slowest: none ...".

"fastest" names the allocators ahead of every other one after the family's
correction (stats/claims.py): one, several that cannot be told apart
("tcmalloc and mimalloc, tied"), or none, and then why not.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

from ..stats.rank import MIN_RUNS
from ..stats.summary import format_values
from . import metrics as metric_defs
from .sentences import claim_phrase, constant_phrase, verdict_phrase

__all__ = ["Verdict", "constant_value", "verdicts_of", "comparison_json"]


def comparison_json(c, **more) -> dict:
    """A stats.rank.Comparison as --json gives it: its fields, and the ratio (or the difference)
    under the names earlier versions used."""
    ratio = c.scale == "ratio"
    out = {k: v for k, v in c.to_dict().items() if k != "message"}
    return dict(out, significant=c.significant, other_is_better=c.other_is_better,
                ratio=c.estimate if ratio else None, ratio_ci=list(c.ci) if ratio and c.ci else None,
                difference_ci=list(c.ci) if not ratio and c.ci else None, **more)


def constant_value(values: Sequence[float]) -> Optional[float]:
    """The one value of runs that all gave it (at least 2 runs), else None."""
    return values[0] if len(values) >= 2 and all(v == values[0] for v in values) else None


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass
class Verdict:
    """The best (``ahead``) or the worst allocators for one metric, read off a family.Ranking."""
    metric: str
    word: str                              # "fastest" ("slowest")
    ranking: object                        # stats.family.Ranking
    runs: Mapping[str, Sequence[float]]    # every allocator's runs of this metric
    ahead: bool = True
    few: List[str] = field(default_factory=list)   # left out: fewer than MIN_RUNS runs

    @property
    def group(self) -> tuple:
        """The allocators named, in the order of the word (the slowest first for "slowest")."""
        found = self.ranking.best if self.ahead else self.ranking.worst
        return tuple(found if self.ahead else reversed(found))

    @property
    def order(self) -> List[str]:
        return list(self.ranking.order if self.ahead else reversed(self.ranking.order))

    @property
    def significant(self) -> bool:
        return bool(self.group)

    def _margin(self):
        """(named allocator, the one it is compared with, their Pair, read as the first against the second)."""
        order, group = self.order, self.group
        if len(order) < 2:
            return None
        if group:     # the closest call: the group's last against the best of the rest
            first, second = group[-1], next(x for x in order if x not in group)
        else:         # why no claim: the leader against the first it is not ahead of
            first = order[0]
            beats = self.ranking.beats if self.ahead else (lambda x, y: self.ranking.beats(y, x))
            second = next((x for x in order[1:] if not beats(first, x)), order[1])
        return first, second, self.ranking.pair(first, second)

    @property
    def margin(self) -> Optional[tuple]:
        """(the allocator the sentence names first, the one it is compared with): the closest call of a
        claim, or the leader and the one it is not ahead of; None with fewer than two allocators."""
        margin = self._margin()
        return margin[:2] if margin else None

    @property
    def best(self) -> Optional[str]:
        return self.group[0] if self.group else (self.order[0] if self.order else None)

    @property
    def runner_up(self) -> Optional[str]:
        margin = self._margin()
        return margin[1] if margin else None

    @property
    def comparison(self):
        margin = self._margin()
        return margin[2].result if margin else None

    def _left_out(self) -> str:
        if not self.few:
            return ""
        counts = ", ".join(f"{n} {len(self.runs.get(n, []))}" for n in self.few)
        return f" (among the allocators with at least {MIN_RUNS} runs; {counts})"

    def sentence(self) -> str:
        order, word = self.order, self.word
        if not order:
            counts = ", ".join(f"{n} {len(v)}" for n, v in self.runs.items())
            return f"{word}: too few runs to tell ({counts}; a claim needs {MIN_RUNS} per allocator)"
        if len(order) == 1:
            return f"{word}: {order[0]} (the only allocator with enough runs){self._left_out()}"
        first, second, pair = self._margin()
        c, m = pair.result, metric_defs.metric(self.metric)
        if self.group:
            label = ("the runner-up" if self.ahead else f"the next {word}") if len(self.group) == 1 else "the next"
            named = f"{first}" if len(self.group) == 1 else f"{_and(self.group)}, tied; {first}"
            values = tuple(constant_value(self.runs[x]) for x in (first, second))
            text = (claim_phrase(c, f"{label}, {second}", m.word) if None in values
                    else constant_phrase(c, f"{label}, {second}", m.word, values))
            return f"{word}: {named} {text}, significant{self._left_out()}"
        return f"{word}: none{self._left_out()}: {self._why_none(first, second, c, m)}"

    def _why_none(self, first: str, second: str, c, m) -> str:
        same = [constant_value(self.runs[x]) for x in (first, second)]
        if same[0] is not None and same[0] == same[1]:
            return f"{first} and {second} give {format_values(same[0])[0]} in every run"
        lead = f"{first}, the {self.word} by median,"
        if c.significant:      # beaten by an allocator further down: a cycle of noisy claims
            return f"{lead} {claim_phrase(c, second, m.word)}, significant"
        relation = "ahead of" if self.ahead else "behind"
        return f"{lead} is {verdict_phrase(c, second, relation, names=(first, second))}"

    def to_json(self) -> dict:
        c = self.comparison
        return {"metric": self.metric, "word": self.word, "ahead": self.ahead, "group": list(self.group),
                "significant": self.significant, "best": self.best, "runner_up": self.runner_up,
                "left_out": self.few, "sentence": self.sentence(),
                "comparison": comparison_json(c) if c is not None else None}


def verdicts_of(rankings: Mapping[str, object], few: Mapping[str, List[str]],
                runs: Mapping[str, Mapping[str, Sequence[float]]]) -> Dict[str, Dict[str, Verdict]]:
    """{"verdicts": {metric: the best}, "last": {metric: the worst, with three allocators or more}}."""
    out: Dict[str, Dict[str, Verdict]] = {"verdicts": {}, "last": {}}
    for metric, ranking in rankings.items():
        d = metric_defs.metric(metric)
        out["verdicts"][metric] = Verdict(metric, d.best, ranking, runs[metric], True, few.get(metric, []))
        if d.worst and len(ranking.order) >= 3:      # with two, the runner-up above says it
            out["last"][metric] = Verdict(metric, d.worst, ranking, runs[metric], False, few.get(metric, []))
    return out

"""`--param NAME=VALUE` as a command line gives it: the overrides of a scenario's params, or a sweep of them."""

from ..errors import UsageError
from .resolve import parse_param_value


def parse_params(items, sweep=False, words=False):
    """`--param k=v` (several times, or k=v1,v2 with sweep) into {k: value or [values]}.

    words: a value that is not a number is kept as its text (a real program's `{k}` takes any argument;
    a scenario's params are numbers)."""
    params = {}
    for item in items or []:
        for part in item.split(";"):
            if "=" not in part:
                raise UsageError(f"--param {part!r}: expected NAME=VALUE")
            key, _, text = part.partition("=")
            key = key.strip()
            try:
                values = [_value(v, words) for v in text.split(",")]
            except ValueError as exc:
                raise UsageError(f"--param {key}: {exc}") from None
            if len(values) > 1 and not sweep:
                raise UsageError(f"--param {key}: several values are for `scenc run` sweeps; give one here")
            params[key] = values if sweep else values[0]
    return params


def _value(text: str, words: bool):
    try:
        return parse_param_value(text)
    except ValueError:
        if not words or not text.strip():
            raise
        return text.strip()

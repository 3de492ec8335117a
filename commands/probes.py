"""`scenc probes`: what can be measured, and the plan for a selection."""

import textwrap

from ..errors import EXIT_OK, UsageError
from ..probes import PROBES, ProbeError
from ..probes.planner import conflict, plan_spec


def format_probes() -> str:
    lines = []
    for name, p in PROBES.items():
        others = [o for o in PROBES if o != name and conflict(name, o)]
        lines.append(f"{name}{' (default)' if p.default else ''}")
        for label, text in (("measures", p.description), ("costs", p.cost),
                            ("perturbs", ", ".join(sorted(p.perturbs)) or "nothing measurable"),
                            ("sensitive to", ", ".join(sorted(p.sensitive_to)) or "nothing"),
                            ("not in a run with", ", ".join(others) or "-")):
            lines.extend(textwrap.wrap(text, 100, initial_indent=f"  {label + ':':<19}",
                                       subsequent_indent=" " * 21))
    lines.append("")
    lines.extend(textwrap.wrap(
        "Select with `scenc run FILE --probes time,memory,layout`: scenc plans the fewest runs in "
        "which no probe perturbs what another measures (`scenc probes --plan LIST` shows them). "
        "Join probes with '+' to force them into one run; that is refused when a figure would be "
        "false.", 100))
    return "\n".join(lines)


def probes(args) -> int:
    if args.plan is None:
        print(format_probes())
        return EXIT_OK
    try:
        plan = plan_spec(args.plan)
    except ProbeError as exc:
        raise UsageError(str(exc)) from None
    print(plan.explain())
    return EXIT_OK

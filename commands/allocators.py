"""`scenc allocators`: what can be passed to --allocators on this machine."""

from ..allocators import registry
from ..errors import EXIT_OK, UsageError


def allocators(args) -> int:
    try:
        known = registry.known(args.config)
    except registry.AllocatorError as exc:
        raise UsageError(str(exc)) from None
    print(format_table(known, registry.problem))
    missing = [a for a in known if registry.problem(a) is not None]
    if missing:
        print(f"\n{len(missing)} not usable here; the notes say how to install or fix them.")
    return EXIT_OK


def format_table(allocators, problem) -> str:
    """A plain-text table for `scenc allocators`; `problem(a)` says why one is not usable."""
    header = ("name", "installed", "version", "library", "notes")
    rows = []
    for a in allocators:
        issue = problem(a)
        notes = [f"{k}={v}" for k, v in a.env.items()]
        if issue:
            notes.append(issue)
        rows.append((
            a.name,
            "yes" if issue is None else "no",
            a.version or "-",
            a.library or ("(system malloc, no preload)" if a.uses_system_malloc else "-"),
            "; ".join(notes),
        ))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in [header] + rows]
    return "\n".join(lines)

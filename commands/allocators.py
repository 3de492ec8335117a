"""`scenc allocators`: what can be passed to --allocators on this machine."""

from ..errors import EXIT_OK, UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "allocators", help="list known allocators: installed or not, path, version, install hint",
        description="Built-in allocators first, then those from the config files "
                    "($SCENC_ALLOCATORS or ~/.config/scenc/allocators.ini, and --config). "
                    "Use your own library with --allocators mine=/path/libmine.so.")
    p.add_argument("--config", metavar="FILE", help="an allocator config file (INI) to read too")
    p.set_defaults(func=cmd_allocators)


def cmd_allocators(args) -> int:
    from ..allocators import registry
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

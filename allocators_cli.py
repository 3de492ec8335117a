"""`scenc allocators`: what can be passed to --allocators on this machine."""

import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "allocators", help="list known allocators: installed or not, path, version, install hint",
        description="Built-in allocators first, then those from the config files "
                    "($SCENC_ALLOCATORS or ~/.config/scenc/allocators.ini, and --config). "
                    "Use your own library with --allocators mine=/path/libmine.so.")
    p.add_argument("--config", metavar="FILE", help="an allocator config file (INI) to read too")
    p.set_defaults(func=cmd_allocators)


def cmd_allocators(args) -> int:
    from . import allocators as registry
    try:
        known = registry.known(args.config)
    except registry.AllocatorError as exc:
        print(f"scenc: {exc}", file=sys.stderr)
        return 64
    print(registry.format_table(known))
    missing = [a for a in known if registry.problem(a) is not None]
    if missing:
        print(f"\n{len(missing)} not usable here; the notes say how to install or fix them.")
    return 0

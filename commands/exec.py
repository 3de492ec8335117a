"""`scenc exec FILE [--allocator NAME]`: build a scenario and run it once, under the system malloc or one allocator
(its preload proved as in `scenc run`): counts, time, rate."""

import json
import os
import sys

from ..allocators import registry
from ..compiler.pipeline import build as build_program
from ..errors import EXIT_OK, EXIT_RUN, UsageError
from ..report.execsummary import format_exec
from ..run import memlimit
from ..run.runner import ProgramRunner
from ..scenario.params import parse_params
from ..system.process import Terminated, describe_status, signals_raise
from ..system.units import fmt_bytes
from .compile import sanitizer_flags


def exec_once(args):
    allocator = _allocator(args)
    b = build_program(args.scenario, parse_params(args.param), cc=args.cc, extra_flags=sanitizer_flags(args),
                      warn=lambda m: print(m, file=sys.stderr), allow_huge=args.allow_huge)
    # ASan and TSan reserve terabytes of shadow memory, which RLIMIT_DATA counts.
    limit = None if args.sanitize in ("address", "thread") else args.memory_limit
    env = allocator.preload_env(os.environ) if allocator is not None else os.environ
    try:
        # SIGTERM (`timeout 40 scenc exec`) and SIGHUP kill the program's group on the way out: it runs in a
        # session of its own, out of reach of a signal sent to scenc's group.
        with signals_raise():
            outcome = ProgramRunner().run([str(b.binary)], env, args.timeout, limit, capture_stderr=False)
    except Terminated as exc:
        print(f"scenc: {exc}: the scenario program was killed (process group)", file=sys.stderr)
        return 128 + exc.signum
    if outcome.timed_out:
        print(f"scenc: the scenario program did not finish within {args.timeout:g} s; killed (process group)",
              file=sys.stderr)
        return EXIT_RUN
    if outcome.over_limit is not None:
        print(f"scenc: out of memory: the scenario program already used {fmt_bytes(outcome.over_limit)} "
              f"when its memory limit of {memlimit.describe(limit)} was set; killed", file=sys.stderr)
        return EXIT_RUN
    if outcome.returncode != 0:
        print(f"scenc: the scenario program failed with {describe_status(outcome.returncode)}", file=sys.stderr)
        return EXIT_RUN
    result = json.loads(outcome.stdout)
    if allocator is not None and not registry.provider_matches(allocator, result.get("provider")):
        print(f"scenc: WRONG ALLOCATOR: {registry.explain_mismatch(allocator, result.get('provider'))}",
              file=sys.stderr)
        return EXIT_RUN
    if args.json:
        print(json.dumps(dict(result, allocator=allocator.name) if allocator else result, indent=2))
    else:
        if allocator is not None:
            settings = " ".join(f"{k}={v}" for k, v in allocator.env.items())
            print(f"allocator {allocator.name}{f' ({settings})' if settings else ''}")
        print(format_exec(result))
    failed = sum(t.get("failed", 0) for t in result["threads"])
    if args.allow_huge and failed and limit is not None:
        print(f"scenc: out of memory: {failed} allocations returned NULL under the memory limit of "
              f"{memlimit.describe(limit)}", file=sys.stderr)
        return EXIT_RUN
    return EXIT_OK


def _allocator(args):
    """--allocator NAME as `scenc run --allocators` reads one name (a variant or a path too); None without it."""
    if not getattr(args, "allocator", None):
        return None
    if args.sanitize in ("address", "thread"):
        raise UsageError(f"--allocator with --sanitize {args.sanitize}: the sanitizer brings its own malloc, "
                         f"which a preloaded allocator cannot replace")
    try:
        chosen = registry.resolve(args.allocator, config_path=args.allocator_config)
    except registry.AllocatorError as exc:
        raise UsageError(f"--allocator: {exc}") from None
    if len(chosen) != 1:
        raise UsageError(f"--allocator {args.allocator!r}: one allocator (`scenc run --allocators` compares several)")
    return chosen[0]

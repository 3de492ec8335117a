"""`scenc exec FILE`: build a scenario and run it once under the default allocator: counts, time, rate."""

import json
import os
import sys

from ..compiler.pipeline import build as build_program
from ..errors import EXIT_OK, EXIT_RUN
from ..report.execsummary import format_exec
from ..run import memlimit
from ..run.runner import ProgramRunner
from ..scenario.params import parse_params
from ..system.process import Terminated, describe_status, signals_raise
from ..system.units import fmt_bytes
from .compile import sanitizer_flags


def exec_once(args):
    b = build_program(args.scenario, parse_params(args.param), cc=args.cc, extra_flags=sanitizer_flags(args),
                      warn=lambda m: print(m, file=sys.stderr), allow_huge=args.allow_huge)
    # ASan and TSan reserve terabytes of shadow memory, which RLIMIT_DATA counts.
    limit = None if args.sanitize in ("address", "thread") else args.memory_limit
    try:
        # SIGTERM (`timeout 40 scenc exec`) and SIGHUP kill the program's group on the way out: it runs in a
        # session of its own, out of reach of a signal sent to scenc's group.
        with signals_raise():
            outcome = ProgramRunner().run([str(b.binary)], os.environ, args.timeout, limit, capture_stderr=False)
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
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_exec(result))
    failed = sum(t.get("failed", 0) for t in result["threads"])
    if args.allow_huge and failed and limit is not None:
        print(f"scenc: out of memory: {failed} allocations returned NULL under the memory limit of "
              f"{memlimit.describe(limit)}", file=sys.stderr)
        return EXIT_RUN
    return EXIT_OK

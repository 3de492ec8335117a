"""`scenc check`, `emit` and `build`: a scenario file to diagnostics, to C, to a program.

The front end and the code generator load only when a build is not in the cache (compiler/pipeline.py).
"""

import shutil
import sys
import time

from ..compiler.pipeline import build as build_program, emit as emit_c, load, print_warnings
from ..errors import EXIT_OK
from ..scenario.params import parse_params


def sanitizer_flags(args):
    if not getattr(args, "sanitize", None):
        return ()
    return (f"-fsanitize={args.sanitize}", "-fno-omit-frame-pointer")


def check(args):
    loaded = load(args.scenario, parse_params(args.param))
    print_warnings(loaded)
    r = loaded.resolved
    print(f"{args.scenario}: ok ({len(r.groups)} thread group{'s' * (len(r.groups) != 1)}, "
          f"{r.total_threads} threads, {len(loaded.warnings)} warning{'s' * (len(loaded.warnings) != 1)})")
    return EXIT_OK


def emit(args):
    sys.stdout.write(emit_c(args.scenario, parse_params(args.param)))
    return EXIT_OK


def build(args):
    start = time.perf_counter()
    b = build_program(args.scenario, parse_params(args.param), cc=args.cc, extra_flags=sanitizer_flags(args),
                      warn=lambda m: print(m, file=sys.stderr))
    took = time.perf_counter() - start
    if args.output:
        shutil.copy2(b.binary, args.output)
        where = args.output
    else:
        where = str(b.binary)
    print(f"{where} ({'cached' if b.cached else 'built'} in {took * 1000:.0f} ms)")
    return EXIT_OK

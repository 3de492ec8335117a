#!/usr/bin/env python3
"""A long fuzz run of scenc's front end (the short one is tests/test_fuzz_frontend.py).

    .venv/bin/python bench/fuzz_frontend.py --minutes 10
    .venv/bin/python bench/fuzz_frontend.py --minutes 60 --seed 7 --build-every 20 --save /tmp/crashes

Inputs, in turn: programs generated from the grammar (tests/fuzz/scn_gen.py),
mutants of the examples and of the language sketch (tests/fuzz/mutate.py),
and random bytes or random unicode text. Each goes through parse, checks,
lowering and rendering (tests/fuzz/oracle.py says what must hold); every
`--build-every`-th accepted program is compiled with each `--cc`, and tame
generated ones (cheap by construction) are run. Every `--cli-every`-th
random input also goes through `scenc check` in a subprocess, to see the
user's view (exit status, `file:line:col:` message, no traceback).

Crashing inputs are saved (named by their hash) into `--save`, by default
tests/fuzz_corpus/, where tests/test_fuzz_frontend.py replays them. Prints
the tally every minute and at the end: inputs tried, accepted, rejected,
built, ran, crashed. Exit status 1 when anything crashed.

Builds go to a temporary SCENC_CACHE (thousands of throwaway programs do not
belong in the user's cache) unless SCENC_CACHE is set.
"""

import argparse
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fuzz import mutate, oracle, scn_gen, seeds  # noqa: E402
from fuzz.chooser import RandomChooser  # noqa: E402

SCENC = [sys.executable, "-m", "scenc.cli"]


def cli_check(path: Path) -> None:
    """`scenc check` on an input the front end rejects: non-zero, a file-named message, no traceback."""
    proc = subprocess.run([*SCENC, "check", str(path)], capture_output=True, text=True, timeout=120)
    if "Traceback" in proc.stderr or proc.returncode not in (0, 1):
        raise oracle.Finding(f"scenc check exit {proc.returncode}:\n{proc.stderr[-3000:]}")
    if proc.returncode == 1 and not proc.stderr.startswith(f"{path}:"):
        raise oracle.Finding(f"scenc check's message does not start with the file name:\n{proc.stderr[:500]}")


def make_input(c: RandomChooser, kind: str, seed_texts):
    """(bytes, tame) for one input of the given kind."""
    if kind == "generated":
        g = scn_gen.generate(c)
        return g.text.encode("utf-8"), not g.wild
    if kind == "mutated":
        name = c.pick(sorted(seed_texts))
        return mutate.mutate(c, seed_texts[name]).encode("utf-8"), False
    if c.bool(0.5):
        return c.raw(400), False
    return c.text(400).encode("utf-8"), False


def save(folder: Path, kind: str, data: bytes, why: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = folder / f"found-{kind}-{digest}.scn"
    path.write_bytes(data)
    path.with_suffix(".txt").write_text(why)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    ap.add_argument("--build-every", type=int, default=25, help="compile every Nth accepted input")
    ap.add_argument("--cli-every", type=int, default=200, help="also run `scenc check` on every Nth rejected input")
    ap.add_argument("--cc", default="gcc,clang", help="compilers to build with, comma-separated")
    ap.add_argument("--save", type=Path, default=ROOT / "tests" / "fuzz_corpus")
    args = ap.parse_args(argv)

    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    c = RandomChooser(rng)
    compilers = [x for x in args.cc.split(",") if x]
    own_cache = None
    if not os.environ.get("SCENC_CACHE"):
        own_cache = tempfile.TemporaryDirectory(prefix="scenc-fuzz-cache-")
        os.environ["SCENC_CACHE"] = own_cache.name
    seed_texts = seeds.all_seeds()
    data_files = seeds.example_data_files()
    work = Path(tempfile.mkdtemp(prefix="scenc-fuzz-"))
    scn_gen.prepare_dir(work)
    for name, content in data_files.items():
        (work / name).write_bytes(content)
    case = work / "case.scn"

    tally = oracle.Tally()
    kinds = ["generated"] * 5 + ["mutated"] * 4 + ["random"]
    print(f"fuzzing for {args.minutes} min, seed {seed}, compilers {compilers}, saving crashes to {args.save}",
          flush=True)
    start = time.monotonic()
    next_report = start + 60
    deadline = start + args.minutes * 60
    since_build = {"tame": 0, "wild": 0}
    rejected_since_cli = 0
    while time.monotonic() < deadline:
        kind = rng.choice(kinds)
        data, tame = make_input(c, kind, seed_texts)
        case.write_bytes(data)
        tally.tried += 1
        params = scn_gen.param_overrides(c, data.decode("utf-8", "replace")) \
            if kind == "generated" and rng.random() < 0.2 else {}
        if params:
            tame = False  # a million iterations may be what the override asks for
        try:
            out = oracle.front_end(case, params)
            if out.accepted:
                tally.accepted += 1
                group = "tame" if tame else "wild"
                since_build[group] += 1
                # Tame programs are built (and run) five times as often: they are the ones that can run.
                if since_build[group] >= (max(1, args.build_every // 5) if tame else args.build_every):
                    since_build[group] = 0
                    for cc in compilers:
                        binary = oracle.compile_c(out.c_text, cc)
                        tally.built += 1
                        if tame:
                            oracle.run_program(binary, out.scenario_name)
                            tally.ran += 1
            else:
                tally.rejected += 1
                rejected_since_cli += 1
                if kind == "random" and rejected_since_cli >= args.cli_every:
                    rejected_since_cli = 0
                    cli_check(case)
        except oracle.Finding as exc:
            tally.crashed += 1
            path = save(args.save, kind, data, (f"--param {params}\n" if params else "") + str(exc))
            tally.crashes.append(str(path))
            first = str(exc).strip().splitlines()[-1][:160] if str(exc).strip() else "?"
            print(f"CRASH ({kind}) saved to {path}: {first}", flush=True)
        now = time.monotonic()
        if now >= next_report:
            print(f"[{(now - start) / 60:.1f} min] {tally.line()}", flush=True)
            next_report = now + 60
    print(f"done in {(time.monotonic() - start) / 60:.1f} min (seed {seed}): {tally.line()}")
    if own_cache is not None:
        own_cache.cleanup()
    return 1 if tally.crashed else 0


if __name__ == "__main__":
    sys.exit(main())

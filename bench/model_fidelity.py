"""Does a fitted model stand for its program? (issue 27)

For real programs the project does not ship (Debian packages: lua5.4, perl, ruby, sqlite3, jq, node,
ripgrep, git, gcc's cc1 run directly on a C file generated here; cfrac and espresso from mimalloc-bench,
built here from a checkout given with --mimalloc-bench), this bench captures the program (`scenc capture
--method preload`), fits a model (`scenc convert --model`, as by default: calibrated on the capture's peak
of live bytes, nothing else), and runs the model BESIDE the program in one session (bench/fidelity.py's
run_session):

    scenc run PROG-model.scn --allocators glibc,tcmalloc,jemalloc,mimalloc --runs N -- PROGRAM ARGS

and prints per program, from `scenc report --json` (no statistics of its own):

* the model's wall time over the program's, under glibc (the program's time between calls is the model's
  `work`: close to 1 for a single-threaded program);
* the model's peak RSS over the program's, under glibc (target 0.75-1.33x);
* each allocator's peak RSS minus glibc's, model against program (target: within 25% + 2 MiB);
* the model's peak of live bytes over the capture's, as the model's header gives them (target: within 10%);
* agree / DISAGREE / - at each end (fastest, slowest, leanest, fattest; '-' where the program's own
  difference is not significant), then one summary table (bench/fidelity.py's).

The model is fitted to the trace only: no allocator result enters it. The bench reports; it exits 0 even
when a model disagrees, 1 when a program cannot be captured, converted or run (its runs stay in the work
directory). A program missing on this machine is skipped, and said.

    .venv/bin/python bench/model_fidelity.py [--runs N] [--programs lua,perl,...] \
        [--mimalloc-bench DIR] [--workdir DIR] [--json FILE] [--before DIR]

--before DIR also captures and converts each program with the scenc of DIR/scenc (a `git archive` of, say,
main: its own tracer, since the log's format may differ) and runs that model beside the program first, so that a
change to the tracer or the model writer is seen before and after in one invocation.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fidelity import (DEFAULT_ALLOCATORS, MIB, METRICS, beside, capture, metric_block,  # noqa: E402
                      run_session, scenc_cli, summary_table, verdicts_of)

RATIO_RANGE = (0.75, 1.33)       # the model's peak RSS over the program's
DELTA_SHARE, DELTA_MIB = 0.25, 2.0   # allocator - glibc, model against program

LUA = """local t = {}
for i = 1, 150000 do t[i] = {id = i, name = "n" .. i, v = {i, i * 2}} end
local s = {}
for i = 1, 40000 do s[i] = string.rep("x", i % 40) .. tostring(i * 7919 % 100003) end
table.sort(s)
local n = 0
for i = 1, #t, 3 do t[i] = nil; n = n + 1 end
print(n, #s)
"""
PERL = """my %h; for my $i (1..150000) { $h{"k$i"} = [$i, "v" x ($i % 30)]; }
my @s = sort { $a cmp $b } map { "s" . ($_ * 7919 % 100003) } 1..60000;
delete $h{"k$_"} for grep { $_ % 3 == 0 } 1..150000;
print scalar(keys %h), " ", scalar(@s), "\\n";
"""
RUBY = """a = (1..120000).map { |i| { id: i, name: "n#{i}", v: [i, i * 2] } }
s = (1..50000).map { |i| "s#{i * 7919 % 100003}" * (1 + i % 3) }.sort
a.select! { |h| h[:id] % 3 != 0 }
puts a.size, s.size
"""
SQL = ("create table t(a integer, b text); "
       "with recursive c(x) as (select 1 union all select x + 1 from c limit 60000) "
       "insert into t select x, hex(randomblob(24)) from c; "
       "create index tb on t(b); select count(*), max(b) from t where a % 7 = 0;")
JQ = "[range(120000)] | map({a: ., b: (. * 7919 % 100003 | tostring)}) | sort_by(.b) | length"
NODE = """const zlib = require('zlib');
const a = [];
for (let i = 0; i < 150000; i++) { a.push({k: 'key' + i, v: [i, 'x'.repeat(i % 40)]}); if (a.length > 40000) a.splice(0, 500); }
const s = JSON.stringify(a.slice(0, 10000));
let left = 16;
for (let i = 0; i < 16; i++) zlib.gzip(Buffer.from(s + i), (e, z) => { zlib.gunzip(z, () => { left--; }); });
"""


@dataclass
class RealProgram:
    name: str
    what: str
    needs: str                                   # the executable (on PATH) it needs
    make: Callable[[Path, Optional[Path]], Optional[List[str]]]   # (workdir, mimalloc-bench) -> argv, or None
    missing: str = ""                            # why make gave None (default: no mimalloc-bench checkout)


def _git_history(work: Path, _mb) -> List[str]:
    """`git log -p` over a repository made here: 400 commits of 12 files of C-like text, each commit
    rewriting some lines of 3 files (made by one `git fast-import`, the same bytes every time)."""
    repo = work / "history.git"
    if not repo.exists():
        subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
        files = {f"src/f{k}.c": [f"int f{k}_{j}(int x) {{ return x * {j * 7919 % 1009} + {k}; }}"
                                 for j in range(300)] for k in range(12)}
        stream = []
        for i in range(400):
            for k in (i % 12, i * 5 % 12, i * 7 % 12):
                lines = files[f"src/f{k}.c"]
                for j in range(i % 17, len(lines), 23):
                    lines[j] = f"int f{k}_{j}(int x) {{ return x * {(i * j + k) % 1009} - {i}; }}"
            stamp = 1700000000 + i * 3600
            message = f"change {i}\n".encode()
            stream.append(f"commit refs/heads/main\ncommitter A U Thor <a@example.org> {stamp} +0000\n"
                          f"data {len(message)}\n".encode() + message)
            for path, lines in files.items():
                body = ("\n".join(lines) + "\n").encode()
                stream.append(f"M 100644 inline {path}\ndata {len(body)}\n".encode() + body + b"\n")
        subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(stream), check=True)
    return ["git", "-C", str(repo), "log", "-p", "main"]


def c_translation_unit(prototypes: int = 4300, functions: int = 120) -> str:
    """A C file like a preprocessed translation unit of about 600 KB, the same bytes every time: mostly what
    headers bring (400 structs, 150 enums, 4300 prototypes, 500 unused inline helpers), then the file's own
    functions (structs on the stack, loops, a switch over their fields, calls between them), which cc1 -O2
    takes through its passes (about 3 s here)."""
    types = ("int", "long", "double", "unsigned long", "short", "char *", "float")
    out = ["extern int printf(const char *, ...);"]
    for s in range(400):
        fields = "".join(f" {types[(s + j) % 7]} f{j};" for j in range(3 + s % 13))
        out.append(f"struct s{s} {{{fields} struct s{s} *next; char name[{8 + s % 24}]; }};")
        out.append(f"typedef struct s{s} s{s}_t;")
    for e in range(150):
        out.append(f"enum e{e} {{ " + ", ".join(f"E{e}_{k} = {k * 3 + e}" for k in range(4 + e % 20)) + " };")
    for p in range(prototypes):
        params = ", ".join(f"{types[(p + a) % 7]} a{a}" for a in range(1 + p % 5))
        out.append(f"extern {types[p % 7]} api{p}(s{p % 400}_t *self, {params});")
    for h in range(500):
        out.append(f"static inline long helper{h}(const s{h * 7 % 400}_t *p, int k) "
                   f"{{ return p ? (long)p->f0 * k + {h} : -k; }}")
    for f in range(functions):
        s = f * 3 % 400
        numeric = [j for j in range(3 + s % 13) if (s + j) % 7 != 5]       # not the char * fields
        cases = "\n".join(f"    case {c}: acc += p->f{numeric[c % len(numeric)]} * {c * 7919 % 101 + 1}; break;"
                          for c in range(6 + f % 11))
        calls = "".join(f"\n  acc += fn{g}(n - 1, k + {g % 13});" for g in (f - 1, f // 2) if 0 <= g < f) \
            if f % 4 else ""
        out.append(f"""long fn{f}(int n, int k) {{
  s{s}_t items[{4 + f % 8}], *p = items;
  long acc = {f}; double tbl[{4 + f % 12}]; int i, j;
  for (i = 0; i < (int)(sizeof items / sizeof items[0]); i++) {{
    items[i].next = i + 1 < (int)(sizeof items / sizeof items[0]) ? &items[i + 1] : 0;
    items[i].f{numeric[0]} = i * k; items[i].name[0] = (char)('a' + i);
  }}
  for (i = 0; i < (int)(sizeof tbl / sizeof tbl[0]); i++) tbl[i] = i * {f % 17 + 1}.5 + k;
  for (i = 0; i < n; i++) {{
    switch ((i * {f % 29 + 3} + k) % {8 + f % 9}) {{
{cases}
    default: for (j = 0; j < {2 + f % 5}; j++) acc -= (long)tbl[(i + j) % (int)(sizeof tbl / sizeof tbl[0])] ^ j;
    }}
    if (p->next && (acc & {f % 7 + 1})) p = p->next;
    if (p->name[0] == '{chr(97 + f % 26)}') acc += {f}L * n;
  }}{calls}
  return acc + (long)tbl[k % (int)(sizeof tbl / sizeof tbl[0])];
}}""")
    out.append(f'int main(int argc, char **argv) {{\n  (void)argv;\n'
               f'  printf("%ld\\n", fn{functions - 1}(argc + 20, 3));\n  return 0;\n}}\n')
    return "\n".join(out)


def _cc1(work: Path, _mb) -> Optional[List[str]]:
    """gcc's cc1 run directly (as the gcc driver runs it) on c_translation_unit(): `cc1 -quiet -O2 FILE -o
    /dev/null`; None when `gcc -print-prog-name=cc1` names no file."""
    found = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True, text=True).stdout.strip()
    if not found or not Path(found).is_file():
        return None
    source = work / "unit.c"
    source.write_text(c_translation_unit())
    return [found, "-quiet", "-O2", str(source), "-o", "/dev/null"]


def _script(name: str, text: str, interpreter: str) -> Callable:
    def make(work: Path, _mb) -> List[str]:
        path = work / name
        path.write_text(text)
        return [interpreter, str(path)]
    return make


# The sources and flags of mimalloc-bench's bench/CMakeLists.txt.
CFRAC = ("cfrac.c pops.c pconst.c pio.c pabs.c pneg.c pcmp.c podd.c phalf.c padd.c psub.c pmul.c pdivmod.c "
         "psqrt.c ppowmod.c atop.c ptoa.c itop.c utop.c ptou.c errorp.c pfloat.c pidiv.c pimod.c picmp.c primes.c "
         "pcfrac.c pgcd.c").split()
ESPRESSO = ("cofactor.c cols.c compl.c contain.c cubestr.c cvrin.c cvrm.c cvrmisc.c cvrout.c dominate.c equiv.c "
            "espresso.c essen.c exact.c expand.c gasp.c getopt.c gimpel.c globals.c hack.c indep.c irred.c main.c "
            "map.c matrix.c mincov.c opo.c pair.c part.c primes.c reduce.c rows.c set.c setc.c sharp.c sminterf.c "
            "solution.c sparse.c unate.c utility.c verify.c").split()
MB_FLAGS = ["-O2", "-std=gnu89", "-w", "-Wno-implicit-function-declaration", "-Wno-implicit-int",
            "-Wno-int-conversion", "-Wno-incompatible-pointer-types"]


def _built(program: str, sources: Sequence[str], args: Sequence[str], defines: Sequence[str] = ()) -> Callable:
    """A mimalloc-bench program (bench/cfrac, bench/espresso of the checkout), built as its CMakeLists does."""
    def make(work: Path, mb: Optional[Path]) -> Optional[List[str]]:
        if mb is None:
            return None
        src = mb / "bench" / program
        if not src.is_dir():
            return None
        out = work / program
        done = subprocess.run(["gcc", *MB_FLAGS, *defines, "-o", str(out), *sources, "-lm"], capture_output=True,
                              text=True, cwd=src)
        if done.returncode != 0:
            raise RuntimeError(f"building {program} failed: {done.stderr.strip()[-600:]}")
        return [str(out), *[str(src / a) if (src / a).exists() else a for a in args]]
    return make


PROGRAMS = [
    RealProgram("lua", "lua5.4: a table of 150,000 records, 40,000 strings sorted", "lua5.4",
                _script("t.lua", LUA, "lua5.4")),
    RealProgram("perl", "perl: a hash of 150,000 entries, 60,000 strings sorted", "perl",
                _script("t.pl", PERL, "perl")),
    RealProgram("ruby", "ruby: 120,000 hashes, 50,000 strings sorted", "ruby", _script("t.rb", RUBY, "ruby")),
    RealProgram("sqlite3", "sqlite3 :memory:: 60,000 rows, an index, a query", "sqlite3",
                lambda work, mb: ["sqlite3", ":memory:", SQL]),
    RealProgram("jq", "jq -n: 120,000 objects sorted by a key", "jq", lambda work, mb: ["jq", "-n", JQ]),
    RealProgram("node", "node: 150,000 objects, gzip in its thread pool (several threads)", "node",
                _script("t.js", NODE, "node")),
    RealProgram("ripgrep", "rg -j2: a count of two words over /usr/include (2 search threads)", "rg",
                lambda work, mb: ["rg", "-j2", "-c", "--no-messages", "alloc|free", "/usr/include"]),
    RealProgram("git", "git log -p: 400 commits of 12 files, a repository made here", "git", _git_history),
    RealProgram("cc1", "gcc's cc1 -O2 on a generated C file of 600 KB (declarations, then 120 functions)", "gcc",
                _cc1, "gcc -print-prog-name=cc1 names no file"),
    RealProgram("cfrac", "mimalloc-bench cfrac (a 28-digit number)", "gcc",
                _built("cfrac", CFRAC, ["1754518652050731705637113883"], ["-DNOMEMOPT=1"])),
    RealProgram("espresso", "mimalloc-bench espresso largest.espresso", "gcc",
                _built("espresso", ESPRESSO, ["largest.espresso"])),
]


def under_glibc(pair: dict, metric: str) -> tuple:
    """(the program's figures, the model's, the model's over the program's under glibc) of one metric."""
    found = pair["metrics"][metric]
    real, model = dict(found["program"]), dict(found["scenario"])
    ratio = model["glibc"] / real["glibc"] if real.get("glibc") and model.get("glibc") else float("nan")
    return real, model, ratio


def spreads(analysis: dict, metric: str) -> dict:
    """(target, allocator) -> (runs, standard deviation) of a metric over the session's runs ('command': the
    program's, 'scenario': the model's), from `scenc report --json`'s summaries of the raw samples."""
    out = {}
    for block in analysis.get("blocks", []):
        for a, summary in block["allocators"].items():
            m = summary["metrics"].get(metric)
            if m and m.get("n"):
                out[block["target"], a] = (m["n"], m.get("stdev") or 0.0)
    return out


def rss_lines(pair: dict, names: Sequence[str], analysis: Optional[dict] = None) -> tuple:
    """(lines, ratio, deltas ok, deltas checked): the model's peak RSS over the program's under glibc, and each
    allocator's difference from glibc, model against program.

    A difference is judged on the means, and on the runs: the program's own peak RSS moves from run to run (node's
    under jemalloc by 119-125 MiB in ten runs), so a difference of means is off by chance as much as the standard
    error of the difference of differences, from the four sets of runs (program and model, the allocator and
    glibc). A delta passes when it is within 25% + 2 MiB of the program's, or within that and twice this standard
    error (about 95%: the runs do not show the model's delta outside the target); the line says which, and the
    count is of the first (the second apart in the summary's `by_runs`)."""
    real, model, ratio = under_glibc(pair, "peak_rss_kib")
    spread = spreads(analysis or {}, "peak_rss_kib")
    ok_ratio = RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]
    lines = [f"  peak RSS under glibc: model {model.get('glibc', float('nan')) / MIB:.1f} MiB, program "
             f"{real.get('glibc', float('nan')) / MIB:.1f} MiB: {ratio:.2f}x "
             f"({'ok' if ok_ratio else 'OUTSIDE'} {RATIO_RANGE[0]}-{RATIO_RANGE[1]}x)",
             f"  allocator - glibc peak RSS, model vs program (within {DELTA_SHARE:.0%} + {DELTA_MIB:g} MiB; "
             f"or with the runs' spread: +2 standard errors of the difference):"]
    passed = checked = by_runs_only = 0
    for a in names:
        if a == "glibc" or a not in real or a not in model:
            continue
        dr, dm = (real[a] - real["glibc"]) / MIB, (model[a] - model["glibc"]) / MIB
        bound = DELTA_SHARE * abs(dr) + DELTA_MIB
        ok = abs(dm - dr) <= bound
        parts = [spread.get((t, x)) for t in ("command", "scenario") for x in (a, "glibc")]
        se = (sum(sd * sd / n for n, sd in parts) ** 0.5) / MIB if all(parts) else None
        by_runs = se is not None and abs(dm - dr) <= bound + 2 * se
        passed, checked, by_runs_only = passed + ok, checked + 1, by_runs_only + (by_runs and not ok)
        word = "ok" if ok else "ok by the runs" if by_runs else "FAIL"
        se_text = f" (standard error {se:.1f} MiB)" if se is not None else ""
        lines.append(f"    {a:<10} program {dr:+7.1f} MiB  model {dm:+7.1f} MiB  {word}{se_text}")
    return lines, ratio, passed, checked, by_runs_only


def wall_line(pair: dict) -> tuple:
    """The model's wall time over the program's, under glibc: (line, ratio). A model that makes its calls
    without the program's time between them runs far shorter than its program (docs/capture.md)."""
    real, model, ratio = under_glibc(pair, "wall_s")
    return (f"  wall time under glibc: model {model.get('glibc', float('nan')) * 1e3:.1f} ms, program "
            f"{real.get('glibc', float('nan')) * 1e3:.1f} ms: {ratio:.2f}x"), ratio


def convert_model(trace: Path, scn: Path, before: Optional[Path]) -> subprocess.CompletedProcess:
    """`scenc convert --model` by this tree's scenc, or by the scenc of the tree `before` (a `git archive` of
    another commit under BEFORE/scenc) when given."""
    cmd = ("convert", "--model", str(trace), "-o", str(scn))
    if before is None:
        return scenc_cli(*cmd)
    return scenc_cli(*cmd, env=dict(os.environ, PYTHONPATH=str(before)))


def measure(p: RealProgram, argv: List[str], work: Path, names: Sequence[str], runs: int, seed: int,
            progress=print, before: Optional[Path] = None, trace: Optional[Path] = None) -> tuple:
    """Capture (unless given the trace), convert (by the `before` tree's scenc when given) and run the model
    beside its program: (lines, summary)."""
    label = "before" if before is not None else "model"
    t0 = time.perf_counter()
    if trace is None:
        trace = work / (f"{p.name}-before.trace" if before is not None else f"{p.name}.trace")
        capture(argv, trace, env=None if before is None else dict(os.environ, PYTHONPATH=str(before)))
    scn = work / f"{p.name}-{label}.scn"
    proc = convert_model(trace, scn, before)
    if proc.returncode not in (0, 4):       # 4: written, from an incomplete capture (its warning says what was lost)
        raise RuntimeError(f"scenc convert --model {trace} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    converted = time.perf_counter() - t0
    # the summary's "calls  CAPTURE  MODEL" row: the capture's
    calls = next((line.split()[-2] for line in proc.stdout.splitlines() if line.strip().startswith("calls ")), "?")
    # ... and its "live bytes, peak  CAPTURE  MODEL" row: the model's peak of live bytes, measured, beside the capture's
    live = next((line.split()[-2:] for line in proc.stdout.splitlines()
                 if line.strip().startswith("live bytes, peak")), None)
    notes = [line.strip() for line in proc.stdout.splitlines() + proc.stderr.splitlines()
             if "without channels" in line or "hold all they carry" in line]
    progress(f"  {p.name}: captured ({calls} calls) and modelled{' (before)' if before else ''} in {converted:.1f} s")
    t0 = time.perf_counter()
    analysis = run_session(argv, scn, names, runs, seed, work / f"{p.name}-{label}-result.json")
    progress(f"  {p.name}: model beside the program, {len(names)} allocators x {runs} runs + warm-up, in "
             f"{time.perf_counter() - t0:.1f} s")
    pair = beside(analysis)
    lines = [f"== {p.name}{' (BEFORE: the model of ' + str(before) + ')' if before else ''}: {p.what} "
             f"({calls} calls; convert --model {converted:.0f} s) =="]
    lines += [f"  {n}" for n in notes]
    ends = {}
    for metric, title, unit, scale, _ in METRICS:
        found = pair["metrics"][metric]
        block = metric_block(title, unit, scale, names, found)
        lines += [line.replace("replay", "model") for line in block]
        ends.update({e["word"]: e for e in found["ends"]})
    wall, wall_ratio = wall_line(pair)
    rss, ratio, passed, checked, by_runs = rss_lines(pair, names, analysis)
    lines += [wall] + rss
    live_ratio = float("nan")
    if live and all(x.isdigit() for x in live) and int(live[0]):
        live_ratio = int(live[1]) / int(live[0])
        lines.append(f"  peak live bytes (the model's header): model {int(live[1]) / 1e6:.1f} MB, capture "
                     f"{int(live[0]) / 1e6:.1f} MB: {live_ratio:.2f}x ({'ok' if abs(live_ratio - 1) <= 0.1 else 'OFF'}"
                     f" within 10%)")
    summary = {"program": p.name, "calls": calls, "convert_s": round(converted, 1), "rss_ratio": ratio,
               "wall_ratio": wall_ratio, "live_peak": live, "live_ratio": live_ratio, "trace": str(trace),
               "verdicts": verdicts_of(ends.values()), "rss_checks_passed": passed, "rss_checks": checked,
               "rss_checks_by_runs": by_runs,
               "side_by_side": pair, "result_file": analysis.get("result_file")}
    return lines, summary


def summary_lines(summaries: List[dict], label: str) -> List[str]:
    return (summary_table(summaries, stand_in=label)
            + ["  " + ", ".join(f"{s['program']} wall {s['wall_ratio']:.2f}x, RSS {s['rss_ratio']:.2f}x, live "
                                f"{s['live_ratio']:.2f}x" + (f", {s['rss_checks_by_runs']} delta(s) ok by the runs only"
                                                            if s.get('rss_checks_by_runs') else "")
                                for s in summaries),
               "  (wall, RSS: the model's over the program's under glibc; live: the model's peak of live bytes over "
               "the capture's)"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="measured runs per program x allocator (default 5)")
    ap.add_argument("--allocators", default=DEFAULT_ALLOCATORS)
    ap.add_argument("--programs", default=",".join(p.name for p in PROGRAMS))
    ap.add_argument("--mimalloc-bench", type=Path, default=None, metavar="DIR",
                    help="a checkout of daanx/mimalloc-bench (its bench/cfrac and bench/espresso are built here)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=None, help="keep captures, models and results here")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--before", type=Path, default=None, metavar="DIR",
                    help="also capture and convert each program with the scenc of DIR/scenc (`git archive main | "
                         "tar -x -C DIR/scenc`) and run that model beside the program first: before and after in one "
                         "invocation")
    args = ap.parse_args(argv)
    names = args.allocators.split(",")
    if names[0] != "glibc":
        print("model_fidelity: the first allocator must be glibc (the baseline)", file=sys.stderr)
        return 1
    wanted = args.programs.split(",")
    unknown = set(wanted) - {p.name for p in PROGRAMS}
    if unknown:
        print(f"model_fidelity: unknown program(s) {', '.join(sorted(unknown))}; known: "
              f"{', '.join(p.name for p in PROGRAMS)}", file=sys.stderr)
        return 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="scenc-model-fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"model_fidelity: {len(wanted)} programs x {len(names)} allocators x (program + model), {args.runs} runs + "
          f"scenc's warm-up, one session per program; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"work in {work}", flush=True)
    summaries, befores = [], []
    for p in (p for p in PROGRAMS if p.name in wanted):
        if shutil.which(p.needs) is None:
            print(f"  {p.name}: skipped ({p.needs} is not installed)")
            continue
        try:
            argv_ = p.make(work, args.mimalloc_bench)
            if argv_ is None:
                print(f"  {p.name}: skipped ({p.missing or f'no --mimalloc-bench checkout with bench/{p.name}'})")
                continue
            if args.before is not None:
                lines, summary = measure(p, argv_, work, names, args.runs, args.seed, before=args.before)
                print("\n".join(lines) + "\n", flush=True)
                befores.append(summary)
            lines, summary = measure(p, argv_, work, names, args.runs, args.seed)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            print(f"model_fidelity: {p.name}: {e}", file=sys.stderr)
            return 1
        print("\n".join(lines) + "\n", flush=True)
        summaries.append(summary)
    if befores:
        print("\n".join(summary_lines(befores, f"BEFORE ({args.before}) model")) + "\n")
    if summaries:
        print("\n".join(summary_lines(summaries, "model")))
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"runs": args.runs, "allocators": names, "programs": summaries,
                                         "before": befores}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A/A benchmark: how often does `scenc run` call identical allocators different?

Issue 26. An allocator-config INI gives K names (aa-1 .. aa-K, default 4) to ONE
library (jemalloc from `scenc allocators` unless `--library`), so every
difference the report finds between them is a false claim. The bench runs
`scenc run SCENARIO --allocator-config INI --allocators aa-1,..,aa-K --runs R`
N times (`--invocations`, default 40; `--quick`: 8), each with its own result
file, then `scenc report RESULT --json` on each, and counts the invocations
that claim a difference:

* printed report (what a user reads): any sentence that says one name is
  faster, slower, leaner or fatter than another: a baseline sentence ending in
  ", significant", a `fastest:`/`slowest:`/`leanest:`/`fattest:` line that is
  significant, a "... than ...: X vs Y in every run" sentence (constant and
  different). "no significant difference", "not significantly", "the same as",
  "tie", "only allocator" are not claims. Any other line with "significant" or
  with a direction word (faster, slower, more/less memory, higher/lower) and
  "than" is counted too and printed as UNCLASSIFIED, so nothing slips by;
* `--json`: any comparison (against the baseline) or verdict (`verdicts`,
  `last`) with "significant": true, counted for the metrics the printed report
  shows (the headline: it should equal the report's count) and for every metric
  in the file (22 for a plain scenario: CPU times, faults, per thread ...).

Printed: the share of invocations with a claim and its Clopper-Pearson 95%
interval for each, the claims per metric and per kind of sentence, some claim
sentences verbatim (to audit the classifier), sentences whose printed interval
contradicts their word (a "significant" interval that contains 1 once rounded,
a "no significant difference" interval that excludes 1), the time of one
invocation, the load average at start and end, and a PASS/FAIL line against
issue 26's target: at most 4 claims in 40 invocations (10%) in the printed report.

    .venv/bin/python bench/aa.py --quick                  # 8 invocations, under a minute
    .venv/bin/python bench/aa.py                          # 40 invocations, about 2-3 minutes on 2 CPUs
        [--invocations N] [--runs N|auto] [--names K] [--library PATH]
        [--scenario FILE] [--param K=V ...] [--time-budget 10s] [--examples 8]
        [--scenc PATH] [--tree DIR] [--keep DIR] [--json FILE] [--seed S]

It only drives the command line (`scenc run`, `scenc report --json`,
`scenc allocators`) and reads their output, so it keeps working whatever the
layout of scenc's sources. `--scenc` is the command (default: the `scenc`
beside this Python, i.e. the venv's); `--tree DIR` runs the scenc of another
checkout DIR with that command's Python (PYTHONPATH to DIR, or DIR/src when
the package lives there), e.g. a pinned worktree while the main checkout is
being edited. Builds go to a temporary SCENC_CACHE unless one is set, so the
first invocation also compiles the scenario.

`--runs auto` lets scenc decide (rounds until each CI is within --ci, at most
--max-runs) under `--time-budget` (default 10 s here, to keep an invocation
short); without a budget scenc's own 45 s would apply. Exit status 0 whatever
the rate (that is the measurement), 1 when an invocation fails.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from scipy.stats import beta

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.10          # issue 26: at most 4 claims in 40 invocations
VERDICT_WORDS = ("fastest", "slowest", "leanest", "fattest")
VERDICT_METRIC = {"fastest": "wall time", "slowest": "wall time", "leanest": "peak RSS", "fattest": "peak RSS"}
NOT_CLAIM = re.compile(r"no significant difference|not significant|the same as|\btie\b|the only allocator|"
                       r"no runs to compare|cannot be compared")
SIGNIFICANT = re.compile(r",\s*significant\s*$")
DIRECTION = re.compile(r"\b(faster|slower|more memory|less memory|higher|lower)\b.*\bthan\b")
TABLE_TITLE = re.compile(r"^(\S.*?) \((lower|higher) is better\)")
INTERVAL = re.compile(r"\((?:[^()]*?(?:ratio|difference) )?(-?[0-9.]+)\s*[–-]\s*(-?[0-9.]+)\)")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple:
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def scenc_command(args) -> tuple:
    """(argv prefix, environment) for running scenc as the user would."""
    env = dict(os.environ)
    exe = args.scenc
    if exe is None:
        beside = Path(sys.executable).parent / "scenc"
        exe = str(beside) if beside.exists() else shutil.which("scenc")
    if not exe:
        raise SystemExit("aa.py: no scenc command found; give --scenc PATH")
    if args.tree:
        tree = Path(args.tree).resolve()
        if (tree / "src" / "scenc").is_dir():
            path = tree / "src"
        elif (tree / "scenc").is_dir():
            path = tree
        else:  # the checkout itself is the package (setup.cfg: package_dir scenc = .)
            path = Path(tempfile.mkdtemp(prefix="scenc-aa-tree-"))
            (path / "scenc").symlink_to(tree)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    return [exe], env


def default_library(scenc, env) -> str:
    """The library of the first installed preloadable built-in in `scenc allocators`."""
    out = subprocess.run([*scenc, "allocators"], capture_output=True, text=True, env=env, check=True).stdout
    found = {}
    for line in out.splitlines()[1:]:
        words = line.split()
        if len(words) >= 3 and words[1] == "yes":
            lib = next((w for w in words[2:] if w.startswith("/")), None)
            if lib:
                found[words[0]] = lib
    for name in ("jemalloc", "tcmalloc", "mimalloc"):
        if name in found:
            return found[name]
    if found:
        return next(iter(found.values()))
    raise SystemExit("aa.py: `scenc allocators` lists no installed preloadable library; give --library PATH")


def classify_line(line: str) -> str:
    """'claim', 'no' or 'unclassified' for one line of the printed report."""
    text = line.strip()
    if NOT_CLAIM.search(text):
        return "no"
    if SIGNIFICANT.search(text):
        return "claim"
    if "in every run" in text and " than " in text:
        return "claim"          # both sides constant and different: a difference without the word
    if "signific" in text or DIRECTION.search(text):
        return "unclassified"   # a claim by its words, in a form this bench does not know
    return "no"


def interval_contradiction(text: str, claim: bool) -> str:
    """A sentence whose printed interval, as printed, says the opposite of its word."""
    m = None
    for m in INTERVAL.finditer(text):
        pass
    if m is None:
        return ""
    try:
        lo, hi = sorted((float(m.group(1)), float(m.group(2))))
    except ValueError:
        return ""
    if "difference" in text[m.start():m.end()]:
        contains = lo <= 0 <= hi
        ref = "0"
    else:
        contains = lo <= 1 <= hi
        ref = "1"
    if claim and contains:
        return f"claims a difference, but its printed interval contains {ref}"
    if not claim and not contains and ("no significant difference" in text or "not significantly" in text):
        return f"says not significant, but its printed interval excludes {ref}"
    return ""


def parse_report(stdout: str) -> dict:
    """Claims of the printed report: [(metric label, kind, sentence)] and other findings."""
    claims, unclassified, odd = [], [], []
    metric = None
    for line in stdout.splitlines():
        title = TABLE_TITLE.match(line)
        if title:
            metric = title.group(1)
            continue
        if line.startswith("== "):
            metric = None
            continue
        word = line.split(":", 1)[0] if not line.startswith(" ") else ""
        if word in VERDICT_WORDS:
            where, kind = VERDICT_METRIC[word], word
        elif line.startswith("  ") and metric:
            where, kind = metric, "vs baseline"
        else:
            where, kind = metric or "?", "other"
        verdict = classify_line(line)
        if verdict == "no" and not ("than" in line or "ratio" in line or "difference" in line):
            continue
        if verdict == "claim":
            claims.append((where, kind, line.strip()))
        elif verdict == "unclassified":
            unclassified.append(line.strip())
            claims.append((where, "unclassified", line.strip()))
        problem = interval_contradiction(line, verdict != "no")
        if problem:
            odd.append((problem, line.strip()))
    return {"claims": claims, "unclassified": unclassified, "odd": odd}


def parse_json(analysis: dict) -> dict:
    """Claims of `scenc report --json`: [(metric key, kind, sentence)], per metric."""
    claims = []
    labels = {k: v.get("label", k) for k, v in analysis.get("metrics", {}).items()}
    disagree = []   # a sentence whose words say the opposite of its "significant" flag
    for block in analysis.get("blocks", []):
        for metric, comps in (block.get("comparisons") or {}).items():
            for alloc, c in (comps or {}).items():
                sentence = c.get("sentence", f"{alloc} vs baseline")
                if c.get("significant"):
                    claims.append((metric, "vs baseline", sentence))
                if (classify_line(sentence) != "no") != bool(c.get("significant")):
                    disagree.append((metric, c.get("significant"), sentence))
        for key in ("verdicts", "last"):
            for metric, v in (block.get(key) or {}).items():
                comp = v.get("comparison") or {}
                sentence = v.get("sentence", "")
                if comp.get("significant"):
                    claims.append((metric, v.get("word", key), sentence))
                if comp and (classify_line(sentence) != "no") != bool(comp.get("significant")):
                    disagree.append((metric, comp.get("significant"), sentence))
    return {"claims": claims, "labels": labels, "disagree": disagree}


def run_one(i, args, scenc, env, ini, names, folder) -> dict:
    out = folder / f"aa-{i:03d}.json"
    argv = [*scenc, "run", str(args.scenario), "--allocator-config", str(ini), "--allocators", ",".join(names),
            "--runs", str(args.runs), "-q", "-o", str(out)]
    if args.runs == "auto":
        argv += ["--time-budget", args.time_budget]
    for p in args.param:
        argv += ["--param", p]
    if args.seed is not None:
        argv += ["--seed", str(args.seed + i)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    rec = {"i": i, "argv": argv, "seconds": took, "load": load, "rc": proc.returncode, "result": str(out),
           "stdout": proc.stdout, "stderr_tail": proc.stderr[-2000:]}
    if proc.returncode != 0 or not out.exists():
        rec["error"] = f"scenc run exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
        return rec
    rep = subprocess.run([*scenc, "report", str(out), "--json"], capture_output=True, text=True, env=env)
    if rep.returncode != 0:
        rec["error"] = f"scenc report --json exited {rep.returncode}: {rep.stderr.strip()[-500:]}"
        return rec
    analysis = json.loads(rep.stdout)
    rec["report"] = parse_report(proc.stdout)
    rec["json"] = parse_json(analysis)
    rec["n_runs"] = {a: s.get("n") for b in analysis.get("blocks", []) for a, s in b.get("allocators", {}).items()}
    return rec


def share_line(label: str, k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"  {label:<52} {k:>3} of {n:<3} = {k / n:6.1%}   95% CI {lo:6.1%} - {hi:6.1%}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--invocations", type=int, default=40, help="invocations of `scenc run` (default 40)")
    ap.add_argument("--quick", action="store_true", help="8 invocations: a smoke check")
    ap.add_argument("--runs", default="10", help="--runs of each invocation: N or auto (default 10)")
    ap.add_argument("--time-budget", default="10s", help="with --runs auto: scenc's --time-budget (default 10s)")
    ap.add_argument("--names", type=int, default=4, help="names given to the one library (default 4)")
    ap.add_argument("--library", help="the library every name loads (default: jemalloc's from `scenc allocators`)")
    ap.add_argument("--scenario", default=str(ROOT / "bench/scenarios/loop.scn"),
                    help="scenario (default bench/scenarios/loop.scn)")
    ap.add_argument("--param", action="append", default=[], help="passed on to scenc run (repeatable)")
    ap.add_argument("--seed", type=int, help="seed of invocation i is SEED+i (default: scenc's random seed)")
    ap.add_argument("--examples", type=int, default=8, help="claim sentences printed verbatim (default 8)")
    ap.add_argument("--scenc", help="the scenc command (default: the one beside this Python, else on PATH)")
    ap.add_argument("--tree", help="run the scenc of this checkout (via PYTHONPATH) with that command's Python")
    ap.add_argument("--keep", help="keep the result files in this directory")
    ap.add_argument("--json", help="write every invocation's classification here")
    args = ap.parse_args(argv)
    if args.quick:
        args.invocations = 8
    if args.runs != "auto" and not args.runs.isdigit():
        ap.error("--runs is a number or auto")
    if args.names < 2:
        ap.error("--names must be at least 2")

    scenc, env = scenc_command(args)
    env.setdefault("SCENC_CACHE", tempfile.mkdtemp(prefix="scenc-aa-cache-"))
    library = args.library or default_library(scenc, env)
    names = [f"aa-{k}" for k in range(1, args.names + 1)]
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="scenc-aa-"))
    folder.mkdir(parents=True, exist_ok=True)
    ini = folder / "aa.ini"
    ini.write_text("# bench/aa.py: one library under several names\n" +
                   "".join(f"[{n}]\nlibrary = {library}\n\n" for n in names))
    tree = Path(args.tree).resolve() if args.tree else ROOT
    rev = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %ad", "--date=short"],
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()

    load0 = os.getloadavg()
    started = datetime.now(timezone.utc)
    print(f"A/A: {args.names} names ({', '.join(names)}) for one library, {library}")
    print(f"scenario {args.scenario}{' ' + ' '.join('--param ' + p for p in args.param) if args.param else ''}; "
          f"--runs {args.runs}{' --time-budget ' + args.time_budget if args.runs == 'auto' else ''}; "
          f"{args.invocations} invocations")
    print(f"scenc: {' '.join(scenc)}{' with the code of ' + str(tree) if args.tree else ''} "
          f"(git {rev}{', with uncommitted changes' if dirty else ''})")
    print(f"started {started:%Y-%m-%d %H:%M} UTC; load average at start {load0[0]:.2f} {load0[1]:.2f} "
          f"{load0[2]:.2f} on {os.cpu_count()} CPUs", flush=True)

    records = []
    for i in range(args.invocations):
        rec = run_one(i, args, scenc, env, ini, names, folder)
        records.append(rec)
        if "error" in rec:
            print(f"  #{i + 1}: FAILED: {rec['error']}", flush=True)
            continue
        r, j = rec["report"], rec["json"]
        print(f"  #{i + 1:>2} {rec['seconds']:5.1f} s  load {rec['load']:5.2f}  runs/name "
              f"{min(rec['n_runs'].values())}-{max(rec['n_runs'].values())}  report claims {len(r['claims'])}"
              f"  json claims {len(j['claims'])} (metrics: {len({c[0] for c in j['claims']})})", flush=True)
    load1 = os.getloadavg()

    done = [r for r in records if "error" not in r]
    failed = len(records) - len(done)
    n = len(done)
    print()
    if not n:
        print("no invocation finished")
        return 1
    secs = [r["seconds"] for r in done]
    print(f"one invocation: median {statistics.median(secs):.1f} s (min {min(secs):.1f}, max {max(secs):.1f}); "
          f"total {sum(secs) / 60:.1f} min; runs per name {statistics.median(v for r in done for v in r['n_runs'].values()):g} (median)")
    print(f"load average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} on {os.cpu_count()} CPUs"
          f"{f'; {failed} invocation(s) FAILED and are left out' if failed else ''}")

    # which JSON metrics are the printed report's tables: matched by label
    labels = done[0]["json"]["labels"]
    printed = set()
    for r in done:
        for line in r["stdout"].splitlines():
            t = TABLE_TITLE.match(line)
            if t:
                printed |= {m for m, lab in labels.items() if lab == t.group(1)}
    rep_k = sum(1 for r in done if r["report"]["claims"])
    jh_k = sum(1 for r in done if any(c[0] in printed for c in r["json"]["claims"]))
    ja_k = sum(1 for r in done if r["json"]["claims"])
    print()
    print("invocations that claim a difference between identical allocators:")
    print(share_line("printed report (any claim)", rep_k, n))
    print(share_line(f"--json, printed metrics ({', '.join(sorted(printed))})", jh_k, n))
    print(share_line(f"--json, any of its {len(labels)} metrics", ja_k, n))
    mismatch = [r["i"] + 1 for r in done
                if bool(r["report"]["claims"]) != any(c[0] in printed for c in r["json"]["claims"])]
    if mismatch:
        print(f"  MISMATCH between the printed report and --json on its metrics in invocations {mismatch}")

    print()
    print("claims per metric (invocations with at least one / sentences in all):")
    per_inv, per_sent = Counter(), Counter()
    for r in done:
        per_sent.update(c[0] for c in r["report"]["claims"])
        per_inv.update({c[0] for c in r["report"]["claims"]})
    for m in sorted(per_inv, key=lambda m: -per_inv[m]):
        print(f"  report  {m:<40} {per_inv[m]:>3} invocations, {per_sent[m]:>3} sentences")
    kinds = Counter(c[1] for r in done for c in r["report"]["claims"])
    if kinds:
        print("  report sentences by kind: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    per_inv, per_sent = Counter(), Counter()
    for r in done:
        per_sent.update(c[0] for c in r["json"]["claims"])
        per_inv.update({c[0] for c in r["json"]["claims"]})
    for m in sorted(per_inv, key=lambda m: (-per_inv[m], m)):
        print(f"  json    {m:<40} {per_inv[m]:>3} invocations, {per_sent[m]:>3} comparisons/verdicts"
              f"{'  (printed)' if m in printed else ''}")
    if not any(r["report"]["claims"] or r["json"]["claims"] for r in done):
        print("  none")

    print()
    examples = [(r["i"] + 1, c[2]) for r in done for c in r["report"]["claims"]]
    print(f"claim sentences of the printed report ({len(examples)} in all; up to {args.examples} shown):")
    by_inv = defaultdict(list)
    for i, s in examples:
        by_inv[i].append(s)
    shown = 0
    while shown < min(args.examples, len(examples)):   # one per invocation first, then more
        for i in list(by_inv):
            if by_inv[i] and shown < args.examples:
                print(f"  #{i}: {by_inv[i].pop(0)}")
                shown += 1
    others = [(r["i"] + 1, c) for r in done for c in r["json"]["claims"] if c[0] not in printed]
    print(f"--json claims on metrics the report does not print ({len(others)} in all; up to "
          f"{min(args.examples, 4)} shown):")
    for i, (m, kind, s) in others[:min(args.examples, 4)]:
        print(f"  #{i} {m} ({kind}): {s}")
    unclassified = [(r["i"] + 1, s) for r in done for s in r["report"]["unclassified"]]
    for i, s in unclassified:
        print(f"  UNCLASSIFIED (counted as a claim) #{i}: {s}")

    odd = [(r["i"] + 1, p, s) for r in done for p, s in r["report"]["odd"]]
    disagree = [(r["i"] + 1, m, f, s) for r in done for m, f, s in r["json"]["disagree"]]
    print()
    print(f"sentences whose printed interval (as rounded) contradicts their word: {len(odd)} "
          f"(in {len({o[0] for o in odd})} invocations)")
    for i, p, s in odd[:args.examples]:
        print(f"  #{i}: {p}: {s}")
    print(f"--json sentences whose words disagree with their \"significant\" flag: {len(disagree)}")
    for i, m, f, s in disagree[:args.examples]:
        print(f"  #{i} {m} significant={f}: {s}")

    lo, hi = clopper_pearson(rep_k, n)
    ok = rep_k / n <= TARGET
    print()
    print(f"{'PASS' if ok else 'FAIL'}: {rep_k} of {n} printed reports ({rep_k / n:.1%}, 95% CI {lo:.1%}-{hi:.1%}) "
          f"claim a difference between identical allocators; target at most {TARGET:.0%} (4 in 40)")

    if args.json:
        Path(args.json).write_text(json.dumps({
            "library": library, "names": names, "scenario": args.scenario, "runs": args.runs,
            "params": args.param, "load_start": load0, "load_end": load1, "git": rev,
            "invocations": records}, indent=1, default=list))
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

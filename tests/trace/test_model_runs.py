"""convert --model's runs of a model (trace/model/runs.py): Ctrl-C while two runs are made side by side ends
them at once. Each run is in a session of its own, out of reach of the terminal's SIGINT, and the pool that
makes them waited for both to end (seconds to minutes on a large capture).

A real build of a real scenario with the `live` probe, run by a real ModelRuns in a child Python; the only
thing made up is the scenario: one of a single thread that runs for minutes, as a large capture's model does.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = r'''
import sys, time
from pathlib import Path
from scenc.trace.model import ModelResult
from scenc.trace.model.runs import ModelRuns
from scenc.trace.model.shape import Group
scn = Path(sys.argv[1])
text = scn.read_text()
result = ModelResult(scn, text, [], 0, {"malloc": 10**10, "free": 10**10}, [Group("main", [1], [])], [], [], [], [])
runs = ModelRuns(result)
runs.prepare()
print(runs.binary, flush=True)
try:
    runs.peaks([1, 2, 3])
except KeyboardInterrupt:
    print("interrupted", flush=True)
    runs.close()
    sys.exit(130)
'''

# About 30 s a run (malloc and free of one block, 10^9 times): longer than the test waits for the child to stop.
FOREVER = """\
scenario "forever"
thread main {
    repeat 1_000_000_000 {
        p = malloc(64)
        free(p)
    }
}
"""


def _processes_of(binary: str) -> list:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/exe") == binary:
                    found.append(int(name))
            except OSError:
                pass
    return found


def test_ctrl_c_ends_the_runs_made_side_by_side_at_once(tmp_path):
    scn = tmp_path / "forever.scn"
    scn.write_text(FOREVER)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(scn)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, SCENC_CACHE=str(tmp_path / "cache")))
    try:
        binary = proc.stdout.readline().strip()
        assert binary, proc.communicate()
        binary = str(Path(binary).resolve())
        deadline = time.monotonic() + 30
        while len(_processes_of(binary)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_processes_of(binary)) == 2, "the two runs side by side"
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        stdout, stderr = proc.communicate(timeout=20)
        stopped = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert stdout.strip() == "interrupted"
    assert stopped < 10, f"the child waited {stopped:.1f} s for its runs"
    assert _processes_of(binary) == [], "a run outlived the interruption"
    assert not (tmp_path / "forever.runs.scn").exists()

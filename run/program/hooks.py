"""`--prepare CMD` and `--cleanup CMD`: shell commands run before and after each run of a program, not timed.

As hyperfine's: a command through /bin/sh, in the program's working directory, with the program's
environment but not the allocator's preload (they are not what is measured), its `{name}`s filled with the
run's params like the program's arguments. They run for warm-ups too. A command that fails (a non-zero
exit, a signal, the run's timeout) makes the run a failed one, with what the command said, since the
program would have run on a state nobody prepared or left one nobody cleaned.
"""

import shlex
from datetime import datetime, timezone
from typing import Mapping, Optional, Tuple

from ..record import RunRecord, Status
from ...system.process import describe_status

_TAIL = 500


def run_hook(runner, option: str, command: Optional[str], target, base_env: Mapping[str, str],
             timeout_s: Optional[float]) -> Tuple[bool, Optional[str]]:
    """(interrupted, why the command failed or None). Nothing to run: (False, None)."""
    if not command:
        return False, None
    env = dict(base_env)
    env.update(target.env_dict)
    script = f"cd {shlex.quote(target.cwd)} && {command}" if target.cwd else command
    outcome = runner.run(["/bin/sh", "-c", script], env, timeout_s)
    if runner.interrupted:
        return True, None
    if outcome.timed_out:
        return False, f"{option} {command!r} did not end within {timeout_s:g} s (killed)"
    if outcome.returncode != 0:
        said = (outcome.stderr.strip() or outcome.stdout.strip())[-_TAIL:]
        return False, (f"{option} {command!r} failed ({describe_status(outcome.returncode)})"
                       + (f": {said}" if said else ""))
    return False, None


def hook_failure(config, round_: int, warmup: bool, problem: str) -> RunRecord:
    """The record of a run whose --prepare failed: the program did not run."""
    record = RunRecord.new(config, round_, warmup, stderr_tail="", exit_code=None,
                           started=datetime.now(timezone.utc).isoformat(timespec="milliseconds"), duration_s=0.0)
    record.fail(Status.CRASHED, problem=problem)
    return record

"""Self-describing result files: one header, then one record per run.

Format ("scenc-result/2"; "/1" files are read too, see SCHEMA) is JSON Lines, UTF-8 (ASCII in practice):

* line 1 is the header object: schema, status, scenario name and source (with
  its sha256), parameters, seed, machine, allocators, probes, plan, command
  line and creation time -- everything needed to interpret or rerun it;
* every following line is one run record, in the order the runs finished.

Appending one line is O(1) where rewriting one JSON document is O(file size), and as crash-safe:

* a run is appended with a single ``write`` of one complete line; ``fsync``
  follows when SYNC_EVERY_S has passed since the last one (between runs, never
  during one), and at ``close`` and ``set_status``.  A record exists only once
  its terminating newline is written, so an interruption of scenc at any
  moment (Ctrl-C, a crash: the kernel has every line written) leaves the old
  runs intact plus at most an unterminated fragment, which :func:`load`
  ignores (``ignored_tail_bytes``) and the next :meth:`ResultFile.append_run`
  cuts off; a crash of the machine itself may lose the runs of the last second;
* the header (created, or its ``status`` changed) is written to a temporary
  file in the same directory, fsynced, and moved over the result file with
  ``os.replace``, so readers see either the old or the new file, never a mix.

One process writes a file at a time; any number may read it meanwhile.
``jq -s .`` or ``[json.loads(l) for l in open(path)]`` read it without scenc.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import time
import json
import os
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ..system.metadata import load_averages
from .record import RecordError, RunRecord, check_run, select

__all__ = [
    "SCHEMA",
    "FILE_STATUSES",
    "ResultFileError",
    "ResultFile",
    "make_header",
    "create",
    "load",
    "export_csv",
]

SCHEMA = "scenc-result/2"
# /2 added real commands (`scenc run -- ./prog`): a header may have "targets"
# ({"command": its argv, cwd, stdin, env and --metric}; its "source" is then
# empty when there is no scenario), a record may have "target": "command",
# "proof" and "stdout_tail", and a run may end "no-metric". A /1 file reads
# as a /2 file with no command.
READABLE_SCHEMAS = ("scenc-result/1", SCHEMA)
FORMAT_DESCRIPTION = (
    "JSON Lines: this header, then one run record per line "
    "(a trailing line without a newline is an unfinished write and is ignored)"
)
FILE_STATUSES = ("running", "interrupted", "complete")

PathLike = Union[str, "os.PathLike[str]"]


class ResultFileError(ValueError):
    """A result file that cannot be read: names the file (and line)."""

    def __init__(self, path: PathLike, problem: str, line: Optional[int] = None):
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {problem}")


class _Invalid(Exception):
    """Validation problem, turned into ValueError or ResultFileError by callers."""


# ------------------------------------------------------------------ validation


def _require(record: Mapping[str, Any], key: str, types: Tuple[type, ...], what: str) -> Any:
    if key not in record:
        raise _Invalid(f"{what} has no {key!r}")
    value = record[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise _Invalid(f"{what} field {key!r} should be {names}, got {value!r:.80}")
    return value


def _check_header(header: Mapping[str, Any]) -> Mapping[str, Any]:
    """The header, if it is one; _Invalid naming what is wrong otherwise."""
    if not isinstance(header, dict):
        raise _Invalid("header is not a JSON object")
    schema = header.get("schema")
    if schema not in READABLE_SCHEMAS:
        raise _Invalid(f"unsupported schema {schema!r} (this scenc reads "
                       f"{' and '.join(map(repr, READABLE_SCHEMAS))})")
    status = _require(header, "status", (str,), "header")
    if status not in FILE_STATUSES:
        raise _Invalid(f"header status {status!r} is not one of {', '.join(FILE_STATUSES)}")
    _require(header, "scenario", (str,), "header")
    source = _require(header, "source", (str,), "header")
    digest = _require(header, "source_sha256", (str,), "header")
    if hashlib.sha256(source.encode("utf-8")).hexdigest() != digest:
        raise _Invalid("source_sha256 does not match the stored scenario source")
    _require(header, "params", (dict,), "header")
    _require(header, "seed", (int, type(None)), "header")
    _require(header, "machine", (dict,), "header")
    allocators = _require(header, "allocators", (dict,), "header")
    for name, allocator in allocators.items():
        what = f"allocator {name!r}"
        if not isinstance(allocator, dict):
            raise _Invalid(f"{what} should be an object with path, version and env")
        _require(allocator, "path", (str, type(None)), what)
        _require(allocator, "version", (str, type(None)), what)
        _require(allocator, "env", (dict,), what)
    _require(header, "probes", (list,), "header")
    _require(header, "plan", (dict, list), "header")
    command = _require(header, "command", (list,), "header")
    if not all(isinstance(arg, str) for arg in command):
        raise _Invalid("header field 'command' should be a list of strings (argv)")
    _require(header, "created", (str,), "header")
    return header


def _read_run(data: Any) -> RunRecord:
    try:
        return RunRecord.from_json(data)
    except RecordError as error:
        raise _Invalid(str(error)) from None


# --------------------------------------------------------------------- files


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


# ensure_ascii keeps lone surrogates from undecodable stderr writable; allow_nan=False because NaN is not JSON.
_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def _json_line(obj: Any) -> bytes:
    return (_ENCODER.encode(obj) + "\n").encode("ascii")


def _serialised(obj: Any, what: str) -> bytes:
    """The line to write, or ValueError naming `what`."""
    try:
        return _json_line(obj)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} is not JSON-serialisable: {error}") from None


def _checked_line(obj: Any, check, what: str) -> Tuple[bytes, Any]:
    """(the line to write, the object as load() will read it back: `check`'s result), or ValueError naming `what`."""
    line = _serialised(obj, what)
    try:
        return line, check(json.loads(line))
    except _Invalid as error:
        raise ValueError(f"invalid {what}: {error}") from None


def _fsync_directory(directory: str) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: At most this long between an appended run and its fsync: the disk's 1-4 ms a run were more than the
#: rest of scenc's work between two runs of a program; once a second it is a thousandth of a session.
SYNC_EVERY_S = 1.0


def _atomic_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(
        dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide results from colleagues
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temporary, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


class _Parsed:
    __slots__ = ("header", "runs", "header_size", "good_size", "tail_size")

    def __init__(self, header, runs, header_size, good_size, tail_size):
        self.header = header
        self.runs = runs
        self.header_size = header_size  # bytes of line 1, newline included
        self.good_size = good_size  # bytes up to the last complete line
        self.tail_size = tail_size  # unterminated bytes after it


def _parse(path: str, data: bytes) -> _Parsed:
    if not data:
        raise ResultFileError(path, "file is empty (not a scenc result file)")
    good_size = data.rfind(b"\n") + 1
    if good_size == 0:
        raise ResultFileError(path, "header line is incomplete (file truncated?)", line=1)
    lines = data[:good_size].split(b"\n")[:-1]
    records = []
    for number, raw in enumerate(lines, start=1):
        try:
            records.append(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as error:
            problem = "not valid JSON" if number > 1 else "not a scenc result file (line 1 is not JSON)"
            raise ResultFileError(path, f"{problem}: {error}", line=number) from None
    try:
        _check_header(records[0])
    except _Invalid as error:
        raise ResultFileError(path, str(error), line=1) from None
    runs = []
    for number, run in enumerate(records[1:], start=2):
        try:
            runs.append(_read_run(run))
        except _Invalid as error:
            raise ResultFileError(path, str(error), line=number) from None
    return _Parsed(records[0], runs, len(lines[0]) + 1, good_size, len(data) - good_size)


def _read(path: str) -> Tuple[bytes, _Parsed]:
    with open(path, "rb") as f:
        data = f.read()
    return data, _parse(path, data)


# ------------------------------------------------------------------- the API


def make_header(
    *,
    scenario: str,
    source: str,
    params: Mapping[str, Any],
    seed: Optional[int],
    machine: Mapping[str, Any],
    allocators: Mapping[str, Mapping[str, Any]],
    probes: Sequence[str],
    plan: Union[Mapping[str, Any], Sequence[Any]],
    command: Sequence[str],
    **extra: Any,
) -> Dict[str, Any]:
    """Header dict for :func:`create`; computes ``source_sha256``.

    ``allocators`` maps a name to ``{"path": ..., "version": ..., "env": {...}}``
    (path None for the system allocator).  ``extra`` keys are kept as given.
    """
    header: Dict[str, Any] = {
        "scenario": scenario,
        "source": source,
        "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "params": dict(params),
        "seed": seed,
        "machine": dict(machine),
        "allocators": {name: dict(spec) for name, spec in allocators.items()},
        "probes": list(probes),
        "plan": plan if isinstance(plan, Mapping) else list(plan),
        "command": list(command),
    }
    header.update(extra)
    return header


class ResultFile:
    """A result file on disk and its contents in memory.

    Get one from :func:`create` or :func:`load` (both also available as
    classmethods).  ``header`` and ``runs`` are plain JSON data; treat them as
    read-only and change the file only through :meth:`append_run` and
    :meth:`set_status`, which update disk first, then memory.
    """

    def __init__(self, path: PathLike, parsed: _Parsed):
        self.path = os.fspath(path)
        self.header: Dict[str, Any] = parsed.header
        self.runs: List[Dict[str, Any]] = parsed.runs
        #: Bytes of an unfinished append found at load time (0 normally).
        self.ignored_tail_bytes = parsed.tail_size
        self._size = parsed.good_size  # what the file holds when in sync
        self._fd: Optional[int] = None
        self._unsynced = False                     # appended since the last fsync (see the module docstring)
        self._synced_at = time.monotonic()

    # -- construction

    @classmethod
    def create(cls, path: PathLike, header: Mapping[str, Any], *, overwrite: bool = False) -> "ResultFile":
        """Write a new file holding only ``header`` (status "running").

        ``schema``, ``format``, ``status`` and ``created`` are filled in, and
        ``source_sha256`` if missing.  Raises ValueError for an incomplete
        header and FileExistsError unless ``overwrite``.
        """
        path = os.fspath(path)
        full = dict(header)
        if "schema" in full and full["schema"] != SCHEMA:
            raise ValueError(f"cannot create schema {full['schema']!r}, only {SCHEMA!r}")
        full["schema"] = SCHEMA
        full["format"] = FORMAT_DESCRIPTION
        full.setdefault("status", "running")
        full.setdefault("created", _now())
        if isinstance(full.get("source"), str) and "source_sha256" not in full:
            full["source_sha256"] = hashlib.sha256(full["source"].encode("utf-8")).hexdigest()
        # Normalise through JSON so memory holds exactly what load() returns.
        line, full = _checked_line(full, _check_header, "header")
        if not overwrite and os.path.exists(path):
            raise FileExistsError(path)
        _atomic_write(path, line)
        return cls(path, _Parsed(full, [], len(line), len(line), 0))

    @classmethod
    def load(cls, path: PathLike) -> "ResultFile":
        """Read and validate a file; ResultFileError if it is not a valid one."""
        path = os.fspath(path)
        _, parsed = _read(path)
        return cls(path, parsed)

    # -- reading

    @property
    def status(self) -> str:
        return self.header["status"]

    def __iter__(self) -> Iterator[RunRecord]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def select(
        self,
        allocator: Optional[str] = None,
        params: Optional[Mapping[str, Any]] = None,
        status: Optional[str] = None,
        probe_set: Optional[str] = None,
    ) -> Iterator[RunRecord]:
        """Runs matching every criterion given (``params`` must match exactly; see run/record.py's select)."""
        return select(self.runs, allocator, params, probe_set, status)

    def metric_values(
        self, metric: str, allocator: str, params: Optional[Mapping[str, Any]] = None,
        probe_set: Optional[str] = None,
    ) -> List[float]:
        """Values of ``metric`` over the successful ("ok") runs, ready for scenc.stats."""
        return [
            run.metrics[metric]
            for run in self.select(allocator, params, status="ok", probe_set=probe_set)
            if run.metrics.get(metric) is not None
        ]

    def to_dict(self) -> Dict[str, Any]:
        """The whole file as one JSON document: {"header": ..., "runs": [...]}."""
        return {"header": self.header, "runs": [run.to_json() for run in self.runs]}

    # -- writing

    def append_run(self, record: RunRecord) -> None:
        """Validate ``record``, write its line, and keep it in ``runs``.

        Raises ValueError (file untouched) if the record is invalid. The record itself is kept, not its line
        read back (as the header is): a record's fields are JSON's own types, so :func:`load` reads an equal
        one, and a session of many short runs spent a share of each run parsing what it had just written.
        """
        data = record.to_json()
        line = _serialised(data, "run record")
        try:
            check_run(data)
        except RecordError as error:
            raise ValueError(f"invalid run record: {error}") from None

        fd = self._writable_fd()
        if os.fstat(fd).st_size != self._size:
            # Only our own interrupted write (e.g. Ctrl-C between write and
            # bookkeeping) gets here, as there is a single writer: trust disk.
            self._resync_from_disk()
            fd = self._writable_fd()
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            self._unsynced = True
            if time.monotonic() - self._synced_at >= SYNC_EVERY_S:
                self._sync(fd)
        except BaseException:
            # Do not leave a fragment that the next append would extend into
            # a corrupt line; if this fails too, load() still ignores it.
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                pass
            raise
        self._size += len(line)
        self.runs.append(record)

    def set_status(self, status: str) -> None:
        """Record "running", "interrupted" or "complete" in the header (atomic rewrite), with the
        load average then (so a complete file has the load at the end of its session)."""
        if status not in FILE_STATUSES:
            raise ValueError(f"status must be one of {', '.join(FILE_STATUSES)}, got {status!r}")
        self.close()
        data, parsed = _read(self.path)  # disk is the truth, see append_run
        header = dict(parsed.header, status=status, status_updated=_now(), status_load_average=load_averages())
        line = _json_line(header)
        _atomic_write(self.path, line + data[parsed.header_size:parsed.good_size])
        self.header = json.loads(line)
        self.runs = parsed.runs
        self._size = len(line) + parsed.good_size - parsed.header_size
        self.ignored_tail_bytes = 0

    def _sync(self, fd: int) -> None:
        os.fsync(fd)
        self._unsynced = False
        self._synced_at = time.monotonic()

    def close(self) -> None:
        if self._fd is not None:
            try:
                if getattr(self, "_unsynced", False):
                    self._sync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "ResultFile":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    def _writable_fd(self) -> int:
        if self._fd is None:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                size = os.fstat(fd).st_size
                if size == self._size + self.ignored_tail_bytes and self.ignored_tail_bytes:
                    # The unfinished append seen by load(): cut it so that our
                    # line starts on a fresh line.
                    os.ftruncate(fd, self._size)
                    self.ignored_tail_bytes = 0
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def _resync_from_disk(self) -> None:
        self.close()
        _, parsed = _read(self.path)
        self.header, self.runs = parsed.header, parsed.runs
        self._size, self.ignored_tail_bytes = parsed.good_size, parsed.tail_size


def create(path: PathLike, header: Mapping[str, Any], *, overwrite: bool = False) -> ResultFile:
    """See :meth:`ResultFile.create`."""
    return ResultFile.create(path, header, overwrite=overwrite)


def load(path: PathLike) -> ResultFile:
    """See :meth:`ResultFile.load`."""
    return ResultFile.load(path)


CSV_COLUMNS = ("allocator", "params", "run", "round", "metric", "value", "status", "target")


def load_all(paths: Sequence[PathLike]) -> Tuple[List[ResultFile], List[str]]:
    """Every file that reads, and a sentence for each one that does not (so a command can
    name all the unreadable files at once, not just the first)."""
    results, problems = [], []
    for path in paths:
        try:
            results.append(load(path))
        except FileNotFoundError:
            problems.append(f"{path}: no such file")
        except IsADirectoryError:
            problems.append(f"{path} is a directory, not a result file")
        except ResultFileError as exc:
            problems.append(str(exc))
    return results, problems


def _format_params(params: Mapping[str, Any]) -> str:
    # Sorted so the same parameter point always prints the same way.
    return ";".join(f"{key}={_format_value(params[key])}" for key in sorted(params))


def _format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value) if not isinstance(value, float) else repr(value)
    return json.dumps(value, separators=(",", ":"))


def export_csv(result: Union[ResultFile, PathLike], out_path: PathLike) -> int:
    """Write one row per run per metric; returns the number of rows.

    Columns: allocator, params ("k=v;k2=v2"), run (0-based position in the
    file), round, metric, value, status, target ("scenario", or "command" for
    a real program's runs).  A run without any metric (typically
    a crash) still gets one row with empty metric and value, so failures stay
    visible in spreadsheets. `out_path` "-" writes to stdout.
    """
    if not isinstance(result, ResultFile):
        result = load(result)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    rows = 0
    for index, run in enumerate(result.runs):
        prefix = [run.allocator, _format_params(run.params), index, run.round]
        metrics = run.metrics or {"": None}
        for metric, value in metrics.items():
            writer.writerow(prefix + [metric, _format_value(value), run.status.value, run.target])
            rows += 1
    if os.fspath(out_path) == "-":
        sys.stdout.write(buffer.getvalue())
        sys.stdout.flush()
    else:
        _atomic_write(os.fspath(out_path), buffer.getvalue().encode("utf-8"))
    return rows

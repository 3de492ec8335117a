"""Session-wide rules of the suite.

A test that skips because data it needs is not in the checkout (ltrace_samples.missing_data)
makes the whole session fail: the data tests need lives in the repository, so such a skip
means a broken checkout, and a green run that skipped it would prove nothing.
"""
import pytest

from ltrace_samples import MISSING_DATA

pytest_plugins = ["pytester"]

_missing = []


def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def pytest_runtest_logreport(report):
    if report.skipped and MISSING_DATA in _reason(report):
        _missing.append(f"{report.nodeid}: {_reason(report)}")


def pytest_sessionfinish(session, exitstatus):
    if _missing and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _missing:
        terminalreporter.section("skipped for missing test data (this fails the run)", red=True)
        for line in _missing:
            terminalreporter.line(line)

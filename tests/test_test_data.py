"""The suite needs nothing beside the checkout: the data it reads is in tests/fixtures, and a
test that skips for want of data fails the session (conftest.py)."""
import lzma
import textwrap
from pathlib import Path

import ltrace_samples

ROOT = Path(__file__).resolve().parents[1]


def test_every_ltrace_sample_is_in_the_checkout_and_decompresses():
    for name in ltrace_samples.NAMES:
        path = ltrace_samples.sample(name)
        assert path.stat().st_size > 100_000, name      # the whole log, not a stub
        assert path.read_bytes() == lzma.decompress((ltrace_samples.SAMPLES_DIR / f"{name}.xz").read_bytes())
    assert "Copied unchanged from" in (ltrace_samples.SAMPLES_DIR / "README.md").read_text()


def test_no_test_reads_the_shared_folder_beside_the_checkout():
    offenders = [p.name for p in (ROOT / "tests").rglob("*.py")
                 if p.name != Path(__file__).name and '/ "shared"' in p.read_text()]
    assert offenders == []


def _inner_suite(pytester, body: str):
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.syspathinsert(Path(__file__).parent)
    pytester.makepyfile(test_inner=textwrap.dedent(body))
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")


def test_a_skip_for_missing_data_fails_the_session(pytester):
    result = _inner_suite(pytester, """
        import ltrace_samples
        def test_passes():
            pass
        def test_needs_a_log():
            ltrace_samples.missing_data("some.log is not in the checkout")
    """)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*skipped for missing test data*",
                                 "*test_needs_a_log: *missing test data: some.log is not in the checkout"])


def test_other_skips_leave_the_session_green(pytester):
    result = _inner_suite(pytester, """
        import pytest
        def test_passes():
            pass
        def test_needs_root():
            pytest.skip("mounting a tmpfs needs root")
    """)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 0

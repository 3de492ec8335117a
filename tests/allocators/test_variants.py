"""Option variants on the command line (`--allocators 'jemalloc[narenas:1]'`): parsed, translated into the
allocator's own variables, checked against the real library, and seen to take effect under a real preload."""

import json
import os
import subprocess

import pytest

from scenc.allocators import registry
from scenc.allocators.registry import AllocatorError
from scenc.allocators.variants import Option, parse_item, split_spec
from scenc.cli import main
from harness_support import fixture_builder

from locations import FIXTURES, REPO

build = fixture_builder()


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch, tmp_path):
    monkeypatch.delenv("SCENC_ALLOCATORS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("MALLOC_CONF", raising=False)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    out = tmp_path_factory.mktemp("variant-fixtures")
    return {"mallctl": build.build_program(FIXTURES / "mallctl_opt.c", out),
            "tcache_probe": build.build_tcache_probe(out),
            "whoami": build.build_whoami(out)}


def run_under(allocator, *argv):
    env = allocator.preload_env({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    done = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_the_spec_splits_at_commas_outside_brackets():
    assert split_spec("glibc, jemalloc[narenas:1,tcache:false],mimalloc") == \
        ["glibc", "jemalloc[narenas:1,tcache:false]", "mimalloc"]
    assert parse_item("jemalloc[narenas:1, tcache=false]") == \
        ("jemalloc", [Option("narenas", ":", "1"), Option("tcache", "=", "false")])
    assert parse_item("mine=/opt/lib/libmine.so") == ("mine=/opt/lib/libmine.so", None)


@pytest.mark.parametrize("spec, env", [
    ("jemalloc[narenas:1,dirty_decay_ms:0]", {"MALLOC_CONF": "narenas:1,dirty_decay_ms:0"}),
    ("mimalloc[eager_commit=0,show_stats=1]", {"MIMALLOC_EAGER_COMMIT": "0", "MIMALLOC_SHOW_STATS": "1"}),
    ("glibc[arena_max=1,tcache_count=0]", {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0"}),
    ("glibc-notc[arena_max=2]", {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=2"}),
    ("tcmalloc[release_rate=0]", {"TCMALLOC_RELEASE_RATE": "0"}),
    ("tcmalloc-full[release_rate=10]", {"TCMALLOC_RELEASE_RATE": "10"}),
    ("tbbmalloc[use_huge_pages=1]", {"TBB_MALLOC_USE_HUGE_PAGES": "1"}),
    ("jemalloc[MALLOC_CONF=narenas:2]", {"MALLOC_CONF": "narenas:2"}),
])
def test_options_go_into_the_allocators_own_variables(spec, env):
    [variant] = registry.resolve(spec)
    assert variant.name == spec.replace(" ", "")           # the name says the settings, in every report
    assert dict(variant.env) == env
    base = registry.resolve(spec.partition("[")[0])[0]
    assert (variant.library, variant.version, variant.package) == (base.library, base.version, base.package)
    assert registry.problem(variant) is None


def test_a_variant_and_its_base_side_by_side():
    names = [a.name for a in registry.resolve("jemalloc,jemalloc[narenas:1],jemalloc[narenas:2]")]
    assert names == ["jemalloc", "jemalloc[narenas:1]", "jemalloc[narenas:2]"]
    glibc = registry.resolve("glibc[tcache_count=0]")[0]
    assert glibc.uses_system_malloc and glibc.installed and glibc.library is None


def test_your_own_library_takes_variables_in_capitals(tmp_path):
    lib = build.build_fault_allocators(tmp_path)["nullalloc"]
    [mine] = registry.resolve(f"mine={lib}[NULLALLOC_AFTER=5]")
    assert mine.name == "mine[NULLALLOC_AFTER=5]" and dict(mine.env) == {"NULLALLOC_AFTER": "5"}
    with pytest.raises(AllocatorError, match="knows no option names for mine; give the environment variable"):
        registry.resolve(f"mine={lib}[after=5]")


@pytest.mark.parametrize("spec, message", [
    ("jemalloc[narena:1]", "jemalloc has no option 'narena': .*libjemalloc.so.2 does not know it"),
    ("mimalloc[eagre_commit=1]", "mimalloc has no option 'eagre_commit'"),
    ("glibc[tcache_cnt=0]", "glibc has no option 'tcache_cnt': .*ld-linux"),
    ("tcmalloc[relase_rate=1]", "tcmalloc has no option 'relase_rate'"),
    ("tbbmalloc[huge_pages=1]", "tbbmalloc has no option 'huge_pages'"),
    ("jemalloc[narenas:1", "a '\\[' without its '\\]'"),
    ("jemalloc[narenas]", "'narenas' is not option=value"),
    ("jemalloc[narenas:1,narenas:2]", "sets narenas twice"),
    ("jemalloc[]", "an empty option"),
    ("[narenas:1]", "names no allocator"),
    ("jemalloc[LD_PRELOAD=x]", "scenc sets LD_PRELOAD"),
    ("glibc[arena_max=1:2]", "GLIBC_TUNABLES cannot hold a value with ':'"),
    ("jemalloc[narenas:1],jemalloc[narenas:1]", "'jemalloc\\[narenas:1\\]' is listed twice"),
])
def test_a_bad_variant_is_refused_with_the_reason(spec, message):
    with pytest.raises(AllocatorError, match=message):
        registry.resolve(spec)


@pytest.mark.slow
def test_the_options_reach_the_allocator(programs):
    """Not only the environment: jemalloc reports the arenas it was told, glibc drops its tcache, mimalloc prints
    its statistics at exit."""
    for spec, narenas in (("jemalloc[narenas:1]", "1"), ("jemalloc[narenas:3]", "3")):
        [variant] = registry.resolve(spec)
        assert run_under(variant, programs["mallctl"], "narenas").stdout.strip() == narenas
        assert run_under(variant, programs["whoami"]).stdout.strip() == variant.library
    assert run_under(registry.resolve("glibc[tcache_count=0]")[0], programs["tcache_probe"]).stdout == "0\n"
    assert run_under(registry.resolve("glibc")[0], programs["tcache_probe"]).stdout == "1\n"
    shown = run_under(registry.resolve("mimalloc[show_stats=1]")[0], programs["whoami"])
    assert "heap stats" in shown.stderr


@pytest.mark.slow
def test_a_run_names_each_variant_with_its_settings(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["run", str(REPO / "examples" / "loop.scn"), "--param", "threads=1", "--param", "iterations=20000",
                 "--allocators", "jemalloc,jemalloc[narenas:1]", "--runs", "2", "--warmup", "0", "-q",
                 "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "jemalloc[narenas:1]" in text
    header = json.loads(out.read_text().splitlines()[0])
    assert header["allocators"]["jemalloc[narenas:1]"]["env"] == {"MALLOC_CONF": "narenas:1"}
    runs = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    assert {r["allocator"] for r in runs} == {"jemalloc", "jemalloc[narenas:1]"}
    assert all(r["status"] == "ok" for r in runs)        # the preload proof held for the variant too
    assert main(["report", str(out), "--markdown", str(tmp_path / "r.md")]) == 0
    assert "MALLOC_CONF=narenas:1" in (tmp_path / "r.md").read_text()

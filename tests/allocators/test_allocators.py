"""The allocator registry, checked against the real libraries on this machine."""

import dataclasses
import os
import pickle
import platform
import re
import shutil
import subprocess

import pytest

from scenc.allocators import config as allocator_config, registry as allocators
from scenc.commands.allocators import format_table
from scenc.allocators.registry import Allocator, AllocatorError
from harness_support import fixture_builder

build = fixture_builder()

PRELOADED = ("tcmalloc", "jemalloc", "mimalloc", "tbbmalloc", "tcmalloc-full")
DEBIAN_PACKAGES = {"tcmalloc": "libtcmalloc-minimal4", "jemalloc": "libjemalloc2",
                   "mimalloc": "libmimalloc2.0", "tbbmalloc": "libtbbmalloc2", "tcmalloc-full": "libgoogle-perftools4"}


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch, tmp_path):
    """Keep the developer's own allocator config and preloads out of the tests."""
    monkeypatch.delenv("SCENC_ALLOCATORS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("allocator-fixtures")
    return {
        "whoami": build.build_whoami(out),
        "tcache_probe": build.build_tcache_probe(out),
        "shared": build.build_fault_allocators(out)["nullalloc"],  # any real .so will do
    }


def builtin(name):
    allocator = {a.name: a for a in allocators.known()}[name]
    if not allocator.installed:
        pytest.skip(f"{name} is not installed here: {allocator.install_hint}")
    return allocator


def run_under(allocator, program):
    env = allocator.preload_env({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    done = subprocess.run([str(program)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def write_config(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- built-ins -------------------------------------------------------------


def test_glibc_builtins_use_the_system_malloc():
    glibc, notc = allocators.resolve("glibc,glibc-notc")
    assert (glibc.name, notc.name) == ("glibc", "glibc-notc")
    assert glibc.library is None and notc.library is None
    assert glibc.builtin and notc.builtin
    assert dict(glibc.env) == {}
    assert dict(notc.env) == {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    assert glibc.version == platform.libc_ver()[1] == notc.version


@pytest.mark.parametrize("name", PRELOADED)
def test_installed_preload_builtin_is_a_real_shared_library(name):
    allocator = builtin(name)
    [resolved] = allocators.resolve(name)
    assert resolved == allocator
    assert os.path.isabs(allocator.library) and os.path.isfile(allocator.library)
    assert allocators.problem(allocator) is None
    assert allocator.package == DEBIAN_PACKAGES[name]
    assert allocator.install_hint == f"apt-get install {DEBIAN_PACKAGES[name]}"


@pytest.mark.parametrize("name", PRELOADED)
def test_debian_version_is_the_package_version(name):
    allocator = builtin(name)
    if shutil.which("dpkg-query") is None:
        pytest.skip("not a Debian system")
    expected = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", allocator.package],
                              capture_output=True, text=True).stdout.strip()
    assert allocator.version and allocator.version == expected


@pytest.mark.slow
def test_glibc_notc_really_disables_the_tcache(built):
    assert run_under(builtin("glibc"), built["tcache_probe"]) == "1"
    assert run_under(builtin("glibc-notc"), built["tcache_probe"]) == "0"


def test_a_missing_builtin_says_how_to_install_it():
    missing = Allocator("tcmalloc", None, {}, None, "libtcmalloc-minimal4",
                        "apt-get install libtcmalloc-minimal4", True)
    assert not missing.installed
    assert allocators.problem(missing) == "tcmalloc is not installed: apt-get install libtcmalloc-minimal4"
    table = format_table([missing], allocators.problem)
    row = table.splitlines()[1].split()
    assert row[:2] == ["tcmalloc", "no"]
    assert "apt-get install libtcmalloc-minimal4" in table


def test_format_table_lists_all_builtins():
    table = format_table(allocators.known(), allocators.problem)
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert list(rows) == ["glibc", "glibc-notc", "tcmalloc", "jemalloc", "mimalloc", "tbbmalloc", "tcmalloc-full"]
    for allocator in allocators.known():
        row = rows[allocator.name]
        assert row.split()[1] == ("yes" if allocator.installed else "no")
        if allocator.installed:
            assert allocator.version in row
            assert (allocator.library or "system malloc") in row
        else:
            assert allocator.install_hint in row
    assert "GLIBC_TUNABLES=glibc.malloc.tcache_count=0" in rows["glibc-notc"]


# --- preload environment ---------------------------------------------------


@pytest.mark.slow
def test_preload_env_prepends_and_merges(built):
    mine = Allocator("mine", str(built["shared"]), {"MINE_OPT": "1"})
    base = {"LD_PRELOAD": "/opt/tracer.so", "PATH": "/bin"}
    env = mine.preload_env(base)
    assert env["LD_PRELOAD"] == f"{built['shared']}:/opt/tracer.so"
    assert env["MINE_OPT"] == "1" and env["PATH"] == "/bin"
    assert base == {"LD_PRELOAD": "/opt/tracer.so", "PATH": "/bin"}  # caller's dict untouched

    notc = builtin("glibc-notc")
    env = notc.preload_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert "LD_PRELOAD" not in env
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0"


def test_allocator_is_frozen_and_serialisable():
    source = {"A": "1"}
    allocator = Allocator("mine", "/x/libmine.so", source)
    source["A"] = "changed"
    assert allocator.env == {"A": "1"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        allocator.name = "other"
    assert pickle.loads(pickle.dumps(allocator)) == allocator
    assert dataclasses.asdict(allocator)["env"] == {"A": "1"}
    assert hash(allocator) == hash(Allocator("mine", "/x/libmine.so", {"B": "2"}))


# --- user allocators -------------------------------------------------------


def test_user_name_equals_path(built):
    glibc, mine = allocators.resolve(f"glibc, mine={built['shared']}")
    assert glibc.name == "glibc"
    assert mine == Allocator("mine", str(built["shared"]), {}, None, None, mine.install_hint, False)


def test_user_relative_path_and_version_from_file_name(built, tmp_path, monkeypatch):
    shutil.copy(built["shared"], tmp_path / "libmine.so.1.2.3")
    monkeypatch.chdir(tmp_path)
    [mine] = allocators.resolve("mine=libmine.so.1.2.3")
    assert mine.library == str(tmp_path / "libmine.so.1.2.3")
    assert mine.version == "1.2.3"


def test_config_file_relative_library_env_and_version(built, tmp_path):
    shutil.copy(built["shared"], tmp_path / "libmine.so")
    config = write_config(tmp_path / "conf" / "allocators.ini", """
[mine]
library = ../libmine.so
env = MINE_ARENAS=4 MINE_LOG="a b" PCT=50%
version = 9.9
""")
    [mine] = allocators.resolve("mine", config_path=config)
    assert mine.library == str(tmp_path / "libmine.so")
    assert mine.env == {"MINE_ARENAS": "4", "MINE_LOG": "a b", "PCT": "50%"}
    assert mine.version == "9.9" and not mine.builtin
    env = mine.preload_env({})
    assert env == {"LD_PRELOAD": str(tmp_path / "libmine.so"),
                   "MINE_ARENAS": "4", "MINE_LOG": "a b", "PCT": "50%"}
    assert [a.name for a in allocators.known(config)][-1] == "mine"


def test_config_from_environment_and_xdg_home(built, tmp_path, monkeypatch):
    xdg = write_config(tmp_path / "xdg-config" / "scenc" / "allocators.ini",
                       f"[fromxdg]\nlibrary = {built['shared']}\n")
    assert allocators.resolve("fromxdg")[0].library == str(built["shared"])

    env_config = write_config(tmp_path / "elsewhere.ini", f"[fromenv]\nlibrary = {built['shared']}\n")
    monkeypatch.setenv("SCENC_ALLOCATORS", str(env_config))
    assert allocator_config.default_config_paths() == [str(env_config)]
    assert allocators.resolve("fromenv")[0].name == "fromenv"
    with pytest.raises(AllocatorError, match="unknown allocator 'fromxdg'"):
        allocators.resolve("fromxdg")  # $SCENC_ALLOCATORS replaces the default file
    assert xdg.exists()


def test_explicit_config_overrides_default(built, tmp_path, monkeypatch):
    other = tmp_path / "libother.so"
    shutil.copy(built["shared"], other)
    monkeypatch.setenv("SCENC_ALLOCATORS",
                       str(write_config(tmp_path / "a.ini", f"[mine]\nlibrary = {built['shared']}\n")))
    explicit = write_config(tmp_path / "b.ini", "[mine]\nlibrary = libother.so\n")
    assert allocators.resolve("mine")[0].library == str(built["shared"])
    assert allocators.resolve("mine", config_path=explicit)[0].library == str(other)


def test_config_may_replace_a_preloaded_builtin_but_not_glibc(built, tmp_path):
    config = write_config(tmp_path / "a.ini", f"[jemalloc]\nlibrary = {built['shared']}\n")
    names = [a.name for a in allocators.known(config)]
    assert names == ["glibc", "glibc-notc", "tcmalloc", "jemalloc", "mimalloc", "tbbmalloc", "tcmalloc-full"]
    [jemalloc] = allocators.resolve("jemalloc", config)
    assert jemalloc.library == str(built["shared"]) and not jemalloc.builtin

    config = write_config(tmp_path / "b.ini", f"[glibc]\nlibrary = {built['shared']}\n")
    with pytest.raises(AllocatorError, match="'glibc' .* is the system malloc"):
        allocators.known(config)


@pytest.mark.parametrize("text, message", [
    ("[mine]\nlibary = /x.so\n", "unknown key.*libary.*allowed: library, env, version"),
    ("[mine]\nenv = A=1\n", "'library' is missing in \\[mine\\]"),
    ("[mine]\nlibrary = /x.so\nenv = NOEQUALS\n", "'NOEQUALS' is not KEY=VALUE"),
    ("[mine]\nlibrary = /x.so\nenv = LD_PRELOAD=/y.so\n", "must not set LD_PRELOAD"),
    ("[mine]\nlibrary = /x.so\nenv = A=\"open\n", "cannot be parsed"),
    ("library = /x.so\n", "not valid INI"),
    ("[bad name]\nlibrary = /x.so\n", "'bad name' .* is not allowed"),
])
def test_bad_config_files_are_explained(tmp_path, text, message):
    config = write_config(tmp_path / "allocators.ini", text)
    with pytest.raises(AllocatorError, match=message) as error:
        allocators.resolve("glibc", config_path=config)
    assert "Traceback" not in str(error.value)


def test_missing_config_file_is_an_error(tmp_path, monkeypatch):
    with pytest.raises(AllocatorError, match="nope.ini cannot be read"):
        allocators.resolve("glibc", config_path=tmp_path / "nope.ini")
    monkeypatch.setenv("SCENC_ALLOCATORS", str(tmp_path / "gone.ini"))
    with pytest.raises(AllocatorError, match="gone.ini cannot be read"):
        allocators.known()


# --- errors ----------------------------------------------------------------


def test_unknown_name_lists_known_ones():
    with pytest.raises(AllocatorError) as error:
        allocators.resolve("glibc,nosuch")
    message = str(error.value)
    assert "unknown allocator 'nosuch'" in message
    assert "glibc, glibc-notc, tcmalloc, jemalloc, mimalloc" in message
    assert "its path (./libmine.so), or NAME=PATH to name it" in message
    assert "did you mean" not in message          # nothing is close to nosuch


def test_missing_library_file(tmp_path):
    with pytest.raises(AllocatorError, match=re.escape(f"mine: library {tmp_path}/libmine.so does not exist")):
        allocators.resolve(f"mine={tmp_path}/libmine.so")


def test_missing_library_from_config_points_at_the_config(tmp_path):
    config = write_config(tmp_path / "allocators.ini", "[mine]\nlibrary = gone.so\n")
    [mine] = [a for a in allocators.known(config) if a.name == "mine"]
    assert not mine.installed
    with pytest.raises(AllocatorError, match=re.escape(f"does not exist (fix 'library' in [mine] of {config})")):
        allocators.resolve("mine", config)


def test_not_an_elf_file(tmp_path):
    text = tmp_path / "libtext.so"
    text.write_text("not a library\n")
    with pytest.raises(AllocatorError, match="libtext.so is not an ELF file"):
        allocators.resolve(f"mine={text}")


def test_executable_is_not_a_shared_library(built):
    with pytest.raises(AllocatorError, match="whoami_malloc is an executable"):
        allocators.resolve(f"mine={built['whoami']}")


def test_object_file_is_not_a_shared_library(tmp_path):
    source = tmp_path / "obj.c"
    source.write_text("int answer(void) { return 42; }\n")
    subprocess.run([build.compiler(), "-c", "-fPIC", "-o", str(tmp_path / "obj.o"), str(source)], check=True)
    with pytest.raises(AllocatorError, match="obj.o is an object file"):
        allocators.resolve(f"mine={tmp_path / 'obj.o'}")


def test_library_for_another_architecture():
    foreign = [p for p in ("/lib32/libc.so.6", "/usr/lib32/libc.so.6", "/lib/i386-linux-gnu/libc.so.6")
               if os.path.isfile(p)]
    if platform.machine() != "x86_64" or not foreign:
        pytest.skip("needs a 32-bit libc on an x86-64 machine")
    with pytest.raises(AllocatorError, match="is built for i386 \\(32-bit\\) but programs here are x86-64"):
        allocators.resolve(f"mine={foreign[0]}")


@pytest.mark.parametrize("spec, message", [
    ("glibc,glibc", "'glibc' is listed twice"),
    ("mine={lib},mine={lib}", "'mine' is listed twice"),
    ("", "no allocators given"),
    ("glibc,,jemalloc", "empty allocator name"),
    ("mine=", "names no library"),
    ("glibc=/usr/lib/libc.so", "system malloc and cannot be given a library"),
    ("bad/name={lib}", "is not allowed"),
    ("mine=/tmp/with:colon.so", "contains a space or ':'"),
])
def test_bad_specs(built, spec, message):
    with pytest.raises(AllocatorError, match=message):
        allocators.resolve(spec.format(lib=built["shared"]))


# --- preload proof ---------------------------------------------------------


@pytest.mark.parametrize("name", allocators.BUILTIN_NAMES)
def test_provider_matches_under_real_preload(built, name):
    allocator = builtin(name)
    provider = run_under(allocator, built["whoami"])
    assert allocators.provider_matches(allocator, provider), allocators.explain_mismatch(allocator, provider)
    if allocator.library is None:
        assert os.path.basename(provider).startswith("libc.so")
    else:
        assert not os.path.basename(provider).startswith("libc.so")


@pytest.mark.parametrize("name", PRELOADED)
def test_glibc_run_labelled_as_preloaded_allocator_is_caught(built, name):
    allocator = builtin(name)
    provider = run_under(builtin("glibc"), built["whoami"])
    assert not allocators.provider_matches(allocator, provider)
    message = allocators.explain_mismatch(allocator, provider)
    assert f"'{name}'" in message and provider in message and allocator.library in message


@pytest.mark.parametrize("name", PRELOADED)
def test_preloaded_run_labelled_glibc_is_caught(built, name):
    provider = run_under(builtin(name), built["whoami"])
    glibc = builtin("glibc")
    assert not allocators.provider_matches(glibc, provider)
    assert "LD_PRELOAD" in allocators.explain_mismatch(glibc, provider)


def test_preload_that_ld_so_ignores_is_caught(built):
    # ld.so refuses to preload an executable and only says so on stderr: the run
    # silently measures glibc, which is exactly what the proof exists to catch.
    bogus = Allocator("bogus", str(built["whoami"]))
    provider = run_under(bogus, built["whoami"])
    assert os.path.basename(provider).startswith("libc.so")
    assert not allocators.provider_matches(bogus, provider)


def test_provider_comparison_follows_symlinks_but_not_copies(tmp_path):
    allocator = builtin("jemalloc")
    real = os.path.realpath(allocator.library)
    link = tmp_path / "libjemalloc-link.so"
    link.symlink_to(real)
    assert allocators.provider_matches(Allocator("j", real), allocator.library)
    assert allocators.provider_matches(allocator, str(link))
    copy = tmp_path / "libjemalloc-copy.so"
    shutil.copy(real, copy)
    assert not allocators.provider_matches(allocator, str(copy))
    assert not allocators.provider_matches(allocator, "")
    assert not allocators.provider_matches(builtin("glibc"), "/usr/lib/libcrypt.so.1")


# --- the built-ins scripts/setup.sh installs ---------------------------------


def test_setup_installs_every_preloaded_builtin():
    from locations import REPO
    packages = re.search(r'^APT_PACKAGES="([^"]*)"', (REPO / "scripts" / "setup.sh").read_text(), re.M).group(1)
    assert {a.package for a in allocators.known() if a.library or a.package} <= set(packages.split())


def test_scenc_allocators_lists_tbbmalloc_and_tcmalloc_full_installed(capsys):
    from scenc.cli import main
    assert main(["allocators"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    for name, library in (("tbbmalloc", "libtbbmalloc_proxy.so.2"), ("tcmalloc-full", "libtcmalloc.so.4")):
        assert rows[name][1] == "yes", rows[name]
        assert os.path.basename(rows[name][3]) == library

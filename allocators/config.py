"""Allocator config files (INI, one section per allocator): reading them, and where they are.

The format is described in docs/running.md ("Your own library"). `load` gives the sections as plain
entries; the registry turns them into allocators. Every mistake is a
`ConfigError` whose message is a sentence for the user.
"""

import configparser
import os
import re
import shlex
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional


class ConfigError(Exception):
    """A config file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Entry:
    name: str
    library: str                 # absolute
    env: Mapping[str, str]
    version: Optional[str]
    where: str                   # "in [name] of path", for messages


def parse_env(text: str, where: str) -> Dict[str, str]:
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"env {where} cannot be parsed: {e}") from None
    env = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ConfigError(f"env {where}: {word!r} is not KEY=VALUE")
        if key == "LD_PRELOAD":
            raise ConfigError(f"env {where} must not set LD_PRELOAD; use 'library' instead")
        env[key] = value
    return env


_CONFIG_KEYS = {"library", "env", "version"}


def load(path: str, check_name: Callable[[str, str], None]) -> Dict[str, Entry]:
    """The sections of one config file; `check_name(name, where)` raises for a name the registry refuses."""
    # '%' is normal in env values; ';' and '#' after a value start a comment, as users expect.
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";", "#"))
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except OSError as e:
        raise ConfigError(f"allocator config {path} cannot be read ({e.strerror})") from None
    except configparser.Error as e:
        raise ConfigError(f"allocator config {path} is not valid INI: {e}") from None
    base = os.path.dirname(os.path.abspath(path))
    entries = {}
    for name in parser.sections():
        where = f"in [{name}] of {path}"
        check_name(name, where)
        section = parser[name]
        unknown = set(section) - _CONFIG_KEYS
        if unknown:
            raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))} {where}; "
                                 f"allowed: library, env, version")
        library = section.get("library", "").strip()
        if not library:
            raise ConfigError(f"'library' is missing {where}")
        library = os.path.normpath(os.path.join(base, os.path.expanduser(library)))
        env = parse_env(section.get("env", ""), where)
        version = section.get("version", "").strip() or None
        entries[name] = Entry(name, library, env, version, where)
    return entries


def default_config_paths() -> List[str]:
    """The config files read when no explicit path is given (only existing ones)."""
    explicit = os.environ.get("SCENC_ALLOCATORS")
    if explicit:
        return [explicit]  # the user asked for it: a missing file is an error later
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    path = os.path.join(config_home, "scenc", "allocators.ini")
    return [path] if os.path.isfile(path) else []

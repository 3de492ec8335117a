#!/bin/sh
# Sets up everything scenc needs on a Debian machine, idempotently:
# the C compilers, ltrace and the allocators from Debian, and a Python venv
# (.venv in the checkout) with scenc installed in it. Quick when already done.
set -eu
cd "$(dirname "$0")/.."

APT_PACKAGES="gcc clang libc6-dev make ltrace libtcmalloc-minimal4 libjemalloc2 libmimalloc2.0 libtbbmalloc2 libgoogle-perftools4 python3 python3-venv python3-pip"

missing=""
for p in $APT_PACKAGES; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# A python3 that is not Debian's (pyenv, say) brings its own venv module.
if [ -n "$missing" ] && command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing=$(echo "$missing" | tr ' ' '\n' | grep -v -x -e python3 -e python3-venv -e python3-pip | tr '\n' ' ')
fi
if [ -n "$(echo "$missing" | tr -d ' ')" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.scenc-installed
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing scenc and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # setuptools warns at length about editable installs in general (packages shadowed by
  # folders of the same name); it is not about this checkout, so it is silenced. Errors,
  # and any other warning, still show.
  PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
echo "setup: ready (.venv/bin/scenc)"

# The interpreter the set-up, the tests and the demo run on; sourced by setup.sh, run.sh and
# demo.sh, from the checkout's root. $PYTHON when given. Else python3 when it installs into its
# own site-packages (it has pip, and is not a distribution's externally managed interpreter).
# Else a venv of this checkout's own (.venv), which setup.sh makes from the system's python3:
# Debian 12's python3 comes without pip and refuses system-wide installs (PEP 668). The venv's
# bin goes first on PATH: the tests and the demo start the console scripts by name.
if [ -z "${PYTHON:-}" ]; then
  if python3 -c 'import os, sys, sysconfig, pip
managed = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(os.path.exists(managed))' 2>/dev/null; then
    PYTHON=python3
  else
    PYTHON=$PWD/.venv/bin/python
    export PATH="$PWD/.venv/bin:$PATH"
  fi
fi

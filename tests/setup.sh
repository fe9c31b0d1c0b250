#!/usr/bin/env bash
# Installs what the tests and the demo need on a Debian 12 machine (run as root); idempotent.
#   - Debian packages: MariaDB + Galera 4 for the Galera lab (mariabackup and socat for SST),
#     systemd for `systemd-analyze verify` of the unit files in config/systemd, openssl for the
#     lab's CA and the Galera nodes' certificates
#   - Docker (Debian's docker.io) and debootstrap for the container tests (tests/containers): a
#     dockerd is started when none answers, and the local base image is made once
#   - prometheus (with promtool) for the shipped alert rules and dashboard (config/prometheus),
#     chromium to load the daemon's status page headless (tests/integration/test_status_page.py)
#   - python3 and python3-venv: without an interpreter that installs into its own site-packages,
#     a venv of the checkout's own, .venv (tests/python.sh says which interpreter runs)
#   - the project with its test extras
# MySQL for the Group Replication lab is fetched on first use by tests/lab/mysql_dist.py and
# cached under ~/.cache/proxysql-checkers-lab.
set -euo pipefail
cd "$(dirname "$0")/.."

# with their recommended packages, as the lab was proven: the SST scripts look for ss (iproute2)
# or lsof to watch ports, and use pv
# docker.io and debootstrap: the image and the containerized Galera cluster (their faults are
# iptables rules and a relay on 127.0.0.1, see tests/containers)
debs=(mariadb-server galera-4 mariadb-backup mariadb-client socat iproute2 patchelf xz-utils systemd
      openssl docker.io debootstrap python3 python3-venv)
# without their recommended packages (a node exporter, desktop services): the tests need the
# binaries alone
lean_debs=(prometheus chromium)
missing() {
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
  done
}
mapfile -t missing < <(missing "${debs[@]}")
mapfile -t missing_lean < <(missing "${lean_debs[@]}")
if [ "${#missing[@]}" -gt 0 ] || [ "${#missing_lean[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]} ${missing_lean[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  [ "${#missing[@]}" -eq 0 ] || apt-get install -y -qq "${missing[@]}" >/dev/null
  [ "${#missing_lean[@]}" -eq 0 ] \
    || apt-get install -y -qq --no-install-recommends "${missing_lean[@]}" >/dev/null
fi

source tests/python.sh
if [ ! -x "$PYTHON" ] && [ "$PYTHON" = "$PWD/.venv/bin/python" ]; then
  echo "setup: making a venv for the checkout (.venv)"
  python3 -m venv .venv
fi
if ! "$PYTHON" -c 'import checker_core, pytest, hypothesis, mysql_mimic, prometheus_client, yaml' 2>/dev/null \
   || [ pyproject.toml -nt "$(dirname "$0")/.setup-done" ]; then
  echo "setup: installing the project and its test dependencies"
  "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'
  touch "$(dirname "$0")/.setup-done"
fi

# No image registry is reachable: the base image is made here from the Debian mirror apt uses.
# A machine where this cannot work (no engine can start) still runs every other test; the
# docker tests skip there, and fail in CI.
if ! "$PYTHON" -m tests.lab docker up; then
  echo "setup: no Docker engine; the tests marked docker will not run" >&2
fi

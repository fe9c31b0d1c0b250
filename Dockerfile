# proxysql-checkers as a container: one image for both checkers.
#
#   DOCKER_BUILDKIT=1 docker build -t proxysql-checkers:latest .
#   docker run -d --name galera-checker \
#       -v /srv/checker/galera.toml:/etc/proxysql-checkers/checker.toml:ro \
#       -v /srv/checker/secrets:/run/secrets/proxysql-checkers:ro \
#       -p 127.0.0.1:9140:9140 proxysql-checkers:latest
#
# The default command is `galera-checker daemon`. For MySQL Group Replication replace the
# entrypoint and keep the command:
#
#   docker run ... --entrypoint gr-checker proxysql-checkers:latest daemon
#
# Any subcommand works the same way, e.g. `docker run --rm ... proxysql-checkers check-config`.
# The configuration file is read from $CHECKER_CONFIG (mount it there); every setting can also
# be given as CHECKER_<SECTION>_<KEY> (e.g. -e CHECKER_RUN_LOG_LEVEL=debug).
#
# On a base of your own (a registry of your own, a hardened base, or none at all): any Debian
# bookworm or later image. Without Python 3.11+ in it, Debian's python3 is installed from its apt
# sources. The build stage fetches the Python dependencies from the package index; behind a
# TLS-intercepting proxy pass its CA as a build secret, which never becomes a layer:
#
#   DOCKER_BUILDKIT=1 docker build --build-arg BASE_IMAGE=debian-local:bookworm \
#       --secret id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt -t proxysql-checkers:latest .
#
# (docs/daemon.md shows how to make such a base from a Debian mirror with debootstrap.)

ARG BASE_IMAGE=python:3.11.11-slim-bookworm

# ---------------------------------------------------------------------------------------------
# python: the base with a Python 3.11+ that can make virtualenvs. The official image has one in
# /usr/local and skips the install; a plain Debian gets python3 and its venv module from apt.
FROM ${BASE_IMAGE} AS python

SHELL ["/bin/sh", "-eu", "-c"]
# Unpinned: the versions are whatever the base's Debian release ships, security updates included.
# hadolint ignore=DL3008
RUN if ! python3 -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' \
        2>/dev/null; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -c 'import sys; assert sys.version_info >= (3, 11), sys.version'

# ---------------------------------------------------------------------------------------------
# build: turn the checkout into wheels (the package and every dependency), so the final stage
# needs neither a compiler nor the network nor the sources.
FROM python AS build

WORKDIR /src
# Only what the package is built from (.dockerignore keeps the rest of the checkout out).
COPY pyproject.toml setup.py README.md ./
COPY checker_core/ checker_core/
COPY galera_checker/ galera_checker/
COPY gr_checker/ gr_checker/
# pip_ca (optional): a CA bundle for a TLS-intercepting proxy between the build and the index.
RUN --mount=type=secret,id=pip_ca \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi; \
    python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------------
# final: the installed package in a virtualenv on the same base, run as an unprivileged user.
FROM python

LABEL org.opencontainers.image.title="proxysql-checkers" \
      org.opencontainers.image.description="Keeps ProxySQL hostgroups right for Galera clusters (galera-checker) and MySQL Group Replication (gr-checker)" \
      org.opencontainers.image.licenses="GPL-3.0-or-later"

# The wheels are bind-mounted from the build stage for this one step and so never become a
# layer of the image; --no-index: nothing is fetched here, every dependency is a built wheel.
# No test extras. The virtualenv keeps the package apart from the base's own Python packages
# (Debian's python3 refuses a system-wide pip install); its two commands are linked into
# /usr/local/bin, which is on PATH in every Debian image. The fixed uid/gid 10001 lets
# Kubernetes check runAsNonRoot and lets an operator chown a host directory for the state volume.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python3 -m venv /opt/proxysql-checkers \
    && /opt/proxysql-checkers/bin/pip install --no-cache-dir --disable-pip-version-check \
        --no-index /wheels/*.whl \
    && ln -s /opt/proxysql-checkers/bin/galera-checker /opt/proxysql-checkers/bin/gr-checker \
        /usr/local/bin/ \
    && groupadd --system --gid 10001 proxysql-checkers \
    && useradd --system --uid 10001 --gid proxysql-checkers --no-create-home \
        --home-dir /var/lib/proxysql-checkers --shell /usr/sbin/nologin proxysql-checkers \
    && install -d -o proxysql-checkers -g proxysql-checkers -m 0750 /var/lib/proxysql-checkers \
    && install -d -m 0755 /etc/proxysql-checkers

# CHECKER_CONFIG: the documented mount path of the configuration file (a ConfigMap, a bind
#   mount); password_file keys in it point at files mounted beside it or under /run/secrets.
# CHECKER_RUN_STATE_DIR: locks, hysteresis counters and the pause switch, in the volume below.
# CHECKER_RUN_LOG_FORMAT=json, CHECKER_RUN_LOG_STREAM=stdout: one JSON object per line on
#   stdout, where container log collectors look first (`docker logs`, `kubectl logs`).
# CHECKER_RUN_METRICS_LISTEN: the daemon's /metrics, /health and /status on every address of
#   the container, the port EXPOSEd below; `healthcheck` reads the same variable.
# PYTHONUNBUFFERED: every line leaves the process at once, even when it is killed.
ENV CHECKER_CONFIG=/etc/proxysql-checkers/checker.toml \
    CHECKER_RUN_STATE_DIR=/var/lib/proxysql-checkers \
    CHECKER_RUN_LOG_FORMAT=json \
    CHECKER_RUN_LOG_STREAM=stdout \
    CHECKER_RUN_METRICS_LISTEN=0.0.0.0:9140 \
    PYTHONUNBUFFERED=1

# The state survives a container replacement when a volume is mounted here; without one the
# checker starts with fresh counters, which is safe (the roster lives in ProxySQL), but a pause
# is a file here too: without a volume it ends when the container is replaced.
VOLUME ["/var/lib/proxysql-checkers"]
EXPOSE 9140

USER 10001:10001
WORKDIR /var/lib/proxysql-checkers

# 200 from /health while every cluster had a successful pass within 3 intervals. The command
# reads only CHECKER_RUN_METRICS_LISTEN, so it is right for gr-checker too. --timeout is above
# the command's own 3 s HTTP timeout, so Docker never cuts it short.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["galera-checker", "healthcheck"]

# Exec form: the checker is PID 1 and gets SIGTERM from `docker stop` (it finishes the current
# pass and exits 0) and SIGHUP from `docker kill -s HUP` (reload) directly.
# Group Replication: --entrypoint gr-checker (Kubernetes: command: ["gr-checker"]).
ENTRYPOINT ["galera-checker"]
CMD ["daemon"]

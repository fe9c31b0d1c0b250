# syntax=docker/dockerfile:1
#
# proxysql-checkers as a container: one image for both checkers.
#
#   docker build -t proxysql-checkers:latest .
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

# ---------------------------------------------------------------------------------------------
# build: turn the checkout into wheels (the package and every dependency), so the final stage
# needs neither a compiler nor the network nor the sources.
FROM python:3.11.11-slim-bookworm AS build

WORKDIR /src
# Only what the package is built from (.dockerignore keeps the rest of the checkout out).
COPY pyproject.toml setup.py README.md ./
COPY checker_core/ checker_core/
COPY galera_checker/ galera_checker/
COPY gr_checker/ gr_checker/
RUN pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------------
# final: the installed package on the slim base, run as an unprivileged user.
FROM python:3.11.11-slim-bookworm

LABEL org.opencontainers.image.title="proxysql-checkers" \
      org.opencontainers.image.description="Keeps ProxySQL hostgroups right for Galera clusters (galera-checker) and MySQL Group Replication (gr-checker)" \
      org.opencontainers.image.licenses="GPL-3.0-or-later"

# The wheels are bind-mounted from the build stage for this one step and so never become a
# layer of the image; --no-index: nothing is fetched here, every dependency is a built wheel.
# No test extras. The fixed uid/gid 10001 lets Kubernetes check runAsNonRoot and lets an
# operator chown a host directory for the state volume.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        --no-index /wheels/*.whl \
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
# checker starts with fresh counters, which is safe (the roster lives in ProxySQL).
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

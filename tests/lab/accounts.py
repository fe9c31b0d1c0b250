"""Accounts every lab backend has. Test-only secrets for servers bound to 127.0.0.1."""

from __future__ import annotations

# the account the checkers probe backends with
MONITOR_USER = "monitor"
MONITOR_PASSWORD = "monitor-pw"
# an application account, for traffic through ProxySQL
APP_USER = "app"
APP_PASSWORD = "app-pw"
APP_SCHEMA = "labdb"
# ProxySQL admin credentials the lab's endpoint (real or emulated) is started with
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-pw"
# the account for actions on the nodes (Galera eviction, GR switchover): [node_admin]
NODE_ADMIN_USER = "nodeadmin"
NODE_ADMIN_PASSWORD = "nodeadmin-pw"

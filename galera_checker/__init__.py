"""Keep ProxySQL's hostgroups right for a Galera / Percona XtraDB Cluster."""

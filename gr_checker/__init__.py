"""Keep ProxySQL's hostgroups right for a MySQL Group Replication group."""

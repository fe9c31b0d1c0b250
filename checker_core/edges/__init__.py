"""The edges: everything that talks to ProxySQL, the nodes, the disk or the log stream."""

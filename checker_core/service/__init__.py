"""The daemon's service side: its loop, /metrics, /health, /status, systemd notification."""

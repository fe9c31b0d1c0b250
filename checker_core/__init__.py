"""What galera-checker and gr-checker share."""

__version__ = "0.1.0"

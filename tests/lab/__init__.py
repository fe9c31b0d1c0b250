"""Real clusters on loopback for the integration tests and for humans.

`python -m tests.lab galera|gr|proxysql ...` drives them by hand; the pytest fixtures live next to
each lab and are registered in tests/integration/conftest.py.
"""

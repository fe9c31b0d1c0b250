"""A node's address keys most of a pass's maps; its hash is made once and kept: an address whose
hash was taken, a fresh one and one made by replace are the same key when they name the same
host and port, and different keys when they do not."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from checker_core.core.model import NodeAddress

HOSTS = st.sampled_from(["127.0.0.1", "127.0.0.2", "db1.example", "::1", ""])
PORTS = st.integers(min_value=0, max_value=65535)


@given(host=HOSTS, port=PORTS, other_port=PORTS)
def test_an_address_is_one_key_however_it_was_made(host: str, port: int, other_port: int) -> None:
    used = NodeAddress(host, port)
    table = {used: "seen"}  # its hash taken and kept
    assert table[NodeAddress(host, port)] == "seen"
    assert NodeAddress(host, port) == used and repr(used) == repr(NodeAddress(host, port))
    moved = replace(used, port=other_port)
    assert (moved in table) is (other_port == port)
    assert hash(moved) == hash(NodeAddress(host, other_port))

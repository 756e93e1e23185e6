"""Lab files the tests write, one copy each."""

from __future__ import annotations


def chain3(name: str, *, ipv6: bool = True) -> str:
    """client - r1 - server: the smallest lab with a router in the path."""
    addressing = "" if ipv6 else "[addressing]\nipv6 = false\n"
    return (f'\nname = "{name}"\n{addressing}[nodes.client]\n[nodes.r1]\n[nodes.server]\n'
            '[[links]]\nbetween = ["client", "r1"]\n[[links]]\nbetween = ["r1", "server"]\n')

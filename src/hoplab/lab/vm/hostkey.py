"""A firmware image's SSH host key, learnt at its first banner when the lab file does not
give it (`host_key`). Trust on first use is sound here as it is not on a network: the
port is on this machine's loopback, forwarded by the QEMU hoplab has just started, to
the guest's management NIC on a network only that QEMU has. The key is kept in the
lab's known_hosts, so every later connection of the lab is checked against it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hoplab.errors import LabError


def learn(node: str, port: int, known_hosts: Path, timeout: float = 20.0) -> str:
    """The server's host key at 127.0.0.1:port, appended to `known_hosts`."""
    import asyncssh

    async def ask() -> asyncssh.SSHKey | None:
        return await asyncio.wait_for(
            asyncssh.get_server_host_key("127.0.0.1", port, config=None), timeout)

    try:
        key = asyncio.run(ask())
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise LabError(f"VM {node}: its SSH server gave no host key: {exc}") from exc
    if key is None:
        raise LabError(f"VM {node}: its SSH server gave no host key")
    line = key.export_public_key("openssh").decode().split()
    entry = f"[127.0.0.1]:{port} {line[0]} {line[1]}\n"
    with known_hosts.open("a") as f:
        f.write(entry)
    return entry.strip()

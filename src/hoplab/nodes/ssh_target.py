"""Where an SSH node is and how to reach it, checked before anything connects.

A lab file's `ssh` and `ssh_options` become one SshTarget. Every value is checked
here so that a node name, a destination or an option can never become a shell
command or an ssh option on either side: the client is asyncssh (no local shell, no
argv), and the values below are refused when they could be read as anything but
what they are (a leading "-", whitespace, control or shell characters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoplab.errors import UsageError
from hoplab.nodes import ssh_address as address

# Node names as lab files give them; a device's name also appears in messages.
_NODE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


class SshTargetError(UsageError):
    """A destination or option that cannot be used as given."""


@dataclass(frozen=True)
class SshTarget:
    node: str                       # the lab node's name (for messages and ProcessIds)
    destination: str                # "user@host", "host" or a Host alias from ~/.ssh/config
    port: int | None = None
    identity: str | None = None     # a private key file; else ssh config's, or the agent
    jump: str | None = None         # "user@host[:port]" of a bastion
    known_hosts: str | None = None  # else ~/.ssh/known_hosts
    accept_new_host_keys: bool = False
    connect_timeout: float = 10.0
    command_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not _NODE.fullmatch(self.node):
            raise SshTargetError(f"invalid node name {self.node!r}")
        split_destination(self.destination, what=f"node {self.node}: ssh")
        if self.jump is not None:
            try:
                address.split_jump(self.jump)
            except ValueError as e:
                raise SshTargetError(f"node {self.node}: ssh_options.jump: {e}") from None
        if self.port is not None:
            _port(self.port, self.node)
        for key, path in (("identity", self.identity), ("known_hosts", self.known_hosts)):
            if path is not None and (not path or path.startswith("-") or "\n" in path
                                     or "\0" in path):
                raise SshTargetError(f"node {self.node}: ssh_options.{key}: invalid path "
                                     f"{path!r}")
        if not 0 < self.connect_timeout <= 600 or not 0 < self.command_timeout <= 86400:
            raise SshTargetError(f"node {self.node}: timeouts must be positive")

    @classmethod
    def of(cls, node: str, spec: Any, *, accept_new_host_keys: bool = False) -> SshTarget:
        """From a lab file's checked `ssh`/`ssh_options` (hoplab.spec.model.SshTarget, or
        a mapping of the same keys as a lab's state file keeps them)."""
        def get(key: str) -> Any:
            return spec.get(key) if isinstance(spec, Mapping) else getattr(spec, key, None)
        return cls(node=node, destination=str(get("destination")), port=get("port"),
                   identity=get("identity"), jump=get("jump"), known_hosts=get("known_hosts"),
                   accept_new_host_keys=accept_new_host_keys)

    @property
    def user(self) -> str | None:
        return split_destination(self.destination)[0]

    @property
    def host(self) -> str:
        return split_destination(self.destination)[1]

    def identity_path(self) -> Path | None:
        return Path(self.identity).expanduser() if self.identity else None

    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts or "~/.ssh/known_hosts").expanduser()


def _port(port: int, node: str) -> None:
    try:
        address.port(port)
    except ValueError as e:
        raise SshTargetError(f"node {node}: ssh_options.port: {e}") from None


def split_destination(dest: str, what: str = "ssh") -> tuple[str | None, str]:
    """("user" or None, "host") of "user@host" or "host"; refuses anything else (the
    lab loader's own check, hoplab.nodes.ssh_address)."""
    try:
        return address.split_destination(dest)
    except ValueError as e:
        raise SshTargetError(f"{what}: {e}") from None

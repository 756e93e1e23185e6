"""Which IP families a lab's links and nodes carry, known from the lab file alone.

The planner (hoplab.lab.plan) addresses a link in the families carries() gives it,
and the experiment loader refuses a flow with `family = 6` from or to a node that
has_family() says will have no IPv6 address: one rule for both, before lab up.
"""

from __future__ import annotations

from hoplab.spec.model import Lab, Link


def carries(lab: Lab, link: Link, version: int) -> bool | None:
    """Whether `link` has addresses of IP `version`: a link between namespaces IPv4, and
    IPv6 in a lab with ipv6 = true or where its subnet or addresses say so; a cable the
    families its ends' addresses have. None for a cable between two devices whose
    address is the one SSH reaches them at, read at lab up (devices.resolve)."""
    if getattr(link, f"addr_a{version}") is not None \
            or getattr(link, f"addr_b{version}") is not None:
        return True
    if not link.is_cable:
        return version == 4 or lab.addressing.ipv6 or link.subnet6 is not None
    if any(e.address is not None and e.address.version == version
           for e in link.device_ends):
        return True
    # A namespace end's addresses are in the file; only devices' may be left to SSH.
    namespaced = len(link.device_ends) < 2
    return False if namespaced or all(e.address is not None for e in link.device_ends) \
        else None


def has_family(lab: Lab, node: str, version: int) -> bool | None:
    """Whether `node` will have an address of IP `version` (a link of it carries that
    family), known before lab up; None when that waits on a device's address."""
    found = [carries(lab, lk, version) for lk in lab.links if node in (lk.a, lk.b)]
    return True if any(found) else None if None in found else False

"""A firmware image's VM configured as a device is: over SSH, by commands its BusyBox
knows. OpenWrt has no `ip -batch` (BusyBox's ip, or ip-tiny), may have no tc or ethtool,
and names its NICs itself: each lab NIC is found by the MAC hoplab gave it and renamed
to the plan's name. Pure: each function gives script steps (vm/script.py)."""

from __future__ import annotations

from collections.abc import Sequence

from hoplab.lab.vm.script import Step

# Finds the NIC with MAC $1 and names it $2 (down first: a NIC is renamed only down).
_RENAME = ('for d in /sys/class/net/*; do '
           '[ "$(cat "$d/address")" = "$1" ] || continue; n="${d##*/}"; '
           '[ "$n" = "$2" ] && exit 0; '
           'ip link set dev "$n" down && ip link set dev "$n" name "$2"; exit $?; '
           'done; echo "no NIC with MAC $1" >&2; exit 1')
# What BusyBox's ip does not take, and the lines need not say on a firmware: DAD is off
# by sysctl, and a route's protocol is only a label.
_NOT_BUSYBOX = (" nodad", " proto static")


def rename(nics: Sequence[tuple[str, str]]) -> list[Step]:
    """Each (MAC, name): through a temporary name first, so two NICs the firmware named
    the other way round (eth2 for the plan's eth1) can swap."""
    temp = [(mac, f"hoplab{i}") for i, (mac, _) in enumerate(nics)]
    return [Step(f"naming the NIC {mac} {name}", ["sh", "-c", _RENAME, "rename", mac, name])
            for mac, name in [*temp, *nics]]


# What each tool must be: its answer to -V names iproute2 (BusyBox's tc applet cannot
# set a qdisc; its ip does all the lines ask), and what to install where it is not.
_IPROUTE2 = {"tc": "OpenWrt: opkg install tc-full, or tc-tiny"}


def need(tool: str, why: str) -> Step:
    """A step that fails, saying so, where the firmware has no `tool` that can do it."""
    if tool in _IPROUTE2:
        check = ('"$1" -V 2>&1 | grep -q iproute2 || { echo "the firmware has no '
                 'iproute2 $1 (BusyBox\'s applet cannot set a qdisc; $2)" >&2; exit 127; }')
        return Step(f"{why} needs {tool}", ["sh", "-c", check, "need", tool, _IPROUTE2[tool]])
    return Step(f"{why} needs {tool}",
                ["sh", "-c", 'command -v "$1" >/dev/null || { echo "the firmware has no '
                             '$1" >&2; exit 127; }', "need", tool])


def lines(tool: str, batch: Sequence[str], what: str) -> list[Step]:
    """A batch's lines as one command each (no -batch on BusyBox)."""
    out = []
    for line in batch:
        for word in _NOT_BUSYBOX:
            line = line.replace(word, "")
        out.append(Step(f"{what}: {tool} {line}", [tool, *line.split()]))
    return out


def accept_dad_off(names: Sequence[str]) -> Step:
    """No duplicate address detection on the lab NICs (they existed before the lab's
    `default` sysctl, so it does not reach them): their IPv6 addresses at once."""
    return Step("sysctls of the lab NICs", ["sysctl", "-qw", *(
        f"net.ipv6.conf.{n}.accept_dad=0" for n in names)])


RELEASE = Step("its kernel's release", ["uname", "-r"])

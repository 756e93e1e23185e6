"""The kinds hoplab ships, registered in the order they are listed (in errors and docs).
A new built-in kind is its module, imported here and placed in BUILTIN."""

from __future__ import annotations

from hoplab import kind_registry
from hoplab.kinds.custom import KIND as CUSTOM
from hoplab.kinds.ping import KIND as PING
from hoplab.kinds.probe import KIND as PROBE
from hoplab.kinds.responsiveness import KIND as RESPONSIVENESS
from hoplab.kinds.rrul import KIND as RRUL
from hoplab.kinds.tcp import KIND as TCP
from hoplab.kinds.throughput import KIND as THROUGHPUT
from hoplab.kinds.udp import KIND as UDP
from hoplab.kinds.web import KIND as WEB

BUILTIN = tuple(k.name for k in (TCP, UDP, PING, PROBE, RRUL, CUSTOM, WEB, THROUGHPUT,
                                  RESPONSIVENESS))

kind_registry.builtin_registered(BUILTIN)

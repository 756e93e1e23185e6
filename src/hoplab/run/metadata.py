"""What a run records about the machine it ran from: host, kernel, tools.

Collected once per experiment; what each node's settings are is read once per lab
build, by the lab (hoplab.lab.ready).
"""

from __future__ import annotations

import platform
import socket
from pathlib import Path
from typing import Any

from hoplab import __version__
from hoplab.lab.caps import Capabilities


def host_metadata(caps: Capabilities) -> dict[str, Any]:
    uname = platform.uname()
    cpus = (Path("/proc/cpuinfo").read_text(errors="replace")
            if Path("/proc/cpuinfo").exists() else "")
    model = next((line.split(":", 1)[1].strip() for line in cpus.splitlines()
                  if line.startswith("model name")), uname.machine)
    return {
        "hoplab_version": __version__,
        "host": socket.gethostname(),
        "kernel": uname.release,
        "kernel_build": uname.version,
        "machine": uname.machine,
        "cpu_model": model,
        "cpus": cpus.count("processor\t:"),
        "python": platform.python_version(),
        "tools": {k: v for k, v in caps.tools.items()
                  if k in ("iperf3", "irtt", "ping", "fping", "tc", "ip", "wireguard-go",
                           "perf", "nft", "nginx", "chromium")},
    }

"""Virtual machines as lab nodes: QEMU booting a chosen kernel (docs/vm.md).

kernel.py fetches and unpacks a kernel into the cache, initramfs.py makes the small
initramfs that mounts this machine's root read-only with a writable overlay in memory,
qemu.py boots one VM (its NICs are taps at its links' places, its control path a user
network forward to its SSH server) and guest.py configures a booted one over SSH.
"""

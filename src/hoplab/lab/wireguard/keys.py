"""WireGuard keys: Curve25519 pairs in the hex form of the UAPI and the base64 form of ``wg``."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KeyPair:
    """A Curve25519 key pair, both halves as 64 lowercase hex digits (UAPI form)."""

    # repr=False: a key pair must not leak its secret into logs or tracebacks.
    private_hex: str = field(repr=False)
    public_hex: str

    def public_b64(self) -> str:
        """The public key as ``wg`` and configuration files show it."""
        return hex_to_b64(self.public_hex)

    def private_b64(self) -> str:
        """The private key in ``wg`` form (for ``wg set ... private-key FILE``)."""
        return hex_to_b64(self.private_hex)


def generate_keypair() -> KeyPair:
    """A fresh X25519 key pair."""
    # Imported here: the OpenSSL bindings are only needed when making keys.
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    private = X25519PrivateKey.generate()
    return KeyPair(
        private_hex=private.private_bytes_raw().hex(),
        public_hex=private.public_key().public_bytes_raw().hex(),
    )


def hex_to_b64(key_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(key_hex)).decode("ascii")


def b64_to_hex(key_b64: str) -> str:
    return base64.b64decode(key_b64, validate=True).hex()

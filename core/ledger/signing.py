"""Each node's own signing key (Ed25519), so what it reports about itself cannot be altered or forged by a peer.

The cluster key is shared by every peer: anything sealed with it could have been written by any of
them. A ledger summary says what one node gave and received, so it is signed with a key only that
node holds (data_dir/node.key, mode 0600); peers pin the public key they first saw for a node id
(trust on first use) and refuse a summary signed with another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from frost_core.api.errors import AuthenticationError, ConfigError
from frost_core.wire.security import publish_secret

PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64


@dataclass(frozen=True)
class NodeKey:
    """The private half; `public` is what peers pin."""

    private: Ed25519PrivateKey

    def __repr__(self) -> str:
        return f"NodeKey(public={self.public.hex()[:16]}…)"

    @property
    def public(self) -> bytes:
        return self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data)

    @classmethod
    def load_or_create(cls, path: Path) -> NodeKey:
        """The key at `path`, made on first use; a file others can read is refused like the cluster key."""
        if not path.exists():
            raw = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
            publish_secret(path, raw)   # (two nodes starting at once on one data dir: one key wins)
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise ConfigError(f"node key file {path} has mode {mode:o}; it must be readable by its owner only"
                              f" (chmod 600 {path})", title="Unsafe key file")
        raw = path.read_bytes()
        if len(raw) != 32:
            raise ConfigError(f"{path} is corrupt: expected a 32-byte Ed25519 key; remove it to get a new one "
                              "(peers that pinned the old key then refuse this node's ledger summaries)")
        return cls(Ed25519PrivateKey.from_private_bytes(raw))


def verify(public_key: bytes, signature: bytes, data: bytes) -> None:
    """Raise AuthenticationError unless `signature` is `public_key`'s signature of `data`."""
    if len(public_key) != PUBLIC_KEY_SIZE or len(signature) != SIGNATURE_SIZE:
        raise AuthenticationError("the signature or its key has the wrong size")
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError) as error:
        raise AuthenticationError("the signature does not match what was signed") from error

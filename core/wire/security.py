"""Cluster security: the shared key, join codes, sealed datagrams, the stream handshake and AEAD.

A cluster is its 32-byte secret. Every key below is derived from it with HKDF under its own
label, so a datagram MAC can never be confused with a stream key. Datagrams are MACed (they need
authenticity, not secrecy) and carry sender id, boot epoch and counter for replay rejection;
streams run a nonce handshake and then encrypt every frame with AES-OCB3 under per-direction keys
and counter nonces, so a replayed, reordered or altered frame fails to decrypt.
"""

import base64
import dataclasses
import hashlib
import hmac
import logging
import os
import secrets
import struct
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESOCB3
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from frost_core.api.errors import AuthenticationError, ConfigError, ProtocolError, StorageError, WrongClusterKey
from frost_core.wire.codec import encode
from frost_core.wire.codes import PROTOCOL_VERSION
from frost_core.wire.framing import HEADER, HEADER_SIZE
from frost_core.wire.messages import Hello, HelloAck
from frost_core.wire.pipe import write_pieces

KEY_SIZE = 32
NONCE_SIZE = 32
TAG_SIZE = 16
"""Bytes the AEAD adds to every encrypted frame body."""

_JOIN_PREFIX = "FROST"
_JOIN_CHECKSUM_SIZE = 3
_JOIN_GROUP = 8
_JOIN_LOOKALIKES = str.maketrans({"0": "O", "1": "I", "8": "B"})
_BASE32_ALPHABET = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def _derive(secret: bytes, label: bytes, *, salt: bytes | None = None, length: int = 32) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=label).derive(secret)


@dataclasses.dataclass(frozen=True, repr=False)
class ClusterKey:
    """The secret that defines a cluster: whoever holds it is a member, nobody else is."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) != KEY_SIZE:
            raise ConfigError(f"a cluster key is {KEY_SIZE} bytes, not {len(self.secret)}")

    def __repr__(self) -> str:
        return f"ClusterKey(fingerprint={self.fingerprint()})"

    @classmethod
    def generate(cls) -> "ClusterKey":
        return cls(secrets.token_bytes(KEY_SIZE))

    def fingerprint(self) -> str:
        """A short public name for the key, safe to show and log: two nodes agree iff it matches."""
        return _derive(self.secret, b"frost-tui fingerprint v1", length=6).hex()

    def to_join_code(self) -> str:
        """The key as `FROST-XXXXXXXX-...`: base32 (no 0/1/8 lookalikes) with a checksum."""
        checksum = hashlib.sha256(b"frost-tui join code" + self.secret).digest()[:_JOIN_CHECKSUM_SIZE]
        text = base64.b32encode(self.secret + checksum).decode()
        groups = [text[i : i + _JOIN_GROUP] for i in range(0, len(text), _JOIN_GROUP)]
        return "-".join([_JOIN_PREFIX, *groups])

    @classmethod
    def from_join_code(cls, code: str) -> "ClusterKey":
        """Parse a join code; a typo is reported as a ConfigError that says what is wrong."""
        text = "".join(code.split()).upper().replace("-", "").translate(_JOIN_LOOKALIKES)
        if text.startswith(_JOIN_PREFIX):
            text = text[len(_JOIN_PREFIX) :]
        for position, char in enumerate(text, start=1):
            if char not in _BASE32_ALPHABET:
                raise ConfigError(
                    f"join code has an invalid character {char!r} at position {position} "
                    "(after the FROST prefix, ignoring dashes)",
                    title="Bad join code",
                )
        expected = (KEY_SIZE + _JOIN_CHECKSUM_SIZE) * 8 // 5
        if len(text) != expected:
            raise ConfigError(
                f"join code has {len(text)} characters after the FROST prefix; expected {expected}"
                " (was part of it lost when copying?)",
                title="Bad join code",
            )
        raw = base64.b32decode(text)
        secret, checksum = raw[:KEY_SIZE], raw[KEY_SIZE:]
        if hashlib.sha256(b"frost-tui join code" + secret).digest()[:_JOIN_CHECKSUM_SIZE] != checksum:
            raise ConfigError(
                "join code checksum does not match: a character was mistyped", title="Bad join code"
            )
        return cls(secret)

    def save(self, path: Path) -> None:
        """Write the key (as its join code) to `path`, readable by the owner only, atomically."""
        temporary = write_secret_beside(path, self._file_bytes())
        try:
            os.replace(temporary, path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise StorageError.writing(path, error) from error

    def _file_bytes(self) -> bytes:
        return (self.to_join_code() + "\n").encode()

    @classmethod
    def load(cls, path: Path) -> "ClusterKey":
        """Read a key written by `save`; refuses a file that others can read."""
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise ConfigError(
                f"cluster key file {path} has mode {mode:o}; it must be readable by its owner only"
                f" (chmod 600 {path})",
                title="Unsafe key file",
            )
        return cls.from_join_code(path.read_text())

    @classmethod
    def load_or_create(cls, path: Path) -> "ClusterKey":
        """The key at `path`; a fresh install gets a new random key, so it forms its own cluster.

        The new key is published with a hard link, which fails if the file exists: of nodes that
        start at once with one key file, exactly one key wins and every node uses it.
        """
        if path.exists():
            return cls.load(path)
        key = cls.generate()
        if not publish_secret(path, key._file_bytes()):
            return cls.load(path)  # another node made it a moment ago: theirs is the cluster's key
        return key


def write_secret_beside(path: Path, data: bytes) -> Path:
    """A complete, synced copy of `data` in a temporary file of its own next to `path`, readable by its owner
    only; StorageError naming `path` where the disk refuses, and then no temporary file is left.

    Its own name (not one shared `cluster.key.tmp`), so two nodes started at once with one key file never
    write, rename or delete each other's half-written copy.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    except OSError as error:
        raise StorageError.writing(path, error) from error
    try:
        write_pieces(fd, [data])  # all of it: a short write (a nearly full disk) would publish a torn key
        os.fsync(fd)
    except BaseException as error:
        os.unlink(name)
        if isinstance(error, OSError):
            raise StorageError.writing(path, error) from error
        raise
    finally:
        os.close(fd)
    return Path(name)


def publish_secret(path: Path, data: bytes) -> bool:
    """Put `data` at `path` (mode 0600) unless a file is there already; True if this call's copy is the one there.

    Published with a hard link, which fails if the file exists: of nodes that start at once on one data dir
    or key file, exactly one copy wins. StorageError where the disk refuses; no temporary file is left.
    """
    temporary = write_secret_beside(path, data)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    except OSError as error:
        raise StorageError.writing(path, error) from error
    finally:
        os.unlink(temporary)
    return True


# ---------------------------------------------------------------------------------------------
# Datagrams

_DATAGRAM_VERSION = 1
_DATAGRAM_HEAD = struct.Struct(">BQQHB")  # version, epoch, counter, code, sender id length
MAC_SIZE = 16
MAX_DATAGRAM_SIZE = 65507
MAX_NODE_ID_SIZE = 64


def _mac(key: bytes, data: bytes | memoryview) -> bytes:
    return hmac.digest(key, data, "sha256")[:MAC_SIZE]


class DatagramSealer:
    """Seals our outgoing datagrams; the boot epoch lets peers tell a restart from a replay."""

    def __init__(self, key: ClusterKey, node_id: str, *, epoch: int | None = None) -> None:
        self._mac_key = _derive(key.secret, b"frost-tui datagram v1")
        self._sender = node_id.encode()
        if len(self._sender) > MAX_NODE_ID_SIZE:
            raise ConfigError(f"node id is longer than {MAX_NODE_ID_SIZE} bytes")
        self.epoch = time.time_ns() if epoch is None else epoch
        self._counter = 0

    def seal(self, code: int, body: bytes) -> bytes:
        self._counter += 1
        head = _DATAGRAM_HEAD.pack(_DATAGRAM_VERSION, self.epoch, self._counter, code, len(self._sender))
        data = head + self._sender + body
        if len(data) + MAC_SIZE > MAX_DATAGRAM_SIZE:
            raise ProtocolError(f"datagram of {len(data) + MAC_SIZE} bytes is too large for UDP")
        return data + _mac(self._mac_key, data)


@dataclasses.dataclass
class ReplayWindow:
    """Which (epoch, counter) pairs one sender has used: a newer epoch resets, old ones are refused."""

    size: int = 1024
    epoch: int = -1
    highest: int = 0
    seen: int = 0  # bit i set = counter (highest - i) was accepted

    def accept(self, epoch: int, counter: int) -> None:
        """Record (epoch, counter) or raise AuthenticationError if it is a replay."""
        if epoch < self.epoch:
            raise AuthenticationError("datagram from an earlier boot of its sender (replay)")
        if epoch > self.epoch:
            self.epoch, self.highest, self.seen = epoch, counter, 1
            return
        if counter > self.highest:
            shift = counter - self.highest
            self.seen = ((self.seen << shift) | 1) & ((1 << self.size) - 1) if shift < self.size else 1
            self.highest = counter
            return
        age = self.highest - counter
        if age >= self.size:
            raise AuthenticationError(f"datagram counter {counter} is too old for the replay window")
        if self.seen >> age & 1:
            raise AuthenticationError(f"datagram counter {counter} was already seen (replay)")
        self.seen |= 1 << age


@dataclasses.dataclass(frozen=True)
class OpenedDatagram:
    sender: str
    code: int
    body: bytes


class DatagramOpener:
    """Checks the MAC, then the sender's replay window; only then is the body worth decoding."""

    def __init__(self, key: ClusterKey, *, max_senders: int = 4096) -> None:
        self._mac_key = _derive(key.secret, b"frost-tui datagram v1")
        self._windows: OrderedDict[str, ReplayWindow] = OrderedDict()
        self._max_senders = max_senders

    def open(self, datagram: bytes) -> OpenedDatagram:
        if len(datagram) < _DATAGRAM_HEAD.size + MAC_SIZE:
            raise AuthenticationError(f"datagram of {len(datagram)} bytes is too short to be sealed")
        view = memoryview(datagram)
        if not hmac.compare_digest(_mac(self._mac_key, view[:-MAC_SIZE]), view[-MAC_SIZE:]):
            raise WrongClusterKey("datagram MAC does not match our cluster key")
        version, epoch, counter, code, sender_size = _DATAGRAM_HEAD.unpack_from(datagram)
        if version != _DATAGRAM_VERSION:
            raise ProtocolError(f"datagram format version {version} is not ours ({_DATAGRAM_VERSION})")
        body_at = _DATAGRAM_HEAD.size + sender_size
        if body_at > len(datagram) - MAC_SIZE:
            raise ProtocolError("datagram sender id runs past its end")
        try:
            sender = datagram[_DATAGRAM_HEAD.size : body_at].decode()
        except UnicodeDecodeError:
            raise ProtocolError("datagram sender id is not UTF-8") from None
        window = self._windows.get(sender)
        if window is None:
            window = self._windows[sender] = ReplayWindow()
            if len(self._windows) > self._max_senders:
                self._windows.popitem(last=False)
        self._windows.move_to_end(sender)
        window.accept(epoch, counter)
        return OpenedDatagram(sender, code, datagram[body_at:-MAC_SIZE])


# ---------------------------------------------------------------------------------------------
# Streams


class StreamSession:
    """AES-OCB3 (RFC 7253) for one stream: separate keys per direction, a counter nonce per direction.

    Every checkpoint, result and plugin a node moves is sealed on one owner's machine and opened
    on another's, so the bulk cipher's speed is CPU taken from owners. With AES-NI (every desk
    x86 and ARMv8 has it) OCB3 takes 18 ms per 100 MiB where AES-GCM takes 27 and
    ChaCha20-Poly1305 48 (256 KiB chunks, cryptography 47); for small frames all three are
    within 0.2 us. OCB's patents were released in 2021.
    """

    def __init__(self, send_key: bytes, receive_key: bytes) -> None:
        self._send = AESOCB3(send_key)
        self._receive = AESOCB3(receive_key)
        self._send_counter = 0
        self._receive_counter = 0
        self._send_buffer = bytearray()

    def seal_frame(self, code: int, body: bytes | memoryview) -> bytes | memoryview:
        """A whole encrypted frame, header then ciphertext, ready for a single write.

        Large bodies are encrypted into one reused buffer (fresh 256 KiB allocations cost more
        than the cipher): the returned view is valid until the next `seal_frame`.
        """
        size = len(body) + TAG_SIZE
        header = HEADER.pack(size, code)
        nonce = self._send_counter.to_bytes(12, "big")
        self._send_counter += 1
        if size < _REUSE_BUFFER_FROM:
            return header + self._send.encrypt(nonce, body, header)
        if len(self._send_buffer) < HEADER_SIZE + size:
            self._send_buffer = bytearray(HEADER_SIZE + size)
        view = memoryview(self._send_buffer)[: HEADER_SIZE + size]
        view[:HEADER_SIZE] = header
        self._send.encrypt_into(nonce, body, header, view[HEADER_SIZE:])
        return view

    def open(self, header: bytes, ciphertext: bytes | memoryview) -> bytes:
        """Decrypt and authenticate a frame body; any change, replay or reordering fails here."""
        nonce = self._receive_counter.to_bytes(12, "big")
        try:
            plain = self._receive.decrypt(nonce, ciphertext, header)
        except InvalidTag:
            raise AuthenticationError(
                "stream frame failed authentication (wrong key, tampered, replayed or reordered)"
            ) from None
        self._receive_counter += 1
        return plain

    def open_into(self, header: bytes, ciphertext: bytes | memoryview, out: memoryview) -> None:
        """`open`, writing the plaintext into `out` (exactly the plaintext's size) instead of a new object.

        For bulk chunks: a fresh 256 KiB object per chunk costs more in page faults than the
        cipher. On failure `out` is zeroed, so text that failed authentication is never left
        where a caller could read it.
        """
        nonce = self._receive_counter.to_bytes(12, "big")
        try:
            self._receive.decrypt_into(nonce, ciphertext, header, out)
        except InvalidTag:
            out[:] = bytes(len(out))
            raise AuthenticationError(
                "stream frame failed authentication (wrong key, tampered, replayed or reordered)"
            ) from None
        self._receive_counter += 1


_REUSE_BUFFER_FROM = 64 * 1024


def _proof_key(key: ClusterKey) -> bytes:
    return _derive(key.secret, b"frost-tui handshake v1")


def _hello_transcript(hello: Hello) -> bytes:
    return encode([hello.protocol_version, hello.node_id, hello.nonce, hello.listen_port])


def _ack_transcript(hello: Hello, ack: HelloAck) -> bytes:
    return _hello_transcript(hello) + encode([ack.protocol_version, ack.node_id, ack.nonce])


def _check_version(version: int, node_id: str) -> None:
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"node {node_id!r} speaks protocol version {version}; this node speaks {PROTOCOL_VERSION}"
        )


def _session(key: ClusterKey, hello: Hello, ack: HelloAck, *, client: bool) -> StreamSession:
    transcript = hashlib.sha256(_ack_transcript(hello, ack)).digest()
    keys = _derive(key.secret, b"frost-tui stream v2" + transcript, salt=hello.nonce + ack.nonce, length=64)
    client_to_server, server_to_client = keys[:32], keys[32:]
    if client:
        return StreamSession(client_to_server, server_to_client)
    return StreamSession(server_to_client, client_to_server)


def make_hello(key: ClusterKey, node_id: str, *, listen_port: int = 0) -> Hello:
    """The client's opening message: a fresh nonce and a MAC that proves it holds the key."""
    hello = Hello(PROTOCOL_VERSION, node_id, secrets.token_bytes(NONCE_SIZE), listen_port)
    proof = hmac.digest(_proof_key(key), b"hello" + _hello_transcript(hello), "sha256")
    return dataclasses.replace(hello, proof=proof)


def answer_hello(key: ClusterKey, hello: Hello, node_id: str) -> tuple[HelloAck, StreamSession]:
    """Server side: check the client's proof, then answer with our nonce and our own proof.

    The client's HELLO alone could be a replay; its first encrypted frame proves freshness,
    because the session keys depend on the nonce we pick here.
    """
    expected = hmac.digest(_proof_key(key), b"hello" + _hello_transcript(hello), "sha256")
    if not hmac.compare_digest(expected, hello.proof):
        raise WrongClusterKey(f"node {hello.node_id!r} does not hold our cluster key")
    _check_version(hello.protocol_version, hello.node_id)
    if len(hello.nonce) != NONCE_SIZE:
        raise ProtocolError(f"HELLO nonce is {len(hello.nonce)} bytes, not {NONCE_SIZE}")
    ack = HelloAck(PROTOCOL_VERSION, node_id, secrets.token_bytes(NONCE_SIZE))
    proof = hmac.digest(_proof_key(key), b"ack" + _ack_transcript(hello, ack), "sha256")
    ack = dataclasses.replace(ack, proof=proof)
    return ack, _session(key, hello, ack, client=False)


def finish_hello(key: ClusterKey, hello: Hello, ack: HelloAck) -> StreamSession:
    """Client side: check the server's proof over both nonces; then both sides share keys."""
    expected = hmac.digest(_proof_key(key), b"ack" + _ack_transcript(hello, ack), "sha256")
    if not hmac.compare_digest(expected, ack.proof):
        raise WrongClusterKey(f"node {ack.node_id!r} does not hold our cluster key")
    _check_version(ack.protocol_version, ack.node_id)
    if len(ack.nonce) != NONCE_SIZE:
        raise ProtocolError(f"HELLO_ACK nonce is {len(ack.nonce)} bytes, not {NONCE_SIZE}")
    return _session(key, hello, ack, client=True)


# ---------------------------------------------------------------------------------------------
# Refusals


class RefusalLog:
    """Logs a refused source once per `interval`, so a flood of bad packets is one line, not many."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = 600.0,
        max_sources: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._max_sources = max_sources
        self._clock = clock
        self._last: OrderedDict[Hashable, float] = OrderedDict()

    def refuse(self, source: Hashable, reason: str) -> bool:
        """Note a refusal; returns True if it was logged (first time, or interval elapsed)."""
        now = self._clock()
        last = self._last.get(source)
        if last is not None and now - last < self._interval:
            return False
        self._last[source] = now
        self._last.move_to_end(source)
        if len(self._last) > self._max_sources:
            self._last.popitem(last=False)
        self._logger.warning("refused %s: %s (further refusals muted for %.0f s)", source, reason, self._interval)
        return True

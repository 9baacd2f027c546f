"""The few error types of frost-tui: each says whose fault it was, with a title for the UI."""

from __future__ import annotations

from pathlib import Path


class FrostError(Exception):
    """Base of every error we raise on purpose; `title` is the short heading the UI shows."""

    title = "Error"

    def __init__(self, message: str, *, title: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if title is not None:
            self.title = title


class ConfigError(FrostError):
    """The owner's configuration or command line is wrong; the message names the key."""

    title = "Configuration error"


class ProtocolError(FrostError):
    """A peer (or a guest) sent bytes that break the wire protocol; drop the connection."""

    title = "Protocol error"


class AuthenticationError(ProtocolError):
    """A frame or datagram was not sealed with our cluster key, or was replayed."""

    title = "Authentication failed"


class WrongClusterKey(AuthenticationError):
    """The other side holds another cluster key: its proof or MAC does not match ours, or it refused ours. Unlike a
    replayed or garbled datagram, the owner can mend this (`frost-tui key`), so the node tells them how."""

    title = "Another cluster key"


class PluginError(FrostError):
    """A calculation plugin failed to load, broke the API or failed while running."""

    title = "Plugin error"


class CheckpointError(FrostError):
    """A checkpoint could not be written durably, or failed its integrity check."""

    title = "Checkpoint error"


class StorageError(FrostError):
    """The node's own disk refused a write (full, read-only, failing): the write did not happen, what was stored
    before it is intact, and the caller keeps what it was writing to try again; the message names the file."""

    title = "Disk refused a write"

    @classmethod
    def writing(cls, path: Path, error: OSError) -> StorageError:
        """The refusal of a write to the file `path`, named with the OS's reason."""
        return cls(f"could not write {path}: {error.strerror or error}")


class NodeUnavailableError(FrostError):
    """No local node answered on the control socket."""

    title = "No node running"

"""CurveZMQ key pairs in ZeroMQ's certificate format (the files `zmq.auth` reads).

`NAME.key` holds the public key (share it: the server's goes to clients, a client's goes into the
server's allow-list directory); `NAME.key_secret` holds both keys and is written with mode 0600.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import zmq
import zmq.auth
from zmq.utils import z85

_BANNER = (
    "#   ****  Generated on {date} by village keys  ****\n"
    "#   ZeroMQ CURVE {kind} Certificate\n"
    "#   {advice}\n"
)


class KeyFileError(Exception):
    """A key file is missing, unreadable or not a CurveZMQ certificate."""


def _cert_text(kind: str, advice: str, public: bytes, secret: bytes | None) -> str:
    text = _BANNER.format(date=datetime.datetime.now().isoformat(timespec="seconds"), kind=kind, advice=advice)
    text += "\nmetadata\ncurve\n"
    text += f'    public-key = "{public.decode("ascii")}"\n'
    if secret is not None:
        text += f'    secret-key = "{secret.decode("ascii")}"\n'
    return text


def write_keypair(directory: str | os.PathLike[str], name: str, *, force: bool = False) -> tuple[Path, Path]:
    """Generate a key pair with zmq.curve_keypair(); returns (public file, secret file)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise KeyFileError(f"expected a plain name for the key pair (e.g. 'server'), got {name!r}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    public_path, secret_path = folder / f"{name}.key", folder / f"{name}.key_secret"
    for path in (public_path, secret_path):
        if path.exists() and not force:
            raise KeyFileError(f"{path} already exists; pass --force to overwrite it")
    public, secret = zmq.curve_keypair()
    public_path.write_text(_cert_text("Public", "Share this file freely.", public, None), encoding="ascii")
    fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(_cert_text("Secret", "Keep this file private.", public, secret))
    os.chmod(secret_path, 0o600)
    return public_path, secret_path


def load_public(path: str | os.PathLike[str]) -> bytes:
    """The Z85 public key of a .key or .key_secret file."""
    public, _ = _load(path)
    return public


def load_keypair(path: str | os.PathLike[str]) -> tuple[bytes, bytes]:
    """(public, secret) from a .key_secret file."""
    public, secret = _load(path)
    if not secret:
        raise KeyFileError(f"{path}: no secret key in this file; expected a NAME.key_secret file from `village keys`")
    return public, secret


def _load(path: str | os.PathLike[str]) -> tuple[bytes, bytes | None]:
    if not Path(path).is_file():
        raise KeyFileError(f"{path}: no such key file")
    try:
        public, secret = zmq.auth.load_certificate(os.fspath(path))
    except (OSError, ValueError) as exc:
        raise KeyFileError(f"{path}: not a CurveZMQ certificate ({exc})") from None
    if not public or len(public) != 40:
        raise KeyFileError(f"{path}: no valid public key in this file")
    return public, secret


class AllowList:
    """The client public keys a CurveZMQ server admits: a credentials provider for zmq.auth.

    Built from files checked one by one (`load_allow_list`), not by `zmq.auth`'s directory loader, which
    gives up on the whole directory at the first unreadable file and so admits nobody."""

    def __init__(self, keys: set[bytes]):
        self.keys = frozenset(keys)

    def __len__(self) -> int:
        return len(self.keys)

    def callback(self, domain: str, key: bytes) -> bool:
        """zmq.auth's question: may the client with this Z85 public key connect?"""
        return key in self.keys


def load_allow_list(directory: str | os.PathLike[str]) -> tuple[AllowList, list[str]]:
    """The valid public keys of the `*.key` files in `directory`, and one line per file skipped.

    KeyFileError where the directory is missing or holds no valid key: an empty allow list would start a
    server that every client is refused by."""
    folder = Path(directory)
    if not folder.is_dir():
        raise KeyFileError(f"--curve-allow {folder}: not a directory of client .key files")
    keys: set[bytes] = set()
    skipped: list[str] = []
    for path in sorted(folder.glob("*.key")):
        try:
            public = load_public(path)
            if len(z85.decode(public)) != 32:
                raise KeyFileError(f"{path}: no valid public key in this file")
        except (KeyFileError, ValueError, UnicodeError) as exc:
            text = str(exc) if isinstance(exc, KeyFileError) else f"{path}: no valid public key in this file"
            skipped.append(f"{text}; skipped")
            continue
        keys.add(public)
    if not keys:
        detail = f" ({len(skipped)} unreadable: {skipped[0]})" if skipped else ""
        raise KeyFileError(f"--curve-allow {folder}: no valid client public key (.key) file{detail}; copy each "
                           "client's NAME.key from `village keys` there")
    return AllowList(keys), skipped

"""`village keys`: generate a CurveZMQ key pair for the bridge (server or client)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="name of the key pair, e.g. server or unity-client")
    parser.add_argument("--dir", type=Path, default=Path("keys"),
                        help="where to write NAME.key (public) and NAME.key_secret (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing key pair of that name")


def run(args: argparse.Namespace) -> int:
    from bridge.keys import KeyFileError, load_public, write_keypair
    from village.cli import UserError

    try:
        public_path, secret_path = write_keypair(args.dir, args.name, force=args.force)
    except KeyFileError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot write keys to {args.dir}: {exc.strerror or exc}") from None
    print(f"public key  {public_path}  ({load_public(public_path).decode('ascii')})")
    print(f"secret key  {secret_path}  (mode 0600: keep it private)")
    print("server: village serve --curve-secret SERVER.key_secret --curve-allow DIR_OF_CLIENT_KEYS ...; "
          "clients need the server's .key and their own .key_secret")
    return 0

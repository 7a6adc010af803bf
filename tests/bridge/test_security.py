"""Loopback by default, CurveZMQ with a client allow-list, `village keys`."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from bridge_helpers import ROOT, make_server, python_env

from bridge.client import BridgeClient, BridgeTimeout, CurveKeys
from bridge.keys import KeyFileError, load_keypair, load_public, write_keypair
from bridge.server import ConfigError, endpoint_is_local


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("tcp://127.0.0.1:5555", True), ("tcp://127.5.5.5:1", True), ("tcp://localhost:5555", True),
        ("tcp://[::1]:5555", True), ("ipc:///tmp/bridge", True), ("inproc://x", True),
        ("tcp://0.0.0.0:5555", False), ("tcp://*:5555", False), ("tcp://192.168.1.4:5555", False),
        ("tcp://eth0:5555", False), ("tcp://example.com:5555", False), ("pgm://x", False),
    ],
)
def test_endpoint_is_local(endpoint, local):
    assert endpoint_is_local(endpoint) is local


def test_non_loopback_bind_refuses_without_curve():
    srv = make_server(bind="tcp://0.0.0.0:0")
    with pytest.raises(ConfigError, match="--insecure"):
        srv.start()


def test_non_loopback_bind_with_insecure_starts():
    srv = make_server(bind="tcp://0.0.0.0:0", insecure=True)
    srv.run_in_thread()
    try:
        port = srv.endpoint.rsplit(":", 1)[1]
        with BridgeClient(f"tcp://127.0.0.1:{port}", timeout=5.0) as c:
            assert c.ping() > 0
    finally:
        srv.stop()


def test_cli_refuses_public_bind_with_one_line_and_exit_2():
    done = subprocess.run([sys.executable, "-m", "village", "serve", "--policy", "scripted", "--bind",
                           "tcp://0.0.0.0:0"], capture_output=True, text=True, cwd=ROOT, env=python_env(),
                          timeout=120)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("village serve: error: refusing to bind") and "Traceback" not in done.stderr


@pytest.fixture
def keys(tmp_path):
    allow = tmp_path / "allowed"
    server_pub, server_secret = write_keypair(tmp_path, "server")
    good_pub, good_secret = write_keypair(allow, "game")
    _, bad_secret = write_keypair(tmp_path / "strangers", "intruder")
    return {"server_pub": server_pub, "server_secret": server_secret, "allow": allow,
            "good": good_secret, "bad": bad_secret}


def test_curve_allows_listed_keys_and_rejects_others(keys):
    srv = make_server(bind="tcp://0.0.0.0:0", curve_secret=keys["server_secret"], curve_allow=keys["allow"])
    srv.run_in_thread()
    port = srv.endpoint.rsplit(":", 1)[1]
    endpoint = f"tcp://127.0.0.1:{port}"
    try:
        good = CurveKeys.from_files(keys["server_pub"], keys["good"])
        with BridgeClient(endpoint, timeout=5.0, curve=good) as c:
            assert c.hello()["protocol"] == 1
        bad = CurveKeys.from_files(keys["server_pub"], keys["bad"])
        with BridgeClient(endpoint, timeout=0.5, retries=1, curve=bad) as c, pytest.raises(BridgeTimeout):
            c.ping()
        # no CURVE at all: the handshake never completes either
        with BridgeClient(endpoint, timeout=0.5, retries=0) as c, pytest.raises(BridgeTimeout):
            c.ping()
        with BridgeClient(endpoint, timeout=5.0, curve=good) as c:  # and the server is fine
            assert c.ping() > 0
    finally:
        srv.stop()


def test_curve_config_errors(keys, tmp_path):
    with pytest.raises(ConfigError, match="--curve-secret"):
        make_server(curve_allow=keys["allow"]).start()
    with pytest.raises(ConfigError, match="no secret key"):
        make_server(curve_secret=keys["server_pub"], curve_allow=keys["allow"]).start()
    with pytest.raises(ConfigError, match="not a directory"):
        make_server(curve_secret=keys["server_secret"], curve_allow=tmp_path / "nope").start()


def test_write_keypair_files(tmp_path):
    public_path, secret_path = write_keypair(tmp_path, "unity")
    assert stat.S_IMODE(os.stat(secret_path).st_mode) == 0o600
    public, secret = load_keypair(secret_path)
    assert load_public(public_path) == public and len(public) == len(secret) == 40
    with pytest.raises(KeyFileError, match="already exists"):
        write_keypair(tmp_path, "unity")
    write_keypair(tmp_path, "unity", force=True)
    assert load_public(public_path) != public
    with pytest.raises(KeyFileError, match="plain name"):
        write_keypair(tmp_path, "../evil")


def test_village_keys_cli(tmp_path):
    cmd = [sys.executable, "-m", "village", "keys", "server", "--dir", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=python_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "server.key").is_file() and (tmp_path / "server.key_secret").is_file()
    assert load_public(tmp_path / "server.key").decode() in done.stdout
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=python_env(), timeout=120)
    assert again.returncode == 2 and "already exists" in again.stderr and "Traceback" not in again.stderr


def test_a_junk_key_file_is_skipped_and_named_not_a_lock_out(keys, caplog):
    (keys["allow"] / "junk.key").write_bytes(b"\x00\xffnot a certificate\n")
    (keys["allow"] / "short.key").write_text('metadata\ncurve\n    public-key = "abc"\n')
    srv = make_server(bind="tcp://0.0.0.0:0", curve_secret=keys["server_secret"], curve_allow=keys["allow"])
    with caplog.at_level("WARNING", logger="bridge.server"):
        srv.run_in_thread()
    port = srv.endpoint.rsplit(":", 1)[1]
    try:
        good = CurveKeys.from_files(keys["server_pub"], keys["good"])
        with BridgeClient(f"tcp://127.0.0.1:{port}", timeout=5.0, curve=good) as c:
            assert c.ping() > 0
        bad = CurveKeys.from_files(keys["server_pub"], keys["bad"])
        with BridgeClient(f"tcp://127.0.0.1:{port}", timeout=0.5, retries=1, curve=bad) as c, \
                pytest.raises(BridgeTimeout):
            c.ping()
    finally:
        srv.stop()
    skipped = [r.problem for r in caplog.records if getattr(r, "problem", None) and "skipped" in r.problem]
    assert any("junk.key" in p for p in skipped) and any("short.key" in p for p in skipped)


def test_an_allow_list_without_a_valid_key_is_refused(keys, tmp_path):
    empty = tmp_path / "empty-allow"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no valid client public key"):
        make_server(bind="tcp://0.0.0.0:0", curve_secret=keys["server_secret"], curve_allow=empty).start()
    (empty / "junk.key").write_text("junk\n")
    with pytest.raises(ConfigError, match="junk.key"):
        make_server(bind="tcp://0.0.0.0:0", curve_secret=keys["server_secret"], curve_allow=empty).start()


def test_cli_empty_allow_dir_is_one_line_exit_2(keys, tmp_path):
    empty = tmp_path / "empty-allow"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "village", "serve", "--policy", "scripted", "--bind",
                           "tcp://0.0.0.0:0", "--curve-secret", str(keys["server_secret"]), "--curve-allow",
                           str(empty)], capture_output=True, text=True, cwd=ROOT, env=python_env(), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("village serve: error: --curve-allow") and "no valid client public key" in last


def _ipv6_loopback() -> bool:
    import socket

    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_ipv6_loopback_bind_and_connect():
    srv = make_server(bind="tcp://[::1]:0")
    srv.run_in_thread()
    try:
        assert srv.endpoint.startswith("tcp://[::1]:")
        with BridgeClient(srv.endpoint, timeout=5.0) as c:
            assert c.ping() > 0
    finally:
        srv.stop()

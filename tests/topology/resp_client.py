"""A minimal RESP2 client (enough for admin commands and the tests) and the
cluster hash slot of a key."""
from __future__ import annotations

import socket
import ssl
from typing import Any, Iterable

HOST = "127.0.0.1"
CLUSTER_SLOTS = 16384


class ReplyError(Exception):
    """A Redis error reply (``-ERR ...``)."""


class Conn:
    """One connection to a Redis node; ``call`` sends a command and returns the reply.

    Bulk strings come back as ``str`` (``decode=True``, undecodable bytes kept
    with surrogateescape) or ``bytes``; error replies raise ReplyError.
    """

    def __init__(self, port: int, host: str = HOST, timeout: float = 2.0,
                 ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None):
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._rfile = sock.makefile("rb")

    def call(self, *args: Any, decode: bool = True) -> Any:
        self.sock.sendall(_encode(args))
        reply = self._read(decode)
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def pipeline(self, commands: Iterable[Iterable[Any]], decode: bool = True) -> list[Any]:
        """Sends all commands at once; returns the replies (errors as ReplyError objects)."""
        commands = list(commands)
        self.sock.sendall(b"".join(_encode(c) for c in commands))
        return [self._read(decode) for _ in commands]

    def _read(self, decode: bool) -> Any:
        line = self._rfile.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by the server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._rfile.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("connection closed by the server")
            return data[:-2].decode("utf-8", "surrogateescape") if decode else data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read(decode) for _ in range(n)]
        raise ConnectionError(f"unexpected reply {line!r}")

    def close(self) -> None:
        try:
            self._rfile.close()
        finally:
            self.sock.close()

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _encode(args: Iterable[Any]) -> bytes:
    out = []
    args = list(args)
    out.append(b"*%d\r\n" % len(args))
    for a in args:
        if isinstance(a, str):
            a = a.encode("utf-8", "surrogateescape")
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def call(port: int, *args: Any, decode: bool = True, timeout: float = 2.0, **conn_kw: Any) -> Any:
    """Runs one command on a fresh connection to 127.0.0.1:port."""
    with Conn(port, timeout=timeout, **conn_kw) as c:
        return c.call(*args, decode=decode)


def _info(port: int, section: str) -> dict[str, str]:
    with Conn(port, timeout=1) as c:
        return _info_of(c, section)


def _info_of(c: Conn, section: str) -> dict[str, str]:
    text = c.call("INFO", section)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))


def _pairs(flat: list[Any]) -> dict[str, Any]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


# ---------------------------------------------------------------------------
# Cluster key slots: CRC16 (XMODEM: poly 0x1021, init 0) of the key or of its hash tag

def _crc16_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[(crc >> 8) ^ b]
    return crc


def key_slot(key: bytes | str) -> int:
    """The Redis Cluster hash slot of a key: only the part between the first
    ``{`` and the next ``}`` counts when that part is not empty."""
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogateescape")
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16(key) & (CLUSTER_SLOTS - 1)

"""Who has a TCP port on this machine, read from the kernel's own tables (``/proc/net/tcp``, ``/proc/net/tcp6``) and
each process's open sockets (``/proc/<pid>/fd``): the process, its command line and its environment. What names the
holder of a taken port, proves which process answers on a deployment's port, and shows where a service listens.
Linux only; a process of another user whose files cannot be read is named by its socket alone.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
LISTEN, BOUND = "0A", "07"          # the kernel's states: listening; closed with a port (bound, in some kernels)


@dataclass(frozen=True)
class Socket:
    address: str                 # the local address it is bound to ("0.0.0.0", "127.0.0.1", "::")
    port: int
    listening: bool
    inode: int
    pid: int | None = None
    command: str | None = None   # its process's command line, cut to 160 characters

    def describe(self) -> str:
        who = f"pid {self.pid} ({self.command})" if self.pid else "a process of another user"
        return f"{who}, {'listening' if self.listening else 'bound, not listening'} on {self.address}:{self.port}"


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(hex_addr, 16)))
    words = struct.unpack("<4I", raw)
    return socket.inet_ntop(socket.AF_INET6, struct.pack(">4I", *words))


def _table(port: int | None) -> list[tuple[str, int, bool, int]]:
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cells = line.split()
            local, state, inode = cells[1], cells[3], int(cells[9])
            addr, _, hex_port = local.partition(":")
            if state not in (LISTEN, BOUND) or not inode or (port is not None and int(hex_port, 16) != port):
                continue
            found.append((_address(addr), int(hex_port, 16), state == LISTEN, inode))
    return found


def listening(port: int) -> bool:
    """Whether a socket here listens on ``port`` (the kernel's tables hold no socket that is bound and not listening
    yet; only a bind finds those)."""
    return any(ls for _, _, ls, _ in _table(port))


def sockets(port: int | None = None) -> list[Socket]:
    """Every bound or listening TCP socket here (of ``port`` only, when given), with its process where readable."""
    found = _table(port)
    owners = _owners({f[3] for f in found}) if found else {}
    return [Socket(a, p, ls, i, *owners.get(i, (None, None))) for a, p, ls, i in found]


def _owners(inodes: set[int]) -> dict[int, tuple[int, str]]:
    out: dict[int, tuple[int, str]] = {}
    for pid_dir in PROC.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = os.listdir(pid_dir / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(pid_dir / "fd" / fd)
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in inodes:
                out[int(target[8:-1])] = (int(pid_dir.name), command_of(int(pid_dir.name)))
        if len(out) == len(inodes):
            break
    return out


def command_of(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return text if len(text) <= 160 else text[:157] + "..."


def environment_of(pid: int) -> dict[str, str]:
    """A process's environment as it started ({} where it cannot be read)."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (part.decode(errors="replace").partition("=") for part in raw.split(b"\0") if part)
    return {k: v for k, _, v in pairs}


def holder(port: int) -> str | None:
    """Who has ``port`` here, in words (None: nothing has it)."""
    got = sockets(port)
    return "; ".join(s.describe() for s in got) if got else None

"""Which process wrote a lease record, and whether it provably no longer runs (Linux /proc).

A process is named "host|boot id|pid namespace|pid|start time": a pid alone may be reused, and
only a process on the same host, boot and PID namespace can see another one's /proc entry.
"""

from __future__ import annotations

import os
import socket


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def stat_fields(pid: int) -> list[str] | None:
    """`/proc/<pid>/stat` from field 3 (the state) on, so `man 5 proc`'s field n is item n - 3;
    None if there is no such process (or no /proc). The command name (field 2) may hold spaces
    and parentheses: the fields are split after its last ")"."""
    stat = _read_text(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[1].split() if stat else None


def gone_state(fields: list[str]) -> bool:
    """A zombie (ended, not yet reaped by its parent) or dead process: it no longer runs."""
    return fields[0] in ("Z", "X")


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22), None if it is gone: no
    entry, or a zombie (killed, not yet reaped by its parent)."""
    fields = stat_fields(pid)
    return None if fields is None or gone_state(fields) else fields[19]


def _identity() -> str:
    boot = _read_text("/proc/sys/kernel/random/boot_id")
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = ""
    started = _start_time(os.getpid()) or ""
    if not (boot and pid_ns and started):
        return ""  # not Linux: no record names a process, nothing is ever provably gone
    return f"{socket.gethostname()}|{boot}|{pid_ns}|{os.getpid()}|{started}"


def this_process() -> str | None:
    """This process's name (None where /proc cannot tell: then nothing is ever provably gone)."""
    return _identity() or None


def process_gone(process: str) -> str | None:
    """Why the named process provably no longer runs, or None (it may: another host, boot or
    PID namespace cannot be seen from here)."""
    parts = process.split("|")
    here = _identity().split("|")
    if len(parts) != 5 or len(here) != 5 or parts[:3] != here[:3]:
        return None
    pid, started = int(parts[3]), parts[4]
    now_started = _start_time(pid)
    if now_started is None:
        return f"its process {pid} on this host no longer exists"
    if now_started != started:
        return f"its process {pid} on this host has ended (the pid now runs another process)"
    return None

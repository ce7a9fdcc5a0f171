"""Shared helpers for throwaway servers: free ports, the unprivileged user, process control."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

SERVICE_USER = "headwater"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def service_user() -> str | None:
    """The user to run servers as: None when we are not root, else an unprivileged account.

    The account is created (system user, no home, no login shell) when it does not exist yet.
    """
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True,
        )
    return SERVICE_USER


def make_owned_dir(path: Path, user: str | None) -> None:
    """Create `path` (and parents) and give it to `user` when one is set."""
    path.mkdir(parents=True, exist_ok=True)
    if user:
        shutil.chown(path, user, user)


def run_as(cmd: list[str], user: str | None, **kwargs) -> subprocess.CompletedProcess:
    """Run `cmd` to completion as `user` (or as ourselves), raising with its output on failure."""
    proc = subprocess.run(cmd, user=user, group=user, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc

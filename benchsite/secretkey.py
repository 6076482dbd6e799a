"""The SECRET_KEY when none is set: generated once and kept in a file only its owner reads,
so a site started with nothing configured has a key of its own that survives restarts (and
every process of one checkout, web server and workers, agrees on it)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def kept_secret_key(path: Path) -> str:
    """The key in `path`, written there first (mode 0600) if the file does not exist."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # Written under a name of its own, then linked into place: a process starting at the
    # same moment reads either no file or the whole key, and the first link wins.
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    try:
        os.link(draft, path)
    except FileExistsError:
        key = path.read_text().strip()
    finally:
        draft.unlink()
    return key

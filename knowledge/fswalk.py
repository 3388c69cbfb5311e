"""`os.walk` without recursion: Python 3.11's walk recurses once per level, so a folder nested a
thousand deep raises RecursionError; this one keeps its own stack and never follows symlinks."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator


def walk(top: str | os.PathLike[str], onerror: Callable[[OSError], None] | None = None
         ) -> Iterator[tuple[str, list[str], list[str]]]:
    """(folder, sub-folders, files) top-down, like `os.walk(top)`: the caller may sort or prune
    the sub-folder list in place. An unreadable folder is skipped and given to `onerror`."""
    stack = [os.fspath(top)]
    while stack:
        root = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        links: set[str] = set()
        try:
            with os.scandir(root) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                        if is_dir and entry.is_symlink():
                            links.add(entry.name)  # listed, as os.walk does, but not entered
                    except OSError:  # a symlink loop, a vanished entry
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError as exc:
            if onerror is not None:
                onerror(exc)
            continue
        yield root, dirs, files
        # reversed: the first sub-folder is walked first, as os.walk does
        stack.extend(os.path.join(root, d) for d in reversed(dirs) if d not in links)

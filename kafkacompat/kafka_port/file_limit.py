"""The broker process's open-file limit, raised to what its connections need (issue 32).

Every client connection holds a file descriptor, and so do the store's log
files (at most `max_open_files`, 1,024 by default) and the process itself.
Linux starts most processes with a soft limit of 1,024 descriptors under a
much higher hard limit; a broker left at the soft limit refuses connections
past about a thousand, whatever `max_connections` says (asyncio logs
"socket.accept() out of system resource" and stops accepting for a second).
So `serve` raises the soft limit to the hard one at start, as Go's runtime
does for every program. Run as root it also raises the hard limit to what
`max_connections` needs; otherwise, when the hard limit is too low, it says
at start what to set.
"""

from __future__ import annotations

import resource

FILES_BESIDE_CONNECTIONS = 2048  # the store's open log files (max_open_files 1,024) and the process's own


def raise_file_limit(max_connections: int) -> str | None:
    """Raise RLIMIT_NOFILE for `max_connections` client connections; a warning to log if it stays too low.

    The soft limit goes to the hard one (max_connections can be raised while the broker runs), and the
    hard one to what max_connections needs where that is permitted."""
    need = max_connections + FILES_BESIDE_CONNECTIONS
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    allowed = allow_open_files(need if hard == resource.RLIM_INFINITY else max(need, hard))
    if allowed >= need:
        return None
    return (f"the open-file limit ({allowed}) is below what max_connections={max_connections} needs ({need}): "
            f"past about {max(allowed - FILES_BESIDE_CONNECTIONS, 0)} connections the system refuses new ones; "
            f"raise it (ulimit -n {need}, or LimitNOFILE={need} under systemd) or lower max_connections")


def allow_open_files(need: int) -> int:
    """Let this process hold `need` open files: the soft limit raised to it, and the hard limit too where
    that is permitted (CAP_SYS_RESOURCE, within fs.nr_open), else up to the hard limit. Returns how many
    it may hold now (`need` when that is all it asked)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return need
    if hard == resource.RLIM_INFINITY or hard >= need:
        _set(need, hard)
        return need
    if _set(need, need):  # past the hard limit: permitted to root with CAP_SYS_RESOURCE
        return need
    _set(hard, hard)
    return hard


def _set(soft: int, hard: int) -> bool:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    except (ValueError, OSError):  # not permitted, or past the system's fs.nr_open
        return False
    return True

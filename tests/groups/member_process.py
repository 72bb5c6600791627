"""A group member in a process of its own, so a test can kill it (SIGKILL: no LeaveGroup).

    python -m tests.groups.member_process LIB BOOTSTRAP TOPIC GROUP
Prints its assignment, one JSON list per line, whenever it changes.
"""

from __future__ import annotations

import json
import sys

from tests.groups.members import CLIENTS


def main() -> None:
    lib, bootstrap, topic, group = sys.argv[1:5]
    client = CLIENTS[lib](bootstrap, topic, group)
    shown = None
    while True:
        client.poll()
        assigned = sorted(client.assignment())
        if assigned != shown:
            print(json.dumps(assigned), flush=True)
            shown = assigned


if __name__ == "__main__":
    main()

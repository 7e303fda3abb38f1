"""What a Spark standalone master says of its cluster, read on its host (testinfra ``host``) from its
web UI's JSON (port 8080)."""

import json
import time


def master_state(host, ip, workers, polls=60):
    """The master's ``/json/`` once it lists ``workers`` alive workers and an active application,
    or its last answer after ``polls`` tries 2 s apart ({} when it never answered)."""
    state = {}
    for _ in range(polls):
        out = host.run(f"curl -sf http://{ip}:8080/json/")
        if out.rc == 0:
            state = json.loads(out.stdout)
            if state.get("aliveworkers") == workers and state.get("activeapps"):
                break
        time.sleep(2)
    return state

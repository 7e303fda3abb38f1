#!/bin/bash
# Plain HTTP server for the Molecule scenarios: it stands in for the Apache download site and a Maven
# repository (neither is reachable from the test hosts), serving $MOL_HOME/artifacts/http (built by
# prepare-controller.sh) on the bridge address only. The kernel picks a free port (or $MOL_HTTP_PORT).
#   artifact-server.sh start HOST   start (idempotent); prints the base URL, also in $MOL_HOME/http-server/url
#   artifact-server.sh stop         SIGTERM to the recorded PID only, wait, remove the state
#   artifact-server.sh url
set -euo pipefail
MOL_HOME=${MOL_HOME:-/tmp/kafka-mirror-molecule}
ROOT=${MOL_HTTP_ROOT:-$MOL_HOME/artifacts/http}
D=$MOL_HOME/http-server
PY=${PYTHON:-python3}

alive() { [ -f "$D/pid" ] && kill -0 "$(cat "$D/pid")" 2>/dev/null; }

start() {
  local host=$1
  if alive && [ -f "$D/url" ]; then cat "$D/url"; return 0; fi
  [ -d "$ROOT" ] || { echo "missing $ROOT: run prepare-controller.sh" >&2; exit 1; }
  rm -rf "$D"; mkdir -p "$D"
  # binds before it writes the port file; one line per request in access.log
  setsid "$PY" - "$host" "${MOL_HTTP_PORT:-0}" "$ROOT" "$D" >"$D/server.log" 2>&1 <<'PY' &
import functools, http.server, os, sys
host, port, root, state = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
log = open(os.path.join(state, "access.log"), "a", buffering=1)
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        log.write("%s %s\n" % (self.address_string(), fmt % args))
srv = http.server.ThreadingHTTPServer((host, port), functools.partial(Handler, directory=root))
with open(os.path.join(state, "port.tmp"), "w") as f:
    f.write(str(srv.server_address[1]))
os.replace(os.path.join(state, "port.tmp"), os.path.join(state, "port"))
srv.serve_forever()
PY
  echo $! > "$D/pid"
  for _ in $(seq 100); do
    if [ -f "$D/port" ]; then
      echo "http://$host:$(cat "$D/port")" > "$D/url"; cat "$D/url"; return 0
    fi
    alive || { echo "artifact server died:" >&2; cat "$D/server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "timeout starting the artifact server" >&2; exit 1
}

stop() {
  if alive; then
    local pid; pid=$(cat "$D/pid")
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -rf "$D"
  echo "artifact server stopped"
}

url() { cat "$D/url"; }

"$@"

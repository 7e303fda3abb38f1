"""A controller-side service of a Molecule scenario run in the background: ``start`` runs the
script's ``serve STATE_DIR ARGS...`` as a process of its own (its PID recorded in STATE_DIR/pid)
and waits until it wrote STATE_DIR/state.json; ``stop`` ends it by that PID (SIGTERM; the
service stops what it started), SIGKILL of the PIDs state.json lists under ``children`` should it
not end in time. ``main`` is the script's command line (start, stop, serve), ``watch`` the
serving loop."""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open('/proc/%d/stat' % pid) as fh:
            return fh.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def recorded_pid(state_dir):
    try:
        with open(os.path.join(state_dir, 'pid')) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def write_json(path, data):
    with open(path + '.tmp', 'w') as fh:
        json.dump(data, fh, indent=1)
    os.replace(path + '.tmp', path)


def start(script, state_dir, args, what, timeout=240):
    pid = recorded_pid(state_dir)
    if pid and alive(pid) and os.path.exists(os.path.join(state_dir, 'state.json')):
        print('already running (pid %d)' % pid)
        return 0
    stop(state_dir)
    os.makedirs(state_dir)
    log = open(os.path.join(state_dir, 'serve.log'), 'ab')
    proc = subprocess.Popen([sys.executable, os.path.abspath(script), 'serve', state_dir, *args],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    with open(os.path.join(state_dir, 'pid'), 'w') as fh:
        fh.write(str(proc.pid))
    # as the harness's servers, PATIENCE times the timeout (9 brokers at load 37 took longer)
    deadline = time.monotonic() + timeout * float(os.environ.get('KAFKA_MIRROR_TEST_PATIENCE') or '1')
    while not os.path.exists(os.path.join(state_dir, 'state.json')):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(os.path.join(state_dir, 'serve.log')) as fh:
                print(fh.read()[-4000:], file=sys.stderr)
            stop(state_dir, keep=True)
            print('%s did not start (logs in %s)' % (what, state_dir), file=sys.stderr)
            return 1
        time.sleep(0.5)
    with open(os.path.join(state_dir, 'serve.log')) as fh:
        print(fh.read().strip())
    return 0


def stop(state_dir, keep=False):
    pid = recorded_pid(state_dir)
    if pid and alive(pid):
        os.kill(pid, signal.SIGTERM)   # serve() stops what it started, by their PIDs
        deadline = time.monotonic() + 60
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            try:   # what it started, by the PIDs it recorded
                with open(os.path.join(state_dir, 'state.json')) as fh:
                    children = json.load(fh)['children']
                for child in children:
                    if child and alive(child):
                        os.kill(child, signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass
    if not keep:
        shutil.rmtree(state_dir, ignore_errors=True)
    return 0


def on_stop():
    """An event SIGTERM and SIGINT set from now on (called first thing in serve: a stop while
    it starts its services lets it stop them)."""
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    return stopped


def watch(stopped, services, what, state_dir):
    """Serve until ``stopped`` is set (0), or until one of ``services`` (each with ``alive()``)
    is not alive (1, naming ``what``)."""
    while not stopped.wait(1.0):
        if not all(service.alive() for service in services):
            print('%s died; logs in %s' % (what, state_dir), file=sys.stderr)
            return 1
    return 0


def main(argv, script, serve, what, usage):
    """``start STATE_DIR ARG...``, ``serve STATE_DIR ARG...`` (what start runs) or ``stop STATE_DIR``."""
    if len(argv) >= 4 and argv[1] == 'start':
        return start(script, os.path.abspath(argv[2]), argv[3:], what)
    if len(argv) >= 4 and argv[1] == 'serve':
        return serve(os.path.abspath(argv[2]), *argv[3:])
    if len(argv) >= 3 and argv[1] == 'stop':
        stop(os.path.abspath(argv[2]))
        print('stopped')
        return 0
    print(usage, file=sys.stderr)
    return 2

"""py4j's callback connections of JVM threads that ended, closed.

In PySpark's pinned-thread mode every JVM thread that calls into Python (a micro-batch query's
stream execution thread, running ``foreachBatch``) gets a connection of its own to the Python
process, served there by a thread of its own. Once a call returned, py4j's ``PythonClient``
keeps the connection in an idle deque and never closes it, also after its JVM thread ended
(its periodic cleaner does nothing in this mode): every query run left a socket pair and a
waiting Python thread behind (the soak test: two threads more per topic that came and went).

Closing the idle connections the JVM opened is safe: the deque holds only connections no call
is using (``PythonClient.getConnection`` takes a thread's own out of it, under the client's
lock, which this holds too), a live JVM thread whose own was closed gets a new one at its next
call, and the Python thread serving a closed one ends at the end of its stream.
"""

from __future__ import annotations

from typing import Any


def close_idle_callback_connections(gateway: Any) -> int:
    """Close the idle JVM-initiated connections of PySpark's py4j ``gateway`` (a
    ``py4j.clientserver.ClientServer``); how many were closed."""
    client = gateway.java_gateway_server.getCallbackClient()
    base = gateway.jvm.java.lang.Class.forName("py4j.CallbackClient")

    def field(name: str) -> Any:
        declared = base.getDeclaredField(name)
        declared.setAccessible(True)
        return declared.get(client)

    connections, lock = field("connections"), field("lock")
    closed = 0
    lock.lock()
    try:
        for _ in range(int(connections.size())):
            connection = connections.pollFirst()
            if connection is None:
                break
            if connection.isInitiatedFromClient():
                connection.shutdown()
                closed += 1
            else:  # a Python thread's own connection (calls from Python come in on it)
                connections.addLast(connection)
    finally:
        lock.unlock()
    return closed

"""A Java admin client closes within what its caller gives it: a stop with the cluster gone has
spent its budget, and the client's close then waits for nothing (it waited 5 s before, past the
budget, in every stop whose epoch check had a request under way)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafka_mirror.engine.jvm_admin import CLOSE_SECONDS, JvmAdmin


class FakeAdmin:
    def __init__(self) -> None:
        self.waits: list[int] = []

    def close(self, duration: int) -> None:
        self.waits.append(duration)


def admin() -> tuple[JvmAdmin, FakeAdmin]:
    client = JvmAdmin.__new__(JvmAdmin)
    fake = FakeAdmin()
    duration = SimpleNamespace(ofMillis=lambda millis: millis)
    jvm: Any = SimpleNamespace(java=SimpleNamespace(time=SimpleNamespace(Duration=duration)))
    client._jvm, client._admin = jvm, fake
    return client, fake


@pytest.mark.parametrize(("given", "waited_ms"), [
    (None, int(CLOSE_SECONDS * 1000)),     # no budget: its own bound
    (30.0, int(CLOSE_SECONDS * 1000)),     # a stop's whole budget: still its own bound
    (1.25, 1250),
    (0.0, 0),                              # the budget spent
    (-0.5, 0),
])
def test_the_close_waits_for_what_is_given_at_most_its_own_bound(given: float | None,
                                                                 waited_ms: int) -> None:
    client, fake = admin()
    if given is None:
        client.close()
    else:
        client.close(given)
    assert fake.waits == [waited_ms]

"""A ``replication.policy.class`` of the user's own: the Java class itself, in the policy JVM.

Loaded as MirrorMaker 2 loads it (Kafka's ``AbstractConfig.getConfiguredInstance``): the class by
name, which must implement ``org.apache.kafka.connect.mirror.ReplicationPolicy``; an instance
from its public no-argument constructor; ``configure(map)`` with the flow's connector
configuration when it is ``Configurable``. Every answer is memoized per argument: the policy is
asked about every topic at every refresh, and MM2 too relies on it naming a topic the same way
every time (on every task, after every restart).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from kafka_mirror.errors import MirrorError
from kafka_mirror.mm2 import policy_jvm
from kafka_mirror.mm2.policy import ReplicationPolicy, TargetTopicNames

POLICY_INTERFACE = "org.apache.kafka.connect.mirror.ReplicationPolicy"
CONFIGURABLE = "org.apache.kafka.common.Configurable"

T = TypeVar("T")

_lock = threading.Lock()
_loaded: dict[tuple[str, str, frozenset[tuple[str, str]]], JavaReplicationPolicy] = {}


class PolicyLoadError(Exception):
    """The class cannot serve as a replication policy; the message says why (Java's reason)."""


class PolicyCallError(MirrorError):
    """The policy threw (or answered null where a name is needed) while in use."""


def java_reason(error: Any) -> str:
    """``Class: message`` of a Java exception (the cause of a reflective call's wrapper)."""
    throwable = getattr(error, "java_exception", error)
    while True:
        cause = throwable.getCause()
        wrapper = throwable.getClass().getName() in (
            "java.lang.reflect.InvocationTargetException",
            "java.lang.ExceptionInInitializerError",
        )
        if cause is None or not wrapper:
            return str(throwable.toString())
        throwable = cause


def _thrown(error: BaseException | None) -> Any:
    """The Java exception (py4j's ``Py4JJavaError``) behind ``error``, or None. A Spark session
    in this process hooks PySpark's exception conversion into py4j for every gateway, this
    JVM's too: a policy's Java exception then comes out as PySpark's own error, or as an error
    of its lookup in the Spark JVM, raised while handling it (its context)."""
    from py4j.protocol import Py4JJavaError

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, Py4JJavaError):
            return error
        seen.add(id(error))
        error = error.__context__
    return None


@contextmanager
def _java_call(fail: Callable[[str], Exception]) -> Iterator[None]:
    """A call into the policy's JVM: a Java exception it throws raises ``fail(reason)``."""
    try:
        yield
    except Exception as exc:
        thrown = _thrown(exc)
        if thrown is None:
            raise
        raise fail(java_reason(thrown)) from None


def load_policy(class_name: str, config: Mapping[str, str]) -> JavaReplicationPolicy:
    """The configured policy (one per class and configuration: flows with the same settings
    share it); raises :class:`PolicyLoadError`."""
    gateway = policy_jvm.gateway()
    key = (policy_jvm.classpath(), class_name, frozenset(config.items()))
    with _lock:
        found = _loaded.get(key)
        if found is None:
            found = _loaded[key] = JavaReplicationPolicy(
                class_name, _instantiate(gateway, class_name, config)
            )
        return found


def _instantiate(gateway: Any, class_name: str, config: Mapping[str, str]) -> Any:
    jvm = gateway.jvm
    loader = jvm.java.lang.ClassLoader.getSystemClassLoader()
    with _java_call(lambda why: PolicyLoadError(
            f"class not found or not loadable: {why} (class path: $CLASSPATH, then Kafka's "
            "connect-mirror-client and kafka-clients; put the policy's jar on CLASSPATH)")):
        cls = jvm.java.lang.Class.forName(class_name, True, loader)
    if not jvm.java.lang.Class.forName(POLICY_INTERFACE, False, loader).isAssignableFrom(cls):
        raise PolicyLoadError(f"{class_name} does not implement {POLICY_INTERFACE}")
    with _java_call(lambda why: PolicyLoadError(
            f"cannot create an instance with the public no-argument constructor: {why}")):
        constructor = cls.getDeclaredConstructor(gateway.new_array(jvm.java.lang.Class, 0))
        instance = constructor.newInstance(gateway.new_array(jvm.java.lang.Object, 0))
    if jvm.java.lang.Class.forName(CONFIGURABLE, False, loader).isInstance(instance):
        settings = jvm.java.util.HashMap()
        for name, value in config.items():
            settings.put(name, value)
        with _java_call(lambda why: PolicyLoadError(f"configure() failed: {why}")):
            instance.configure(settings)
    return instance


class JavaReplicationPolicy(ReplicationPolicy):
    """Every name and test answered by the Java policy (cycle detection included, through its
    ``topicSource`` and ``upstreamTopic``), memoized per argument."""

    def __init__(self, class_name: str, instance: Any) -> None:
        self.class_name = class_name
        self._instance = instance
        self._memo: dict[tuple[str, tuple[str, ...]], Any] = {}

    @property
    def display_name(self) -> str:
        return self.class_name

    def __repr__(self) -> str:
        return f"JavaReplicationPolicy({self.class_name!r})"

    def _call(self, method: str, args: tuple[str, ...], check: Callable[[Any], T]) -> T:
        key = (method, args)
        if key in self._memo:
            return check(self._memo[key])
        shown = ", ".join(repr(a) for a in args)
        with _java_call(lambda why: PolicyCallError(
                f"replication policy {self.class_name}: {method}({shown}) threw {why}")):
            value = getattr(self._instance, method)(*args)
        try:
            answer = check(value)
        except TypeError:
            raise PolicyCallError(
                f"replication policy {self.class_name}: {method}({shown}) returned {value!r}"
            ) from None
        self._memo[key] = answer
        return answer

    def _name(self, method: str, *args: str) -> str:
        return self._call(method, args, _text)

    def _optional(self, method: str, *args: str) -> str | None:
        return self._call(method, args, _optional_text)

    def _test(self, method: str, *args: str) -> bool:
        return self._call(method, args, _flag)

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return self._name("formatRemoteTopic", source_alias, topic)

    def topic_source(self, topic: str) -> str | None:
        return self._optional("topicSource", topic)

    def upstream_topic(self, topic: str) -> str | None:
        return self._optional("upstreamTopic", topic)

    def original_topic(self, topic: str) -> str:
        return self._name("originalTopic", topic)

    def heartbeats_topic(self) -> str:
        return self._name("heartbeatsTopic")

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return self._name("offsetSyncsTopic", cluster_alias)

    def checkpoints_topic(self, source_alias: str) -> str:
        return self._name("checkpointsTopic", source_alias)

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self._test("isHeartbeatsTopic", topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return self._test("isCheckpointsTopic", topic)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return self._test("isMM2InternalTopic", topic)

    def is_internal_topic(self, topic: str) -> bool:
        return self._test("isInternalTopic", topic)

    def target_topic_names(self, source_alias: str, topics: Collection[str]
                           ) -> TargetTopicNames:
        """The names, computed here, of the topics the query reads (no other topic reaches
        it)."""
        return TargetTopicNames(names={t: self.format_remote_topic(source_alias, t)
                                       for t in sorted(topics)})


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value

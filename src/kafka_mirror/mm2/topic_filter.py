"""Which topics a flow mirrors: MM2's topic filter (``topics``, ``topics.exclude``) and its
defaults, from the rules shared with the Ansible collection (:mod:`kafka_mirror.mm2.rules`)."""

from kafka_mirror.mm2.rules import (
    DEFAULT_TOPICS_EXCLUDE,
    LEGACY_TOPICS_EXCLUDE,
    PRODUCT_TOPICS,
    TopicFilter,
)

__all__ = ["DEFAULT_TOPICS_EXCLUDE", "LEGACY_TOPICS_EXCLUDE", "PRODUCT_TOPICS", "TopicFilter"]

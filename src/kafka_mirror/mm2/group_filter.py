"""Which consumer groups a flow checkpoints: MM2's group filter (``groups``, ``groups.exclude``)
and its defaults, from the rules shared with the Ansible collection (:mod:`.rules`)."""

from kafka_mirror.mm2.rules import DEFAULT_GROUPS_EXCLUDE, GroupFilter

__all__ = ["DEFAULT_GROUPS_EXCLUDE", "GroupFilter"]

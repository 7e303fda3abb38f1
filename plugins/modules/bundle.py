#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: bundle
short_description: Verify a kafka.mirror release bundle and tell what it holds
version_added: 0.1.0
description:
  - Checks a release bundle built by C(scripts/build-bundle.sh) (a directory with C(SHA256SUMS) and
    C(bundle.json)) on the host running the module, normally the controller. Every file the manifest
    lists must exist with its sha256, and no other file may be there (the roles copy whole directories).
  - Returns the controller paths the roles install from (wheelhouse, kafka-mirror wheel, GSSAPI
    confluent-kafka wheels, connector jars, JMX exporter agent) and the bundle's version.
  - Fails naming the first file that is missing, differs or is not listed.
  - Read-only; it never changes anything, in check mode or not.
author:
  - kafka.mirror maintainers (@kafka-mirror)
attributes:
  check_mode:
    support: full
    description: Can run in check mode; the module is read-only.
  diff_mode:
    support: none
    description: Nothing is changed, there is no diff.
options:
  path:
    description:
      - The bundle's directory (C(kafka-mirror-bundle-<version>), or the C(kafka-mirror-bundle-current) link).
    type: path
    required: true
'''

EXAMPLES = r'''
- name: The release bundle is complete and unchanged
  kafka.mirror.bundle:
    path: /srv/kafka-mirror/kafka-mirror-bundle-0.1.0
  delegate_to: localhost
  run_once: true
  register: bundle
'''

RETURN = r'''
version:
  description: The bundle's version (the kafka-mirror release).
  returned: success
  type: str
  sample: 0.1.0
python:
  description: The Python tag the wheels were built for.
  returned: success
  type: str
  sample: cp311
wheelhouse:
  description: Directory of the kafka-mirror wheel and its dependencies.
  returned: success
  type: str
wheel:
  description: The kafka-mirror wheel.
  returned: success
  type: str
gssapi_wheels:
  description: confluent-kafka built with SASL GSSAPI (empty when the bundle was built without it).
  returned: success
  type: list
  elements: str
connector_jars_dir:
  description: Directory of Spark's Kafka connector jars.
  returned: success
  type: str
jmx_exporter_jar:
  description: The Prometheus JMX exporter agent.
  returned: success
  type: str
ansible_facts:
  description: C(kafka_mirror_bundle_verified), the path verified (set on the controller with C(delegate_facts)).
  returned: success
  type: dict
files:
  description: How many files were verified.
  returned: success
  type: int
  sample: 19
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kafka.mirror.plugins.module_utils.bundle import BundleError, describe, verify


def main():
    module = AnsibleModule(argument_spec=dict(path=dict(type='path', required=True)),
                           supports_check_mode=True)
    root = module.params['path'].rstrip('/') or '/'
    try:
        sums = verify(root)
    except BundleError as exc:
        module.fail_json(msg='release bundle refused: %s' % exc)
    # a fact of the host the module ran on (the controller, with delegate_facts): the roles check a
    # bundle once per run, not once per role and host
    module.exit_json(changed=False, ansible_facts={'kafka_mirror_bundle_verified': module.params['path']},
                     **describe(root, sums))


if __name__ == '__main__':
    main()

# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The release bundle of scripts/build-bundle.sh: its manifest (SHA256SUMS, sha256sum format) and
description (bundle.json), and the check that every file is the one the manifest names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

MANIFEST = 'SHA256SUMS'
DESCRIPTION = 'bundle.json'
# what the roles take from a bundle, relative to its directory
WHEELS = 'wheels'
GSSAPI_WHEELS = 'wheels-gssapi'
CONNECTOR_JARS = 'connector-jars'
JMX = 'jmx'


class BundleError(Exception):
    """A bundle that cannot be used; the message names the file."""


def read_manifest(text, path=MANIFEST):
    """{relative path: sha256 hex} of a SHA256SUMS text (``<hex>  <path>``, ``<hex> *<path>``)."""
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(None, 1)
        digest = parts[0].lower() if parts else ''
        if len(parts) != 2 or len(digest) != 64 or any(c not in '0123456789abcdef' for c in digest):
            raise BundleError('%s line %d is not "<sha256>  <file>": %r' % (path, number, line[:120]))
        name = parts[1].strip()
        if name.startswith('*'):
            name = name[1:]
        if name.startswith('/') or '..' in name.split('/'):
            raise BundleError('%s line %d names a file outside the bundle: %r' % (path, number, name))
        sums[name] = digest
    if not sums:
        raise BundleError('%s lists no file' % path)
    return sums


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def files_in(root):
    """Relative paths of every file under ``root`` but the manifest and the description."""
    found = []
    for directory, _subdirs, names in os.walk(root):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, '/')
            if relative not in (MANIFEST, DESCRIPTION):
                found.append(relative)
    return sorted(found)


def verify(root):
    """Check the bundle at ``root``: every file the manifest lists exists with its sha256, and no
    other file is there (the roles copy whole directories). Returns the manifest; raises
    :class:`BundleError` naming the first file that differs."""
    manifest_path = os.path.join(root, MANIFEST)
    if not os.path.isdir(root):
        raise BundleError('%s is not a directory (kafka_mirror_bundle_dir)' % root)
    try:
        with open(manifest_path, encoding='utf-8') as handle:
            sums = read_manifest(handle.read(), manifest_path)
    except (IOError, OSError) as exc:
        raise BundleError('%s cannot be read: %s (not a bundle of scripts/build-bundle.sh?)' % (manifest_path, exc))
    present = set(files_in(root))
    for name, digest in sorted(sums.items()):
        if name not in present:
            raise BundleError('%s: %s is listed in %s but missing' % (root, name, MANIFEST))
        actual = sha256_of(os.path.join(root, name))
        if actual != digest:
            raise BundleError('%s: %s has sha256 %s, %s says %s' % (root, name, actual, MANIFEST, digest))
    extra = sorted(present - set(sums))
    if extra:
        raise BundleError('%s: %s is not listed in %s' % (root, extra[0], MANIFEST))
    return sums


def describe(root, sums):
    """What the roles use from a verified bundle: its version and the controller paths."""
    try:
        with open(os.path.join(root, DESCRIPTION), encoding='utf-8') as handle:
            description = json.load(handle)
    except (IOError, OSError, ValueError):
        description = {}

    def under(directory, suffix=''):
        return sorted(os.path.join(root, name) for name in sums
                      if name.startswith(directory + '/') and name.endswith(suffix))

    wheels = [path for path in under(WHEELS, '.whl') if os.path.basename(path).startswith('kafka_mirror-')]
    jmx = under(JMX, '.jar')
    return {
        'version': description.get('version', ''),
        'python': description.get('python', ''),
        'wheelhouse': os.path.join(root, WHEELS),
        'wheel': wheels[-1] if wheels else '',
        'gssapi_wheels': under(GSSAPI_WHEELS, '.whl'),
        'connector_jars_dir': os.path.join(root, CONNECTOR_JARS),
        'jmx_exporter_jar': jmx[-1] if jmx else '',
        'files': len(sums),
    }

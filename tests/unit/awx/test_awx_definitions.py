# Copyright: kafka.mirror maintainers
# Apache License 2.0 (see LICENSE)
"""The AWX definitions of kafka.mirror as data (playbooks/vars/awx/): credential types, job templates
and surveys, checked against the collection itself. No controller involved."""

from __future__ import annotations

import os
import re

import jinja2
import jinja2.meta
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLAYBOOKS = os.path.join(ROOT, 'playbooks')
AWX_VARS = os.path.join(PLAYBOOKS, 'vars', 'awx')

# AWX's own names in injector templates: tower.filename (awx.filename in newer releases)
AWX_NAMESPACES = {'tower', 'awx'}
# injected variables that only kafka.mirror.awx_keytabs reads (documented in docs/awx.md)
AWX_ONLY_VARIABLES = {'kafka_mirror_awx_source_keytab_b64_file', 'kafka_mirror_awx_destination_keytab_b64_file'}
SECRET_WORDS = ('password', 'secret', 'key_pem', 'keytab', 'token')


class _Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """SafeLoader that reads Ansible's !unsafe tag as a plain string."""


_Loader.add_constructor('!unsafe', lambda loader, node: loader.construct_scalar(node))


def _load(path):
    with open(path, encoding='utf-8') as handle:
        return yaml.load(handle, Loader=_Loader)  # nosec B506 - a SafeLoader subclass


def _documented_variables():
    """Every role option (meta/argument_specs.yml, all entry points) and every variable named in
    docs/ansible.md (the playbooks' variables)."""
    names = set()
    roles = os.path.join(ROOT, 'roles')
    for role in sorted(os.listdir(roles)):
        spec = os.path.join(roles, role, 'meta', 'argument_specs.yml')
        if os.path.exists(spec):
            for entry in (_load(spec).get('argument_specs') or {}).values():
                names.update((entry.get('options') or {}).keys())
    with open(os.path.join(ROOT, 'docs', 'ansible.md'), encoding='utf-8') as handle:
        text = handle.read()
    names.update(re.findall(r'`(?:-e )?((?:kafka_mirror|mirror|spark|kafka_tools)_[a-z0-9_]+)', text))
    # mirror_<side>_... written once for both sides in docs/ansible.md
    for suffix in re.findall(r'`mirror_<side>(_[a-z0-9_]+)`', text):
        names.update(('mirror_source' + suffix, 'mirror_destination' + suffix))
    for suffix in re.findall(r'`(_[a-z0-9_]+)`', text):
        names.update(('mirror_source' + suffix, 'mirror_destination' + suffix))
    return names


DOCUMENTED = _documented_variables()
CREDENTIAL_TYPES = _load(os.path.join(AWX_VARS, 'credential_types.yml'))['kafka_mirror_awx_credential_types']
JOB_TEMPLATES = _load(os.path.join(AWX_VARS, 'job_templates.yml'))['kafka_mirror_awx_job_templates']


def _template_names(template):
    """Top-level names a Jinja2 template uses, and the tower.filename.<name> attributes it reads."""
    env = jinja2.Environment(autoescape=False)  # nosec B701 - parsed, never rendered
    ast = env.parse(template)
    names = jinja2.meta.find_undeclared_variables(ast)
    files = set()
    for node in ast.find_all(jinja2.nodes.Getattr):
        inner = node.node
        if isinstance(inner, jinja2.nodes.Getattr) and inner.attr == 'filename' and \
                isinstance(inner.node, jinja2.nodes.Name) and inner.node.name in AWX_NAMESPACES:
            files.add(node.attr)
    return names, files


def _injector_templates(injectors):
    for kind in ('env', 'extra_vars', 'file'):
        for key, value in (injectors.get(kind) or {}).items():
            yield kind, key, str(value)


@pytest.mark.parametrize('ctype', CREDENTIAL_TYPES, ids=lambda c: c['name'])
def test_credential_type_injectors_use_own_inputs(ctype):
    field_ids = {field['id'] for field in ctype['inputs']['fields']}
    files = {key.split('.', 1)[1] for key in (ctype['injectors'].get('file') or {}) if key.startswith('template.')}
    assert ctype['kind'] in ('cloud', 'net')
    assert set(ctype['inputs'].get('required', [])) <= field_ids
    used = set()
    for kind, key, template in _injector_templates(ctype['injectors']):
        names, file_refs = _template_names(template)
        unknown = names - field_ids - AWX_NAMESPACES
        assert not unknown, f'{ctype["name"]}: {kind}.{key} uses {sorted(unknown)}, not inputs of this type'
        assert file_refs <= files, f'{ctype["name"]}: {kind}.{key} reads files {sorted(file_refs - files)} it does not write'
        if kind == 'file':
            assert key.startswith('template.'), key
            assert not file_refs, 'a file template cannot name another file'
        used |= names
    assert field_ids <= used, f'{ctype["name"]}: inputs {sorted(field_ids - used)} are never injected'


@pytest.mark.parametrize('ctype', CREDENTIAL_TYPES, ids=lambda c: c['name'])
def test_credential_type_secrets_are_secret(ctype):
    for field in ctype['inputs']['fields']:
        if any(word in field['id'] for word in SECRET_WORDS):
            assert field.get('secret') is True, f'{ctype["name"]}: {field["id"]} must be secret'


@pytest.mark.parametrize('ctype', CREDENTIAL_TYPES, ids=lambda c: c['name'])
def test_credential_type_injects_documented_variables(ctype):
    for name in (ctype['injectors'].get('extra_vars') or {}):
        assert name in DOCUMENTED or name in AWX_ONLY_VARIABLES, f'{ctype["name"]}: {name} is no documented variable'
    assert not ctype['injectors'].get('env'), 'the collection reads no credential from the environment'


def test_keytab_injectors_match_the_decoding_play():
    """kafka.mirror.awx_keytabs decodes kafka_mirror_awx_<side>_keytab_b64_file into
    mirror_<side>_kerberos_keytab_src: both must come from the same injected file."""
    kerberos = [c for c in CREDENTIAL_TYPES if 'keytab_b64' in {f['id'] for f in c['inputs']['fields']}]
    assert {c['name'] for c in kerberos} == {'kafka.mirror source Kerberos', 'kafka.mirror destination Kerberos'}
    for ctype in kerberos:
        side = ctype['name'].split()[1]
        extra = ctype['injectors']['extra_vars']
        b64 = extra[f'kafka_mirror_awx_{side}_keytab_b64_file']
        assert extra[f'mirror_{side}_kerberos_keytab_src'] == b64.replace('}}', '}}.keytab')
    with open(os.path.join(PLAYBOOKS, 'awx_keytabs.yml'), encoding='utf-8') as handle:
        play = handle.read()
    assert "'kafka_mirror_awx_' ~ item ~ '_keytab_b64_file'" in play
    assert "'mirror_' ~ item ~ '_kerberos_keytab_src'" in play


def test_credential_type_names_are_unique():
    names = [c['name'] for c in CREDENTIAL_TYPES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize('template', JOB_TEMPLATES, ids=lambda t: t['name'])
def test_job_template_playbook_exists(template):
    path = os.path.join(PLAYBOOKS, template['playbook'])
    assert os.path.isfile(path), f'{template["name"]}: no playbook playbooks/{template["playbook"]}'
    for imported in re.findall(r'import_playbook: (\S+)', open(path, encoding='utf-8').read()):
        target = os.path.normpath(os.path.join(os.path.dirname(path), imported))
        assert os.path.isfile(target), f'{template["playbook"]} imports {imported}, which does not exist'
    assert template['job_type'] in ('run', 'check')


def test_job_templates_cover_the_playbooks():
    targets = {os.path.basename(t['playbook']) for t in JOB_TEMPLATES}
    assert {'site.yml', 'preflight.yml', 'topics.yml', 'rolling_restart.yml', 'uninstall.yml'} <= targets
    names = [t['name'] for t in JOB_TEMPLATES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize('template', JOB_TEMPLATES, ids=lambda t: t['name'])
def test_survey_variables_are_documented(template):
    if not template.get('survey_enabled'):
        return
    spec = template['survey_spec']
    assert spec['name'] and spec['spec']
    variables = [q['variable'] for q in spec['spec']]
    assert len(variables) == len(set(variables))
    for question in spec['spec']:
        assert question['variable'] in DOCUMENTED, f'{template["name"]}: survey variable {question["variable"]} is not documented'
        assert question['type'] in ('text', 'textarea', 'password', 'integer', 'float', 'multiplechoice', 'multiselect')
        assert isinstance(question['required'], bool)
        if question['type'] in ('multiplechoice', 'multiselect'):
            assert question['choices']
            if 'default' in question:
                assert question['default'] in question['choices']
        if question['type'] == 'integer' and 'default' in question:
            assert question['min'] <= question['default'] <= question['max']


def test_special_surveys():
    by_name = {t['name']: t for t in JOB_TEMPLATES}
    restart = {q['variable']: q for q in by_name['kafka.mirror rolling restart']['survey_spec']['spec']}
    assert restart['kafka_mirror_restart_serial']['type'] == 'integer'
    assert restart['kafka_mirror_restart_serial']['min'] >= 1
    uninstall = {q['variable']: q for q in by_name['kafka.mirror uninstall']['survey_spec']['spec']}
    confirm = uninstall['kafka_mirror_uninstall_confirm']
    assert confirm['required'] and confirm['default'] == 'false'
    assert by_name['kafka.mirror plan']['job_type'] == 'check'


def test_the_check_can_fail():
    """An undocumented variable is not taken for a documented one."""
    assert 'mirror_topics_text' not in DOCUMENTED
    assert 'kafka_mirror_restart_serial' in DOCUMENTED
    assert 'mirror_source_ssl_key_pem_src' in DOCUMENTED

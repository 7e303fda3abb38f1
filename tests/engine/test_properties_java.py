"""mm2.properties read as MirrorMaker 2 reads it: every key and value compared with what Java's
own ``java.util.Properties.load(InputStream)`` (Kafka's ``Utils.loadProps``) makes of the same
bytes, and config providers resolved as Kafka resolves them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mirror_client_probe import probe_classpath

from kafka_mirror.config.mm2 import load_mm2, mm2_from_text
from kafka_mirror.config.properties import read_properties_file
from kafka_mirror.errors import ConfigError
from kafka_mirror.jvm_artifacts import java_executable

TRICKY: dict[str, bytes] = {
    "latin1": b"# caf\xe9 in a comment\nname=caf\xe9\nclusters = A\n",
    "unicode-escapes": b"k=\\u0041\\u00e9\\u20ac\nkey\\u0020sp=v\n",
    "continuation": b"a=one \\\n   two\\\n\tthree\nb=x\\\n\n after=1\n",
    "separators": b"b : 2\nc 3\nd=\ne\n f:=g\nh  =  spaced  \n i\t\tj\n",
    "comments": b"! bang\n# hash\n   # indented\n\t! tab\nreal=1\n# ends with \\\nnext=2\n",
    "escapes": b"x=\\q\\z\\=\\:\\#\\!\nkey\\ with\\ space=v\nkey\\:colon=v2\nkey\\=eq=v3\n"
    b"tabs=a\\tb\\nc\\rd\\fe\n",
    "trailing-blanks": b"t=value   \nu=\\ \n",
    "duplicates": b"dup=1\nother=x\ndup=2\n",
    "line-endings": b"cr=1\rcrlf=2\r\nlf=3\nmixed=4\r\r\nlast=5",
    "backslashes": b"even=a\\\\\nodd=b\\\n c\nthree=d\\\\\\\n e\n",
    "eof-backslash": b"first=1\nlast=\\",
    "empty-and-blank": b"\n   \n\t\n",
    "key-only": b"alone\nalso:\n",
    "jaas": b'A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule '
    b'required \\\n    username="u" password="p\\\\w\\"x";\n',
}


def _java(path: Path) -> dict[str, str]:
    run = subprocess.run(
        [java_executable(), "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", probe_classpath(),
         "io.kafkamirror.probe.PropertiesDump", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    loaded: dict[str, str] = json.loads(run.stdout)
    return loaded


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_reader_agrees_with_java_properties(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.properties"
    path.write_bytes(TRICKY[name])
    assert read_properties_file(path).values == _java(path)


def test_duplicate_keys_warn_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes(b"clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                     b"A->B.enabled = true\ntopics = one\n\ntopics = two\n")
    config = load_mm2(path)
    assert config.flows[0].topic_filter.include == ("two",)
    assert any("'topics' is set on line 5 and again on line 7" in n for n in config.notices)


def test_malformed_unicode_escape_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_bytes(b"clusters=A\nx=\\u12G4\n")
    with pytest.raises(ConfigError) as err:
        load_mm2(path)
    assert str(path) in str(err.value) and "\\u" in str(err.value)


BASE = "clusters = A, B\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
PROVIDERS = (
    "config.providers = file, dir, env\n"
    "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
    "config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n"
    "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
)


def test_config_providers_resolve_every_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("bootstrap = a1:9092,a2:9092\npassword = s3cr\\\\et\n", encoding="utf-8")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "user").write_text("mirror", encoding="utf-8")
    monkeypatch.setenv("KM_TEST_TOPICS", "orders.*")
    config = mm2_from_text(
        BASE + PROVIDERS
        + f"A.bootstrap.servers = ${{file:{secrets}:bootstrap}}\n"
        + "topics = ${env:KM_TEST_TOPICS}\n"
        + "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n"
        + "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        + f'username="${{dir:{tmp_path / "dir"}:user}}" password="${{file:{secrets}:password}}";\n'
    )
    source = config.clusters["A"]
    assert source.bootstrap_servers == "a1:9092,a2:9092"
    assert config.flows[0].topic_filter.include == ("orders.*",)
    assert 'username="mirror" password="s3cr\\et";' in source.client["sasl.jaas.config"]


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("${file:/nonexistent/x.properties:bootstrap}", "cannot read /nonexistent/x.properties"),
        ("${vault:/x:y}", "config provider 'vault': not configured"),
        ("${env:KM_TEST_UNSET_VARIABLE}", "environment variable KM_TEST_UNSET_VARIABLE"),
    ],
)
def test_unresolvable_reference_names_key_and_provider(reference: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        mm2_from_text(BASE + PROVIDERS + f"A.bootstrap.servers = {reference}\n", "mm2.properties")
    message = str(err.value)
    assert "A.bootstrap.servers" in message and expected in message


def test_reference_without_providers_is_no_bootstrap_address() -> None:
    with pytest.raises(ConfigError) as err:
        mm2_from_text(BASE + "A.bootstrap.servers = ${file:/x.properties:b}\n")
    assert "not configured" in str(err.value)
    # elsewhere, text that merely looks like a reference stays (Kafka leaves it too)
    config = mm2_from_text(BASE + "A.bootstrap.servers = a:1\nA.ssl.key.password = ${x:y}\n")
    assert config.clusters["A"].client["ssl.key.password"] == "${x:y}"


def test_reference_to_a_provider_not_configured_stays_as_kafka_leaves_it(tmp_path: Path) -> None:
    """With providers configured, a password that holds text like a reference to another one is
    kept byte for byte (Kafka's ConfigTransformer skips providers it does not have)."""
    secrets = tmp_path / "s.properties"
    secrets.write_text("b = a:1\n", encoding="utf-8")
    config = mm2_from_text(BASE + PROVIDERS + f"A.bootstrap.servers = ${{file:{secrets}:b}}\n"
                           "A.ssl.key.password = p${vault:/x:y}w ${x:y}\n")
    assert config.clusters["A"].bootstrap_servers == "a:1"
    assert config.clusters["A"].client["ssl.key.password"] == "p${vault:/x:y}w ${x:y}"


def test_resolved_secrets_are_never_shown(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("factor = not-a-number-SECRET\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        mm2_from_text(BASE + PROVIDERS + "A.bootstrap.servers = a:1\n"
                      f"replication.factor = ${{file:{secrets}:factor}}\n")
    assert "SECRET" not in str(err.value)
    assert "replication.factor" in str(err.value)


def test_allowed_paths_restrict_the_file_provider(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("b = a:1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        mm2_from_text(BASE + PROVIDERS + "config.providers.file.param.allowed.paths = /etc/kafka\n"
                      f"A.bootstrap.servers = ${{file:{secrets}:b}}\n")
    assert "not under allowed.paths" in str(err.value)

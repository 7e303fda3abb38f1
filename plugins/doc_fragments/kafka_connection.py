# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Connection options, one set for the source and one for the destination cluster (same spec)."""

    DOCUMENTATION = r'''
options:
  timeout:
    description:
      - Timeout in seconds for each request to a cluster.
    type: int
    default: 30
  krb5_config:
    description:
      - Path of the C(krb5.conf) for C(GSSAPI) on the host that runs the module; it is set as
        E(KRB5_CONFIG) for C(kinit) and both Kafka client libraries.
      - Without it, E(KRB5_CONFIG) of the environment or the system default (C(/etc/krb5.conf)) is used.
    type: path
requirements:
  - confluent-kafka >= 2.6 on the host that runs the module
notes:
  - Secrets (O(source_sasl_password), O(destination_sasl_password), the key passwords) are
    marked C(no_log) and never appear in results, diffs or logs.
  - A cluster that refuses the credentials or whose certificate cannot be verified fails the module
    at once (not after O(timeout)), with a message naming the side (C(source cluster) or
    C(destination cluster)), its bootstrap servers, protocol, mechanism and user name.
  - For C(GSSAPI), the Kerberos client libraries and a C(krb5.conf) must be present on the host
    that runs the module; set O(krb5_config) (or E(KRB5_CONFIG)) when it is not at the default path.
'''

    SOURCE = r'''
options:
  source_bootstrap_servers:
    description:
      - Bootstrap servers of the source cluster, as C(host:port) entries.
    type: list
    elements: str
    required: true
  source_security_protocol:
    description:
      - Security protocol used to talk to the source cluster.
    type: str
    default: PLAINTEXT
    choices: [PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL]
  source_sasl_mechanism:
    description:
      - SASL mechanism for the source cluster. Required when O(source_security_protocol) is C(SASL_PLAINTEXT) or C(SASL_SSL).
      - C(PLAIN) and C(SCRAM-*) use O(source_sasl_username) and O(source_sasl_password).
      - C(GSSAPI) (Kerberos) uses O(source_kerberos_principal), O(source_kerberos_keytab) and O(source_kerberos_service_name).
      - C(OAUTHBEARER) gets tokens from an OIDC provider by the client credentials grant, with
        O(source_oauth_token_endpoint_url), O(source_oauth_client_id), O(source_oauth_client_secret) and O(source_oauth_scope).
    type: str
    choices: [PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER]
  source_sasl_username:
    description:
      - SASL user name for the source cluster (PLAIN and SCRAM).
    type: str
  source_sasl_password:
    description:
      - SASL password for the source cluster (PLAIN and SCRAM). Never logged.
    type: str
  source_oauth_token_endpoint_url:
    description:
      - The OIDC provider's token endpoint for the source cluster (C(OAUTHBEARER)), C(https://) or C(http://).
      - An C(https) endpoint is verified with O(source_ssl_ca_location) when it is set, else the system's CAs.
    type: str
  source_oauth_client_id:
    description:
      - The OAuth client ID for the source cluster (C(OAUTHBEARER)).
    type: str
  source_oauth_client_secret:
    description:
      - The OAuth client secret for the source cluster (C(OAUTHBEARER)). Never logged.
    type: str
  source_oauth_scope:
    description:
      - The scope asked for with the source cluster's tokens (C(OAUTHBEARER)), if the provider needs one.
    type: str
  source_kerberos_principal:
    description:
      - Kerberos principal used to authenticate to the source cluster with GSSAPI.
    type: str
  source_kerberos_keytab:
    description:
      - Path of the keytab holding O(source_kerberos_principal), on the host that runs the module.
      - Without it, the default credential cache (C(kinit)) is used.
    type: path
  source_kerberos_service_name:
    description:
      - Kerberos service name of the source brokers.
    type: str
    default: kafka
  source_ssl_ca_location:
    description:
      - CA bundle (PEM) used to verify the source brokers' certificates.
    type: path
  source_ssl_certificate_location:
    description:
      - Client certificate (PEM) for TLS client authentication to the source cluster.
    type: path
  source_ssl_key_location:
    description:
      - Client private key (PEM) for TLS client authentication to the source cluster.
    type: path
  source_ssl_key_password:
    description:
      - Password of O(source_ssl_key_location). Never logged.
    type: str
  source_ssl_check_hostname:
    description:
      - Verify that the source brokers' certificates match their host names.
    type: bool
    default: true
  source_client_properties:
    description:
      - Extra librdkafka client properties for the source cluster, passed through as they are.
    type: dict
    default: {}
'''

    DESTINATION = r'''
options:
  destination_bootstrap_servers:
    description:
      - Bootstrap servers of the destination cluster, as C(host:port) entries.
    type: list
    elements: str
    required: true
  destination_security_protocol:
    description:
      - Security protocol used to talk to the destination cluster.
    type: str
    default: PLAINTEXT
    choices: [PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL]
  destination_sasl_mechanism:
    description:
      - SASL mechanism for the destination cluster. Required when O(destination_security_protocol) is C(SASL_PLAINTEXT) or C(SASL_SSL).
      - C(PLAIN) and C(SCRAM-*) use O(destination_sasl_username) and O(destination_sasl_password).
      - C(GSSAPI) (Kerberos) uses O(destination_kerberos_principal), O(destination_kerberos_keytab) and O(destination_kerberos_service_name).
      - C(OAUTHBEARER) gets tokens from an OIDC provider by the client credentials grant, with
        O(destination_oauth_token_endpoint_url), O(destination_oauth_client_id), O(destination_oauth_client_secret) and O(destination_oauth_scope).
    type: str
    choices: [PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER]
  destination_sasl_username:
    description:
      - SASL user name for the destination cluster (PLAIN and SCRAM).
    type: str
  destination_sasl_password:
    description:
      - SASL password for the destination cluster (PLAIN and SCRAM). Never logged.
    type: str
  destination_oauth_token_endpoint_url:
    description:
      - The OIDC provider's token endpoint for the destination cluster (C(OAUTHBEARER)), C(https://) or C(http://).
      - An C(https) endpoint is verified with O(destination_ssl_ca_location) when it is set, else the system's CAs.
    type: str
  destination_oauth_client_id:
    description:
      - The OAuth client ID for the destination cluster (C(OAUTHBEARER)).
    type: str
  destination_oauth_client_secret:
    description:
      - The OAuth client secret for the destination cluster (C(OAUTHBEARER)). Never logged.
    type: str
  destination_oauth_scope:
    description:
      - The scope asked for with the destination cluster's tokens (C(OAUTHBEARER)), if the provider needs one.
    type: str
  destination_kerberos_principal:
    description:
      - Kerberos principal used to authenticate to the destination cluster with GSSAPI.
    type: str
  destination_kerberos_keytab:
    description:
      - Path of the keytab holding O(destination_kerberos_principal), on the host that runs the module.
      - Without it, the default credential cache (C(kinit)) is used.
    type: path
  destination_kerberos_service_name:
    description:
      - Kerberos service name of the destination brokers.
    type: str
    default: kafka
  destination_ssl_ca_location:
    description:
      - CA bundle (PEM) used to verify the destination brokers' certificates.
    type: path
  destination_ssl_certificate_location:
    description:
      - Client certificate (PEM) for TLS client authentication to the destination cluster.
    type: path
  destination_ssl_key_location:
    description:
      - Client private key (PEM) for TLS client authentication to the destination cluster.
    type: path
  destination_ssl_key_password:
    description:
      - Password of O(destination_ssl_key_location). Never logged.
    type: str
  destination_ssl_check_hostname:
    description:
      - Verify that the destination brokers' certificates match their host names.
    type: bool
    default: true
  destination_client_properties:
    description:
      - Extra librdkafka client properties for the destination cluster, passed through as they are.
    type: dict
    default: {}
'''

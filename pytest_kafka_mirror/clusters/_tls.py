"""A throw-away certificate authority and broker certificate for ``kafka:V,security=sasl_ssl``.

Generated with ``cryptography`` into the cluster's work dir, PEM only (Kafka reads PEM key
and trust stores since 2.7: ``ssl.keystore.type=PEM``): ``ca.pem`` (what clients trust,
librdkafka's ``ssl.ca.location``), ``broker.pem`` (the broker's unencrypted PKCS#8 key and
its certificate, signed by the CA, for 127.0.0.1 and localhost).  Key files are 0600.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from .._clientconf import write_private

__all__ = ["TlsFiles", "make_tls_files"]


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate (PEM)
    broker: Path  # the broker's private key + certificate chain (PEM), a Kafka PEM keystore


def make_tls_files(directory: str | os.PathLike[str], *, days: int = 7) -> TlsFiles:
    """A CA and a broker certificate for 127.0.0.1 / localhost in ``directory``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pytest-kafka-mirror test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                                  x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))

    pem = serialization.Encoding.PEM
    files = TlsFiles(ca=out / "ca.pem", broker=out / "broker.pem")
    write_private(files.ca, ca.public_bytes(pem), 0o644)
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private(files.broker, key_pem + cert.public_bytes(pem) + ca.public_bytes(pem), 0o600)
    return files

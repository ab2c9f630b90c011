"""Throwaway certificate authorities and certificates for TLS tests (``cryptography``)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """A CA and a server and a client certificate it signed, as PEM files."""

    ca: Path
    server: CertFiles
    client: CertFiles


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def make_pki(directory: Path, *, name: str = "spate-test") -> Pki:
    """Write ``ca.pem``, ``server.pem``/``server.key`` (for 127.0.0.1 and localhost) and
    ``client.pem``/``client.key`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{name} CA"))
        .issuer_name(_name(f"{name} CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / f"{name}-ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def leaf(cn: str, usage: x509.ObjectIdentifier) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        files = CertFiles(directory / f"{name}-{cn}.pem", directory / f"{name}-{cn}.key")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, files.key)
        return files

    return Pki(
        ca_path,
        leaf("server", ExtendedKeyUsageOID.SERVER_AUTH),
        leaf("client", ExtendedKeyUsageOID.CLIENT_AUTH),
    )

"""Throwaway certificate authorities for tests: a CA, a broker certificate, client certificates.

Made at test time with the `cryptography` package (pip install
kafkacompat[test]) into a directory of PEM files, so no key is ever
committed. Certificates cover 127.0.0.1 and localhost.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from typing import Any

DAY = datetime.timedelta(days=1)


def _crypto() -> Any:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise RuntimeError("TLS test brokers need the `cryptography` package: pip install 'kafkacompat[test]'") from exc
    return x509, hashes, serialization, ec, NameOID


@dataclasses.dataclass(frozen=True, slots=True)
class Issued:
    """PEM files of one certificate and its key."""

    certificate: str
    key: str


class CertificateAuthority:
    """A CA whose files live in `directory`; `issue()` signs server and client certificates."""

    def __init__(self, directory: str, name: str = "kafkacompat test CA") -> None:
        x509, hashes, serialization, ec, NameOID = _crypto()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (
            x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.location = os.path.join(directory, "ca.pem")
        with open(self.location, "wb") as fh:
            fh.write(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_name: str, subject: dict[str, str] | None = None, *, expired: bool = False,
              server: bool = False) -> Issued:
        """A certificate signed by this CA; `subject` maps RFC 2253 names (CN, OU, O, C) to values."""
        x509, hashes, serialization, ec, NameOID = _crypto()
        oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
                "C": NameOID.COUNTRY_NAME, "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME}
        subject = subject or {"CN": file_name}
        # certificate order is least specific first: C, ST, L, O, OU, CN (RFC 2253 prints it reversed)
        order = ["C", "ST", "L", "O", "OU", "CN"]
        name = x509.Name([x509.NameAttribute(oids[k], subject[k]) for k in order if k in subject])
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = (now - 10 * DAY, now - DAY) if expired else (now - DAY, now + 30 * DAY)
        builder = (
            x509.CertificateBuilder().subject_name(name).issuer_name(self._name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = Issued(os.path.join(self.directory, f"{file_name}.pem"),
                        os.path.join(self.directory, f"{file_name}.key"))
        with open(issued.certificate, "wb") as fh:
            fh.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(issued.key, "wb") as fh:
            fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
        return issued

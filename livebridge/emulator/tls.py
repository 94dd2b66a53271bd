"""An ephemeral certificate authority and the server/client SSL contexts built from it.

``trustme`` (a runtime dependency) creates a throwaway CA and a leaf certificate for 127.0.0.1
and localhost; nothing touches the system trust store.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True, slots=True)
class Certificates:
    """The CA's PEM file and the contexts that serve and trust it."""

    ca_file: Path
    server_context: ssl.SSLContext

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context that trusts only this CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))


def create_certificates(directory: Path) -> Certificates:
    """Create a CA and a leaf for 127.0.0.1 and localhost; write the CA PEM into ``directory``."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost", "::1")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(server_context)
    ca_file = directory / "livebridge-emulator-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return Certificates(ca_file=ca_file, server_context=server_context)

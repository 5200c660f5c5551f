"""L2 in real processes: reading a spec in a fresh interpreter imports no litellm, and
`--dry-run` names a provider typo with FILE:LINE.

Moved from tests/unit/test_spec_providers.py (the provider names are tested there).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import BIN, ROOT
from tests.support.specs import write_models

# Start-up is the subject: real new processes, never the warm launcher.
pytestmark = pytest.mark.fresh_process


def test_l2_reading_a_spec_does_not_import_litellm(tmp_path):
    path = write_models(tmp_path, "  - name: openai/smollm2\n    params: {api_base: http://x/v1}")
    code = (
        "import sys; from runner.experiment import load_spec; "
        f"load_spec({str(path)!r}); print('litellm' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_l2_dry_run_names_the_provider_typo(tmp_path):
    path = write_models(tmp_path, "  - opnai/smollm2")

    done = subprocess.run(
        [str(BIN), "run", str(path), "--dry-run"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert f"{path}:3: models[0].name: unknown litellm provider 'opnai'" in done.stderr
    assert "Traceback" not in done.stderr

"""errorflow calibrate against a real local model (SmolLM2-135M through llama.cpp's
OpenAI-compatible server, tests/llama_server.py): a few probes of three families, a
profile file whose measured parameters name the model, a replay of the recorded
cassette that gives the same estimates with no server, and `run contamination
--compare-real` with that profile. Slow (seconds a reply): two probes a family, three
trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.llama_server import LlamaServer, require_llama

FAMILIES = "transient,wrong_arg_with_options,failed_upstream"


def _calibrate(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "errorflow", "calibrate", *argv, "--probes", "2",
         "--families", FAMILIES, "--json"],
        capture_output=True, text=True, timeout=1200, env={**os.environ, "OPENAI_API_KEY": "local"},
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.llama
@pytest.mark.timeout(1800)
def test_calibrate_a_real_local_model(tmp_path: Path) -> None:
    python, gguf = require_llama()
    with LlamaServer(python, gguf, tmp_path) as server:
        spec = f"{{backend: openai, model: '{gguf}', base_url: '{server.url}', max_tokens: 256}}"
        done = _calibrate("--backend", "openai", "--model", str(gguf), "--base-url", server.url,
                          "--concurrency", "1", "--max-tokens", "256", "--model-timeout", "100",
                          "--out", str(tmp_path / "m.yaml"),
                          "--record", str(tmp_path / "c.json"))  # fmt: skip
        assert done.returncode == 0, done.stderr
        compared = subprocess.run(
            [sys.executable, "-m", "errorflow", "run", "contamination", "--trials", "3",
             "--set", f"agents.researcher.model={spec}", "--set", f"agents.writer.model={spec}",
             "--model-timeout", "100", "--compare-real", "--profile", str(tmp_path / "m.yaml"),
             "--json", "-q", "--db", str(tmp_path / "c.db")],
            capture_output=True, text=True, timeout=1200,
            env={**os.environ, "OPENAI_API_KEY": "local"},
        )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["compare_real"]
    assert rows["outcome contaminated"]["n"] == 3 and "writer contaminated" in rows
    found = json.loads(done.stdout)
    assert set(found) == {"p_self_retry_transient", "p_repair_with_options", "p_heed_upstream"}
    for est in found.values():
        assert est["probes"] + est["unclassified"] == 2
    profile = yaml.safe_load((tmp_path / "m.yaml").read_text())
    measured = [p["measured"] for p in profile["parameters"].values() if "measured" in p]
    assert measured and all(m["model"] == str(gguf) for m in measured)
    replay = _calibrate("--backend", f"replay:{tmp_path / 'c.json'}",
                        "--out", str(tmp_path / "r.yaml"))  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == found

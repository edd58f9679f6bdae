"""What loading the VLM layer costs a process that never calls a VLM.

Every run process, the sensor and the UI load the definitions; only a process that builds a client
needs the HTTP stack (``requests``, ``urllib3``) or the local model's (``torch``, ``transformers``).
``resources.vlm`` imports each client's module when it builds that client, and nothing else in the
graph imports them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("requests", "urllib3", "torch", "transformers")


def _loaded_after(statement: str) -> dict[str, bool]:
    code = f"import json, sys\n{statement}\nprint(json.dumps({{n: n in sys.modules for n in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_loading_the_definitions_loads_no_vlm_client_stack():
    assert _loaded_after("import argus_dagster.definitions") == {n: False for n in HEAVY}


def test_the_vlm_layer_without_its_clients_loads_no_client_stack():
    statement = ("import argus_dagster.vlm.protocol, argus_dagster.vlm.ledger, argus_dagster.vlm.priorities, "
                 "argus_dagster.vlm.parsing, argus_dagster.vlm.images, argus_dagster.vlm.slots, resources.vlm")
    assert _loaded_after(statement) == {n: False for n in HEAVY}


def test_building_the_http_client_loads_its_stack_and_not_the_local_models():
    statement = ("from resources.vlm import VlmResource\n"
                 "VlmResource(backend='openai', base_urls='http://127.0.0.1:9/v1', model='m').client()")
    loaded = _loaded_after(statement)
    assert (loaded["requests"], loaded["urllib3"], loaded["torch"], loaded["transformers"]) == (True, True, False, False)

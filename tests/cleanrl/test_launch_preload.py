"""The training process's start-up (``cleanrl_worker.launch``): a script that imports torch finds it
already imported with the garbage collector paused and frozen (``mosaic_core.child.preload``), the
collector back on; a script that does not (CleanRL's JAX ones) gets no torch."""

import subprocess
import sys

REPORT = """import gc, sys
print(gc.isenabled(), gc.get_freeze_count() > 0, "torch" in sys.modules, "torch._dynamo" in sys.modules)
"""


def _launched(tmp_path, source: str) -> str:
    script = tmp_path / "script.py"
    script.write_text(source + REPORT)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "cleanrl_worker.launch", str(script), "--"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_torch_script_starts_with_torch_preloaded_and_frozen(tmp_path):
    # Before the script's own import: its first line already finds torch and dynamo there.
    source = "import sys\nassert 'torch._dynamo' in sys.modules\nimport torch.nn as nn\n"
    assert _launched(tmp_path, source) == "True True True True"


def test_a_script_without_torch_gets_none(tmp_path):
    assert _launched(tmp_path, "import numpy\n") == "True False False False"


def test_preload_leaves_a_paused_collector_paused(tmp_path):
    code = "import gc; gc.disable(); from mosaic_core.child import preload; preload('json'); print(gc.isenabled())"
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr

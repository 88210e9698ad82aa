"""Start-up of the Beam worker processes of test_beam_pipeline's two-worker test.

Beam's ``multi_processing`` runner starts each worker with this process's
environment; the test puts this folder first on ``PYTHONPATH`` there. Python
imports one ``sitecustomize``: this one runs the suite's own
(``tests/unused_imports_site``), then imports what every worker's tasks import
anyway (TensorFlow, Beam, tfpack's steps), which the suite's site imports
with the cyclic garbage collector paused, then frozen out of its scans
(`tests/paused_imports.py`). Nothing a worker computes changes.
"""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "_tfpack_tests_unused_imports_site",
    pathlib.Path(__file__).resolve().parents[2] / "unused_imports_site" / "sitecustomize.py")
_spec.loader.exec_module(importlib.util.module_from_spec(_spec))

for _name in ("apache_beam", "tensorflow", "tfpack.engines.beam.steps"):
    importlib.import_module(_name)

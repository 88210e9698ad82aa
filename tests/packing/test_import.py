import subprocess
import sys


def test_importing_packing_does_not_import_tensorflow():
    code = (
        "import sys, tfpack.packing, tfpack.packing.algorithms, tfpack.packing.hosts\n"
        "import tfpack.datasets\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "print(heavy)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

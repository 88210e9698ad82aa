"""`tfpack.datasets.stdlib_modules`: the standard library's own modules, wherever
the import system would look instead."""

import importlib.machinery
import os
import sys
import sysconfig

from tfpack.datasets import stdlib_modules

STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])


def test_every_module_is_a_source_file_of_the_standard_library_folder():
    modules = stdlib_modules()
    names = [name for name, _, _ in modules]
    assert names == sorted(names)
    for name, path, is_package in modules:
        assert os.path.realpath(path).startswith(STDLIB + os.sep), (name, path)
        assert os.path.basename(path) == ("__init__.py" if is_package else f"{name}.py")
    # Python keeps these frozen: the import system reports no source file for them.
    assert {"os", "io", "abc", "codecs"} <= set(names)


class _Shadow:
    """A meta-path finder answering for `names` from outside the standard
    library, as setuptools' hook answers for "distutils"."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name in self.names:
            return importlib.machinery.ModuleSpec(name, None, origin=f"/elsewhere/{name}.py")
        return None


def test_an_installed_finder_does_not_change_the_modules(monkeypatch):
    expected = stdlib_modules()
    # The import system asks finders only for modules not imported yet.
    shadowed = {name for name, _, _ in expected if name not in sys.modules}
    assert shadowed
    monkeypatch.setattr(sys, "meta_path", [_Shadow(shadowed), *sys.meta_path])
    assert stdlib_modules() == expected

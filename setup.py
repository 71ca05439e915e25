"""Build script: the package, its bundled specs and the optional native decoder.

Project metadata lives in pyproject.toml. This file adds two things setuptools cannot express
there:

* kwire_cli/codec/_speedups.c (the plan interpreter) and kwire_cli/records/_native.c (the records
  fast path) are *optional* extensions: when one cannot be compiled (no compiler, no Python
  headers, an unsupported interpreter) the build warns and goes on, and kwire runs its pure-Python
  decoders. KWIRE_NO_EXTENSION=1 skips them on purpose.
* the repository's specs/ folder goes into wheels as kwire_cli/_bundled_specs (an editable install
  reads ../specs from the source tree instead; see kwire_cli/spec/registry.py bundled_folder()).
"""
import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class OptionalBuildExt(build_ext):
    """Build the extension if possible; never fail the install because of it."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # no compiler at all, and the like
            self._skip(e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:
            self._skip(e, ext.name)

    @staticmethod
    def _skip(e, name="the native decoders"):
        print(f"kwire: {name} (optional) was not built ({e}); "
              "kwire will use its pure-Python decoders", file=sys.stderr)


class BuildPyWithSpecs(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the source tree's specs/ is found next to kwire_cli/
        src = HERE / "specs"
        if not src.is_dir():
            return  # building from an sdist that already carries them under kwire_cli/
        dst = Path(self.build_lib) / "kwire_cli" / "_bundled_specs"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)


ext_modules = []
if os.environ.get("KWIRE_NO_EXTENSION", "") in ("", "0"):
    common = ["kwire_cli/native_common.h"]
    ext_modules.append(Extension("kwire_cli.codec._speedups", ["kwire_cli/codec/_speedups.c"], depends=common))
    ext_modules.append(Extension("kwire_cli.records._native", ["kwire_cli/records/_native.c"], depends=common))

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPyWithSpecs})

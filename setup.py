"""The optional compiled fast path (rmqstore.common.native): C extensions built when a compiler is here.

Everything else about the package is in pyproject.toml.  Each extension is optional, like
markupsafe's speedups: a build that fails (no compiler, no Python headers, another
platform) is reported and skipped, and the pure-Python path runs.  RMQSTORE_NO_EXT=1
skips the build on purpose (tests/unit/test_native_build.py builds a wheel that way).
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SRC = os.path.join("rmqstore", "_native")
HEADERS = [os.path.join(SRC, h) for h in ("crc32.h", "record.h", "step.h", "utf8.h")]
CFLAGS = ["-O3", "-std=c11", "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"]


def extension(name: str, source: str) -> Extension:
    return Extension(f"rmqstore._native.{name}", [os.path.join(SRC, source)], depends=HEADERS,
                     extra_compile_args=CFLAGS if sys.platform != "win32" else [])


class OptionalBuildExt(build_ext):
    """build_ext that lets an extension fail: the package then runs its pure-Python path."""

    def run(self):
        if os.environ.get("RMQSTORE_NO_EXT", "") not in ("", "0"):
            print("rmqstore: RMQSTORE_NO_EXT is set; not building the compiled fast path")
            return
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 -- no compiler at all: the pure path it is
            print(f"rmqstore: the compiled fast path was not built ({exc}); the pure-Python path runs")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"rmqstore: {ext.name} was not built ({exc}); its pure-Python path runs")


setup(
    ext_modules=[
        extension("_cwalk", "cwalk.c"),
        extension("_cput", "cput.c"),
        extension("_cdispatch", "cdispatch.c"),
        extension("_cdecode", "cdecode.c"),
        extension("_cwait", "cwait.c"),
        extension("_cframe", "cframe.c"),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)

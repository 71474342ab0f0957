"""Build glue: the package's version is the project's, read from the top-level CMakeLists.txt.

Everything else is declared in pyproject.toml. Building from the repository (pip install
./sdk/python) finds ../../CMakeLists.txt; an sdist carries the version in PKG-INFO and
pve_sandbox/_version.py, both written from it when it was made.
"""

import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def project_version() -> str:
    cmake = os.path.join(HERE, "..", "..", "CMakeLists.txt")
    if os.path.exists(cmake):
        with open(cmake, encoding="utf-8") as f:
            m = re.search(r"project\(\s*pve-sandbox\s+VERSION\s+([0-9][0-9.]*)", f.read())
        if m:
            return m.group(1)
    pkg_info = os.path.join(HERE, "PKG-INFO")
    if os.path.exists(pkg_info):
        with open(pkg_info, encoding="utf-8") as f:
            m = re.search(r"^Version: (\S+)$", f.read(), re.M)
        if m:
            return m.group(1)
    raise RuntimeError("pve-sandbox: no version (neither ../../CMakeLists.txt nor PKG-INFO)")


VERSION = project_version()


class BuildPy(build_py):  # type: ignore[misc]
    """Writes pve_sandbox/_version.py into the build, so an installed package knows it."""

    def run(self) -> None:
        super().run()
        target = os.path.join(self.build_lib, "pve_sandbox", "_version.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write(
                f'"""Written by setup.py from the project version."""\n\nVERSION = "{VERSION}"\n'
            )


setup(version=VERSION, cmdclass={"build_py": BuildPy})

"""The SDK's version: the project's, from the top-level CMakeLists.txt.

An installed package carries a copy of this module written by setup.py at build time; run from
the source tree (PYTHONPATH=sdk/python), it reads the CMakeLists.txt two levels up.
"""

import os
import re


def _from_tree() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    cmake = os.path.join(here, "..", "..", "..", "CMakeLists.txt")
    try:
        with open(cmake, encoding="utf-8") as f:
            m = re.search(r"project\(\s*pve-sandbox\s+VERSION\s+([0-9][0-9.]*)", f.read())
    except OSError:
        m = None
    return m.group(1) if m else "0+unknown"


VERSION = _from_tree()

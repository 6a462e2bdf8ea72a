"""Packaging glue: the top-level folders app/, engines/, views/ and assets/ install as ONE import
package, `inferlab` (`inferlab.app`, `inferlab.engines.kv`, ...), editable and not; firmware/
(the board firmware's C sources) installs as `inferlab.firmware`, package data only.

pyproject.toml holds everything else (the package data globs too); only the package list needs
code, so that a new subpackage is picked up without editing a list.
"""

from setuptools import find_packages, setup

ROOTS = ("app", "engines", "views", "assets")
DATA_ROOTS = ("firmware",)  # a package for its files: its subfolders are data, not packages

setup(
    packages=[f"inferlab.{name}" for name in find_packages(include=[f"{r}*" for r in ROOTS])]
    + [f"inferlab.{root}" for root in DATA_ROOTS],
    package_dir={f"inferlab.{root}": root for root in (*ROOTS, *DATA_ROOTS)},
)

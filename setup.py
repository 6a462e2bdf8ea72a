"""Packaging glue: the top-level folders app/, engines/, views/ and assets/ install as ONE import
package, `inferlab` (`inferlab.app`, `inferlab.engines.kv`, ...), editable and not.

pyproject.toml holds everything else; only the package list needs code, so that a new
subpackage is picked up without editing a list.
"""

from setuptools import find_packages, setup

ROOTS = ("app", "engines", "views", "assets")

setup(
    packages=[f"inferlab.{name}" for name in find_packages(include=[f"{r}*" for r in ROOTS])],
    package_dir={f"inferlab.{root}": root for root in ROOTS},
)

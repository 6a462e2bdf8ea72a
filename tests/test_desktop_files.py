"""The desktop entry and the AppStream metainfo in packaging/ pass the validators desktops and
software centres use (`desktop-file-validate`, `appstreamcli validate`) and agree with each
other and with the package. The validators come from Debian packages the Makefile's sysdeps
installs: a missing one is a failure naming the install command, never a skip."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESKTOP = ROOT / "packaging" / "inferlab.desktop"
METAINFO = ROOT / "packaging" / "dev.inferlab.InferLab.metainfo.xml"
TOOLS = {"desktop-file-validate": "desktop-file-utils", "appstreamcli": "appstream"}


def makefile_sys_packages() -> set[str]:
    """The Debian packages `make sysdeps` installs (every SYS_PKGS line, continuations too)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return {name for match in re.finditer(r"^SYS_PKGS\s*[:+]?=(.*)$", text, re.M)
            for name in match.group(1).split()}


def tool(name: str) -> str:
    package = TOOLS[name]
    assert package in makefile_sys_packages(), f"the Makefile's SYS_PKGS should list {package}"
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: `make sysdeps` as root, or `sudo apt-get "
                    f"install -y --no-install-recommends {package}`", pytrace=False)
    return path


def test_the_desktop_entry_validates():
    done = subprocess.run([tool("desktop-file-validate"), str(DESKTOP)], capture_output=True,
                          text=True, timeout=60)
    # Hints (style advice) are allowed; errors and warnings are not.
    problems = [line for line in done.stdout.splitlines() if ": hint:" not in line]
    assert done.returncode == 0 and problems == [], done.stdout + done.stderr


def test_the_metainfo_validates():
    # --no-net: nothing is fetched (this machine has no network); --strict: warnings fail too.
    done = subprocess.run([tool("appstreamcli"), "validate", "--no-net", "--strict",
                           str(METAINFO)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_metainfo_launches_the_desktop_entry_which_runs_the_command():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(DESKTOP, encoding="utf-8")
    # The console script's name (tomllib is not in Python 3.10, which the project supports).
    script = re.search(r"^\[project\.scripts\]\s*^(\S+)\s*=",
                       (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert entry["Desktop Entry"]["Exec"].split()[0] == script
    component = ET.parse(METAINFO).getroot()
    assert component.findtext("launchable[@type='desktop-id']") == DESKTOP.name
    assert component.findtext("provides/binary") == script
    assert component.findtext("id") == METAINFO.name.removesuffix(".metainfo.xml")

"""engines/board/emulator.py: QEMU's command line, missing tools, start and stop."""

from __future__ import annotations

import pytest

from inferlab.engines.board import toolchain
from inferlab.engines.board.emulator import Emulator, EmulatorError, find_qemu, free_port
from inferlab.engines.board.link import BoardLink
from inferlab.engines.board.toolchain import ToolMissing, install_command


def test_command_line(tmp_path):
    emu = Emulator(tmp_path / "fw.elf", qemu="/usr/bin/qemu-system-arm")
    cmd = emu.command(4321)
    assert cmd[:3] == ["/usr/bin/qemu-system-arm", "-M", "mps2-an386"]
    at = cmd.index("-serial")
    assert cmd[at + 1] == "tcp:127.0.0.1:4321,server=on,wait=on,nodelay=on"
    assert cmd[cmd.index("-monitor") + 1] == "none"
    assert cmd[cmd.index("-kernel") + 1] == str(tmp_path / "fw.elf")
    assert cmd[cmd.index("-icount") + 1] == "shift=5"
    assert "-icount" not in Emulator(tmp_path / "x", qemu="q", icount_shift=None).command(1)


def test_missing_qemu_names_the_exact_install_command(monkeypatch):
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(toolchain.shutil, "which",
                        lambda name: real_which(name) if name == "make" else None)
    with pytest.raises(ToolMissing) as exc:
        find_qemu()
    line = "apt-get install -y --no-install-recommends qemu-system-arm gcc-arm-none-eabi " \
           "libnewlib-arm-none-eabi"
    assert line in str(exc.value) and line in install_command()
    with pytest.raises(ToolMissing, match="arm-none-eabi-gcc"):
        toolchain.require_tools("qemu-mps2-an386")


def test_install_command_uses_sudo_unless_root(monkeypatch):
    monkeypatch.setattr(toolchain.os, "geteuid", lambda: 1000)
    assert install_command().startswith("sudo apt-get install")
    monkeypatch.setattr(toolchain.os, "geteuid", lambda: 0)
    assert install_command().startswith("apt-get install")


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_missing_image_is_an_error(tmp_path):
    with pytest.raises(EmulatorError, match="does not exist"):
        Emulator(tmp_path / "absent.elf").start()


def _need_qemu():
    try:
        find_qemu()
    except ToolMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def test_qemu_that_exits_is_reported_with_its_output(tmp_path):
    _need_qemu()
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"\x7fELF not really")
    with pytest.raises(EmulatorError, match="QEMU exited"):
        Emulator(bad, startup_timeout_s=10).start()


@pytest.mark.slow  # an arm-none-eabi build run on QEMU
def test_start_and_stop(tmp_path):
    _need_qemu()
    from tests.firmware.fwtools import model_path, need_tools

    need_tools("qemu-mps2-an386")
    build = toolchain.build_firmware(model_path("hello_world_int8"), "qemu-mps2-an386",
                                     out_dir=tmp_path / "fw")
    with Emulator(build.image) as emu:
        assert emu.running and emu.url.startswith("socket://127.0.0.1:")
        assert emu.info.model_sha256 == build.model_sha256
        with BoardLink(emu.url) as link:  # a second client after the HELLO probe
            assert link.hello().arena_bytes == build.arena_bytes
        process = emu.process
    assert not emu.running and process.poll() is not None

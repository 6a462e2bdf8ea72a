from inferlab.engines.hardware import cpu_info

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
cpu MHz\t\t: 2400.000
flags\t\t: fpu sse avx avx2 fma avx512f avx512_bf16 amx_tile

processor\t: 1
model name\t: something else
"""


def test_reads_the_first_processor(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    info = cpu_info.read_cpuinfo(str(path))
    assert cpu_info.cpu_name(info) == "AMD EPYC 9654 96-Core Processor"
    assert cpu_info.cpu_flags(info) == ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")


def test_missing_cpuinfo_falls_back(tmp_path):
    info = cpu_info.read_cpuinfo(str(tmp_path / "absent"))
    assert info == {}
    assert cpu_info.cpu_name(info)
    assert cpu_info.cpu_flags(info) == ()


def test_frequency_from_cpuinfo_when_psutil_has_none(monkeypatch):
    import psutil

    monkeypatch.setattr(psutil, "cpu_freq", lambda: None)
    assert cpu_info.cpu_freq_mhz({"cpu MHz": "2400.5"}) == 2400.5
    assert cpu_info.cpu_freq_mhz({}) is None

"""The model on CUDA (torch ops: the native kernels are CPU code) against the same model on the
CPU: logits, greedy decoding with and without the paged cache, the KV lab's run and the
`generate` command. `make test-gpu` runs them; without a GPU they are skipped.

Each check is a function of the device so that it can be tried on "cpu" where no GPU is lent
(`_check_*("cpu")` must pass too: the test's own code then runs, the CUDA path does not)."""

from __future__ import annotations

import json

import pytest
import torch

from inferlab.app.cli import main
from inferlab.engines.labs.kv.session import kv_run
from inferlab.engines.labs.kv.settings import KV_DEFAULTS
from inferlab.engines.model.generate import generate
from inferlab.engines.model.tiny import tiny_model

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

PROMPTS = [[1, 5, 9, 13, 2, 40], [7, 7, 3], [11]]
NEW_TOKENS = 12


def _check_logits_and_greedy(device: str) -> None:
    cpu, _ = tiny_model()
    dev, _ = tiny_model(device=device)
    assert dev.device.type == torch.device(device).type
    ids = torch.tensor(PROMPTS[0])
    # fp32 on both: CUDA's matmuls differ only in rounding order (TF32 is off by default)
    torch.testing.assert_close(dev.forward_nocache(ids).cpu(), cpu.forward_nocache(ids),
                               rtol=1e-4, atol=1e-4)
    for use_cache in (True, False):
        want = generate(cpu, PROMPTS, NEW_TOKENS, use_cache=use_cache)
        got = generate(dev, PROMPTS, NEW_TOKENS, use_cache=use_cache)
        assert [g.token_ids for g in got.generations] == \
            [g.token_ids for g in want.generations], f"use_cache={use_cache}"


def _check_kv_lab(device: str) -> None:
    settings = dict(KV_DEFAULTS, model="tiny", scenario="shared-prompt")
    cpu, cpu_records = kv_run(settings)
    dev, dev_records = kv_run(settings, device)
    assert dev.model.device.type == torch.device(device).type
    assert [r.paged.slots_reserved for r in dev_records] == \
        [r.paged.slots_reserved for r in cpu_records]
    assert {k: s.outputs for k, s in dev.seqs.items()} == \
        {k: s.outputs for k, s in cpu.seqs.items()}


def _check_generate_command(device: str, capsys) -> None:
    argv = ["generate", "--model", "tiny", "--prompt", "Hi", "--greedy", "--max-tokens", "8",
            "--json"]
    assert main(argv) == 0
    want = json.loads(capsys.readouterr().out)
    assert main([*argv, "--device", device]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["device"].startswith(torch.device(device).type)
    assert got["token_ids"] == want["token_ids"]


def test_the_model_decodes_on_cuda_as_on_the_cpu():
    _check_logits_and_greedy("cuda:0")


def test_the_kv_lab_runs_on_cuda_as_on_the_cpu():
    _check_kv_lab("cuda:0")


def test_generate_on_cuda_prints_the_cpu_tokens(capsys):
    _check_generate_command("cuda:0", capsys)

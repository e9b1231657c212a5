"""One simulated chip for directed tests from Python (docs/python.md, "tessera.chip").

    chip = tessera.chip.Chip(backend='rtl', array=4)
    a = chip.alloc(64); chip.write(a, np.arange(16, dtype=np.float32))
    prog = chip.load_program('''
        dma.load ...
        halt
    ''')
    report = chip.run(prog, max_cycles=100_000)   # cycles and PERF counters
    out = chip.read(a, 16, np.float32)

A fault raises tessera.DeviceFault with .name, .pc, .addr, .cycle; a run past max_cycles
raises tessera.DeviceTimeout saying what each unit was doing. waves() dumps the next run's
signals to an FST file (`tessera waves-layout FILE.fst` writes its GTKWave layout).
"""
import numpy as np

from tessera._core import core

CSR = dict(core.CSR)
PERF_NAMES = list(core.PERF_NAMES)


class Chip:
    def __init__(self, backend="functional", array=16, channels=1, arith="rtl"):
        self._dev = core.Device(backend, array, channels, arith)
        self.last_report = None
        self._hung = None  # the timeout's message once a run has timed out

    backend = property(lambda self: self._dev.backend)
    array = property(lambda self: self._dev.array)
    hbm_bytes = property(lambda self: self._dev.hbm_bytes)
    ub_bytes = property(lambda self: self._dev.ub_bytes)
    channels = property(lambda self: self._dev.channels)

    def assemble(self, text):
        """Assembly text (docs/isa.md) -> the program image; ValueError lists every error."""
        return core.assemble(text, self.array)

    def disassemble(self, image):
        return core.disassemble(bytes(image), self.array)

    def alloc(self, nbytes):
        return self._dev.alloc(int(nbytes))

    def free(self, addr):
        self._dev.free(addr)

    def load_program(self, program):
        """Assembly text or a program image (bytes) into HBM; returns its address."""
        image = self.assemble(program) if isinstance(program, str) else bytes(program)
        return self._dev.load_program(image)

    def write(self, addr, data):
        """Any numpy array (its bytes, little-endian as the host holds them) or bytes."""
        raw = np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray)) \
            else np.ascontiguousarray(data).view(np.uint8).ravel()
        self._dev.write(int(addr), raw)

    def read(self, addr, count, dtype=np.uint8):
        """`count` elements of `dtype` from HBM at addr."""
        dtype = np.dtype(dtype)
        return self._dev.read(int(addr), int(count) * dtype.itemsize).view(dtype).copy()

    def write_bf16(self, addr, values):
        """float values rounded to bf16 (nearest, ties to even) as the chip stores them."""
        self.write(addr, core.to_bf16(np.asarray(values, np.float32).ravel()))

    def read_bf16(self, addr, count):
        bits = self.read(addr, count, np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32)

    def csr(self, name_or_offset):
        off = CSR[name_or_offset] if isinstance(name_or_offset, str) else int(name_or_offset)
        return self._dev.csr_read(off)

    def run(self, program, max_cycles=10_000_000):
        """Runs a program (its address, its text or its image) to HALT. Returns the report:
        cycles (0 on the functional backend) and the PERF counters by name. A program given as
        text or image is loaded for this run and freed after it. After a DeviceTimeout the chip
        is still inside that program: further runs are refused (open a new Chip)."""
        if self._hung is not None:
            raise RuntimeError("Chip.run: an earlier run timed out and the chip is still in it "
                               f"({self._hung.splitlines()[0]}); open a new Chip")
        loaded = None if isinstance(program, int) else self.load_program(program)
        try:
            self.last_report = self._dev.run(program if loaded is None else loaded,
                                             int(max_cycles))
        except core.DeviceTimeout as e:
            self._hung = str(e)
            raise
        finally:
            if loaded is not None and self._hung is None:
                self._dev.free(loaded)
        return self.last_report

    def waves(self, path, cycles=None):
        """Dumps the next run's signals (rtl) for `cycles` (a range of cycles after the
        doorbell; default the whole run) into the FST file `path`."""
        begin, end = (0, 2**63) if cycles is None else (cycles.start, cycles.stop)
        self._dev.arm_waves(str(path), begin, end)

    def __repr__(self):
        return f"Chip({self.backend}, {self.array}x{self.array}, {self.hbm_bytes} B HBM)"

"""TPUClusterResolver: which simulated chips the program runs on.

TensorFlow's resolver finds a TPU by name; here `tpu` names the simulated system, as
comma-separated key=value options (every option also a keyword argument):

    backend   rtl | functional | sampled   (default rtl)
    chips     chips in the ring            (default 2; under mpirun: the ranks)
    array     the MXU's N                  (default 16; rtl: 4 or 16)
    arith     rtl | host                   (rtl backend's build; default host for the
                                            N = 16 one-channel chip, which has that build)
    channels  HBM pseudo-channels          (default 1)
    sample_every  sampled backend: every K-th step also on the rtl chip (default 20)
    threads   host threads for the rtl ring (default 0: one per chip, at most the cores)

`tpu=''` takes the TESSERA_TPU environment variable, else the defaults — the system `make train`
trains on (two N = 16 chips, rtl, host-arithmetic build). TESSERA_TPU lets a program written for a
real TPU run unchanged on another configuration: TESSERA_TPU=backend=functional,chips=1.
"""
import atexit
import os

from tessera._core import core

_mpi_started = []

_DEFAULTS = {"backend": "rtl", "chips": 2, "array": 16, "arith": "host", "channels": 1,
             "sample_every": 20, "threads": 0}
_INTS = ("chips", "array", "channels", "sample_every", "threads")


def _parse(spec, origin):
    opts = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if "=" not in part:
            raise ValueError(f"{origin}: '{part}' is not key=value (keys: {', '.join(_DEFAULTS)})")
        key, value = (s.strip() for s in part.split("=", 1))
        if key not in _DEFAULTS:
            raise ValueError(f"{origin}: unknown option '{key}' (keys: {', '.join(_DEFAULTS)})")
        if key in _INTS:
            try:
                value = int(value)
            except ValueError:
                raise ValueError(f"{origin}: {key}={value}: an integer") from None
        opts[key] = value
    return opts


class TPUClusterResolver:
    """The simulated TPU system: chips, array size, backend, arithmetic build, HBM channels."""

    def __init__(self, tpu=None, zone=None, project=None, **options):
        del zone, project  # (a cloud TPU's location: nothing to find here)
        spec = tpu if tpu else os.environ.get("TESSERA_TPU", "")
        origin = "TPUClusterResolver(tpu=...)" if tpu else "TESSERA_TPU"
        opts = dict(_DEFAULTS)
        given = _parse(spec, origin)
        opts.update(given)
        for key, value in options.items():
            if key not in _DEFAULTS:
                raise TypeError(f"TPUClusterResolver: unexpected keyword argument '{key}' "
                                f"(options: {', '.join(_DEFAULTS)})")
            opts[key] = value
            given[key] = value
        if "arith" not in given and (opts["array"] != 16 or opts["channels"] != 1):
            opts["arith"] = "rtl"  # the host-arithmetic build is the N = 16, 1-channel chip's
        if opts["backend"] not in ("rtl", "functional", "sampled"):
            raise ValueError(f"TPUClusterResolver: backend '{opts['backend']}': rtl, functional "
                             "or sampled")
        if opts["arith"] not in ("rtl", "host"):
            raise ValueError(f"TPUClusterResolver: arith '{opts['arith']}': rtl or host")
        if core.mpi_launched():
            if not _mpi_started:
                core.mpi_init()
                atexit.register(core.mpi_finalize)
                _mpi_started.append(True)
            if opts["backend"] != "rtl":
                raise ValueError("TPUClusterResolver: under mpirun each rank simulates one rtl "
                                 f"chip; backend '{opts['backend']}' runs every chip in one "
                                 "process: run it without mpirun")
            opts["chips"] = core.mpi_size()
        if opts["chips"] < 1:
            raise ValueError(f"TPUClusterResolver: chips={opts['chips']}: at least 1")
        if opts["backend"] in ("rtl", "sampled") and opts["array"] not in (4, 16):
            raise ValueError(f"TPUClusterResolver: array={opts['array']}: the rtl chip is built "
                             "for N = 4 and 16")
        self.options = opts
        self.initialized = False

    @property
    def task_id(self):
        """This process's rank under mpirun (0 otherwise): rank 0 prints and writes files."""
        return core.mpi_rank()

    @property
    def num_chips(self):
        return self.options["chips"]

    def num_accelerators(self):
        return {"TPU": self.options["chips"]}

    def master(self):
        o = self.options
        return (f"tessera://{o['backend']}/{o['chips']}x{o['array']}x{o['array']}"
                f"/arith={o['arith']}/channels={o['channels']}")

    def __repr__(self):
        return f"TPUClusterResolver({self.master()})"

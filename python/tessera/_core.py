"""The compiled extension (sw/python/): imported once, with a clear error when it is not built."""
try:
    import _tessera as core  # noqa: F401  (built into build/python/ by `make python`)
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "tessera: the _tessera extension is not built or not on the path (" + str(e) + "). "
        "Run `make python` in the Tessera checkout: it builds build/python/_tessera*.so and "
        "puts python/ and build/python/ on /usr/bin/python3's path (docs/python.md).") from e

DataError = core.DataError
CheckpointError = core.CheckpointError
DeviceFault = core.DeviceFault
DeviceTimeout = core.DeviceTimeout

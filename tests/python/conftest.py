"""The pytest suite of the Python face (docs/python.md, "Tests"); ctest runs each file
(CMakeLists.txt: Python.*). Run by hand: PYTHONPATH=python:build/python /usr/bin/python3 -m
pytest tests/python."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("TESSERA_BUILD", os.path.join(ROOT, "build"))
# (tests/reference: the project's independent readers, e.g. read_tfevents.py)
for p in (os.path.join(ROOT, "python"), os.path.join(BUILD, "python"),
          os.path.join(ROOT, "tests", "reference")):
    if p not in sys.path:
        sys.path.insert(0, p)
# Tests name their chips; a model built outside a scope gets one functional chip.
os.environ.pop("TESSERA_TPU", None)

TESSERA = os.path.join(BUILD, "bin", "tessera")


@pytest.fixture(scope="session")
def fashion():
    import tessera
    return tessera.keras.datasets.fashion_mnist.load_data()


@pytest.fixture(autouse=True)
def fresh_seed():
    import tessera
    tessera.keras.utils.set_random_seed(0)
    yield

"""Build of the compiled core (``segments/_native``); everything else is in ``pyproject.toml``.

Every ``segments/_native/*.pyx`` becomes an extension module compiled with the machine's C compiler and Python
headers, so installing the package (``make run`` / ``make test``) builds it: nothing prebuilt, nothing installed
by hand.
"""

from glob import glob
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE_DIR = "segments/_native"

extensions = [
    Extension(
        f"segments._native.{Path(source).stem}",
        [source],
        include_dirs=[NATIVE_DIR],
        extra_compile_args=["-O3"],
    )
    for source in sorted(glob(f"{NATIVE_DIR}/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True, "embedsignature": True},
    )
)

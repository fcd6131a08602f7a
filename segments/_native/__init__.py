"""The compiled core: Cython kernels for the byte-level hot loops of the format layer.

Built by the package's own build (``setup.py`` cythonizes every ``*.pyx`` here with the machine's C compiler and
Python headers); each kernel has one implementation, and the Python modules of ``segments`` call it. Kernels
check bounds on every read of input bytes, raise the format layer's typed errors, and release the GIL in their
long byte loops. ``*.pyi`` stubs give mypy the kernels' types.
"""

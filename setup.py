"""Build hook for the compiled diff matcher; all metadata lives in pyproject.toml.

The extension is optional so that an install on a machine without a C compiler still works:
`swerl.fastdiff` then falls back to the standard library's difflib (same results, slower) and warns once.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "swerl.fastdiff._matcher",
            sources=["swerl/fastdiff/_matcher.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        )
    ]
)

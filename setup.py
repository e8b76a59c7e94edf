"""Build hook for the compiled extensions; all metadata lives in pyproject.toml.

- `swerl.fastdiff._matcher`: the compiled diff matcher.
- `data_pipeline.context._tokencount`: the token estimate of `data_pipeline.context.tokens` in one C pass.

Both are optional so that an install on a machine without a C compiler still works: `swerl.fastdiff`
then falls back to the standard library's difflib (same results, slower) and warns once, and
`data_pipeline.context.tokens` counts with the regular expression that defines the estimate (same
counts; mining a real repository takes about twice as long).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "swerl.fastdiff._matcher",
            sources=["swerl/fastdiff/_matcher.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        Extension(
            "data_pipeline.context._tokencount",
            sources=["data_pipeline/context/_tokencount.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
    ]
)

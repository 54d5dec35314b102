"""The one compiled part: boxmaker.memoryd.index._rank (bm25 from known document frequencies; issue 16).

Optional: without a C compiler or SQLite's header (``sqlite3.h``, Debian's libsqlite3-dev) the build
of it is skipped with a warning and recall uses FTS5's own bm25(), which ranks the same, slower
(docs/decisions.md). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "boxmaker.memoryd.index._rank",
            sources=["src/boxmaker/memoryd/index/_rank.c"],
            libraries=["sqlite3"],
            extra_compile_args=["-O2", "-std=c99", "-Wall"],
            optional=True,
        )
    ]
)

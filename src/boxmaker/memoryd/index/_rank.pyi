"""Types of the compiled module `_rank.c` (see `ranker`)."""

from typing import Any

SQLITE_VERSION: str
LIBRARY_ADDRESS: int

class Ranker:
    def __init__(self, path: str, cache_kib: int = 4096, timeout_ms: int = 60000) -> None: ...
    def execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...
    def close(self) -> None: ...

from typing import Any

TEXT: int

def checkpoint_entries(data: bytes, version: int, kinds: tuple[int, ...]) -> list[tuple[Any, ...]] | None: ...

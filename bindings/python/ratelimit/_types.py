"""The type aliases the package's signatures use (re-exported by ratelimit)."""
from __future__ import annotations

import os
from typing import Any, Callable, List, Tuple, TypeVar, Union

F = TypeVar("F", bound=Callable[..., Any])
Seconds = Union[int, float]
Text = Union[str, bytes]
OneRate = Union[str, Tuple[int, Seconds]]
# one rate, "10/second;1000/hour", or several rates enforced together
Rate = Union[OneRate, List[OneRate], Tuple[OneRate, ...]]
FilePath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

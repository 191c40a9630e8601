"""How much memory the local index may use, and what follows from it.

The local engine (:mod:`provplug.index.local_engine`) keeps a few arrays per
value in memory and streams everything per triple in chunks, spilling to
scratch files. Its data therefore takes about ``BYTES_PER_VALUE`` a value
plus the chunk buffers, however many triples there are (beside the ~0.25
GiB of the interpreter and its libraries, which the budget does not count:
the default budget is a share of the memory still available once they are
loaded). The budget decides the chunk size and (``engine="auto"``) whether
the local engine runs at all or the build goes to Spark.

Pure Python on purpose: the command line parses ``--memory-budget`` with it
without loading NumPy.
"""

from __future__ import annotations

import os
import re

from provplug.errors import MemoryBudgetError as MemoryBudgetError

# Peak bytes per value of the local engine's per-value arrays (ids 8, table
# codes 2, component and set labels 4 + 4, split ids 2, flags 1, per-set and
# per-component triple counts 4 + 4, and the temporaries between rounds):
# 27 measured on the paper-shaped trace replicated 22 times (3.24 GiB peak
# for 100.1M values, less the interpreter and the chunks), 20 at 9x; rounded up.
BYTES_PER_VALUE = 32
# Bytes per triple row of a chunk in flight (input columns, index columns,
# the bucket-ordered copy, dense endpoints and masks); rounded up.
BYTES_PER_CHUNK_ROW = 256
# Chunks get this share of the budget, the per-value arrays the rest.
CHUNK_SHARE = 8
MAX_CHUNK_ROWS = 2 * 1024 * 1024
# Without a budget: this share of the memory available when the build starts.
DEFAULT_SHARE = 0.75

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"6G"``, ``"512MiB"``, ``"1.5g"``, ``"1000000"`` -> bytes (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise MemoryBudgetError(f"not a memory size: {text!r} (examples: 6G, 512M, 1.5GiB)")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size < 1:
        raise MemoryBudgetError(f"a memory budget must be at least one byte, not {text!r}")
    return size


def available_memory() -> int:
    """Memory this process can take without swapping: ``MemAvailable`` on
    Linux, else half the physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2


def default_budget() -> int:
    return int(available_memory() * DEFAULT_SHARE)


def chunk_rows(budget: int) -> int:
    """Triples per chunk: ``1/CHUNK_SHARE`` of the budget, at most ``MAX_CHUNK_ROWS``."""
    return max(1, min(MAX_CHUNK_ROWS, budget // CHUNK_SHARE // BYTES_PER_CHUNK_ROW))


def value_limit(memory_budget: int) -> int:
    """The most values whose arrays fit ``memory_budget`` beside the chunk buffers."""
    chunks = BYTES_PER_CHUNK_ROW * chunk_rows(memory_budget)
    return max(0, (memory_budget - chunks) // BYTES_PER_VALUE)

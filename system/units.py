"""Byte counts in words, the one way scenc prints them: 1536 -> '1.5 KiB'."""


def fmt_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB; one decimal above."""
    if n < 1024:
        return f"{int(n)} bytes" if n != 1 else "1 byte"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")

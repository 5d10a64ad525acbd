"""Characters a label value must not contain.

Unicode general categories Cc (controls, including C1), Cf (invisible
format characters: bidi overrides, zero-width characters, BOM, tags), Zl
and Zp. The table is the agent's (ingero-annotate/src/charclass.rs,
Unicode 15.1), copied rather than taken from ``unicodedata`` so that every
Python version agrees with the agent exactly; a test checks the copy.
"""

from __future__ import annotations

import re

# Inclusive code point ranges of category Cf (Unicode 15.1).
CF_RANGES = (
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)

# Inclusive ranges of categories Cc, Zl and Zp.
CC_ZL_ZP_RANGES = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x2028, 0x2028),
    (0x2029, 0x2029),
)


def char_class(ranges) -> str:
    """A regex character-class body matching the given code point ranges."""
    return "".join(
        re.escape(chr(lo)) if lo == hi else re.escape(chr(lo)) + "-" + re.escape(chr(hi))
        for lo, hi in ranges
    )


# One compiled class: scanning a value is a single C-level search.
FORBIDDEN_RE = re.compile("[" + char_class(CC_ZL_ZP_RANGES + CF_RANGES) + "]")

# Lone surrogates can exist in a Python str but not in UTF-8.
SURROGATE_RE = re.compile("[\ud800-\udfff]")


def is_forbidden_char(ch: str) -> bool:
    """Whether ``ch`` is in category Cc, Cf, Zl or Zp."""
    return FORBIDDEN_RE.match(ch) is not None

"""The weight formats and their byte formulas (DESIGN §4), as one table."""

from __future__ import annotations

import enum
from dataclasses import dataclass

K_ALIGN = 128  # K is padded to this for every format, so no kernel needs a K tail on W.


class QType(enum.Enum):
    """Packed weight format. Values are the CLI spellings."""

    Q4 = "q4"  # Q4G64_F16S
    Q5 = "q5"  # Q5G64_F16S
    Q6 = "q6"  # Q6G64_F16S
    W8 = "w8"  # W8G32_F16S
    NVFP4 = "nvfp4"
    BF16 = "bf16"  # BF16_CTRL

    @classmethod
    def parse(cls, value: str | QType) -> QType:
        if isinstance(value, QType):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(
                f"unknown qtype: expected one of {[q.value for q in cls]}, got {value!r}"
            ) from None


@dataclass(frozen=True)
class FormatSpec:
    """Byte accounting of one format. ``bytes_per_group`` counts every plane."""

    qtype: QType
    group: int  # weights sharing one scale; 0 for BF16
    bits: int  # code bits per weight
    bytes_per_group: int
    long_name: str

    @property
    def code_offset(self) -> int:
        """Integer formats store ``code = q + 2^(b-1)`` (unsigned) for Q4/Q5/Q6."""
        return 1 << (self.bits - 1) if self.qtype in (QType.Q4, QType.Q5, QType.Q6) else 0


FORMATS: dict[QType, FormatSpec] = {
    QType.Q4: FormatSpec(QType.Q4, 64, 4, 32 + 2, "Q4G64_F16S"),
    QType.Q5: FormatSpec(QType.Q5, 64, 5, 32 + 8 + 2, "Q5G64_F16S"),
    QType.Q6: FormatSpec(QType.Q6, 64, 6, 32 + 16 + 2, "Q6G64_F16S"),
    QType.W8: FormatSpec(QType.W8, 32, 8, 32 + 2, "W8G32_F16S"),
    QType.NVFP4: FormatSpec(QType.NVFP4, 16, 4, 8 + 1, "NVFP4_G16_E4M3S"),
    QType.BF16: FormatSpec(QType.BF16, 0, 16, 0, "BF16_CTRL"),
}


def align_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def k_padded(k: int) -> int:
    return align_up(k, K_ALIGN)


def weight_bytes(qtype: QType | str, n: int, k: int) -> int:
    """Bytes a kernel must read for the weight (DESIGN §4); gaps between planes excluded.

    NVFP4's single FP32 tensor scale is a kernel argument, not counted (as the seed).
    """
    qt = QType.parse(qtype)
    if n < 1 or k < 1:
        raise ValueError(
            f"weight shape must be positive: expected N >= 1 and K >= 1, got [{n},{k}]"
        )
    spec = FORMATS[qt]
    if qt is QType.BF16:
        return 2 * n * k
    groups = n * k_padded(k) // spec.group
    return groups * spec.bytes_per_group

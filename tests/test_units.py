import pytest

from llminfer import bytes_per_element, format_bytes
from llminfer.units import GB, GiB, format_duration


def test_bytes_per_element():
    dtypes = ["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
    assert [bytes_per_element(d) for d in dtypes] == [4, 2, 2, 1, 1, 0.5, 0.5]
    assert bytes_per_element("BF16") == 2


def test_unknown_dtype_lists_the_accepted_names():
    with pytest.raises(ValueError, match=r"dtype='int3'.*fp32, bf16, fp16, fp8, int8, int4, fp4"):
        bytes_per_element("int3")


def test_format_bytes_names_the_unit():
    assert format_bytes(GiB) == "1.00 GiB"
    assert format_bytes(140 * GB, binary=False) == "140.0 GB"
    assert format_bytes(16 * GiB) == "16.00 GiB"
    assert format_bytes(128 * 1024) == "128.0 KiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(-2 * GB, binary=False) == "-2.00 GB"
    with pytest.raises(ValueError, match="n='x'"):
        format_bytes("x")


def test_format_duration():
    assert format_duration(0.00479) == "4.79 ms"
    assert format_duration(2.5) == "2.5 s"
    assert format_duration(12e-6) == "12 µs"

import numpy as np
import pytest

from llminfer import bytes_per_element, format_bytes
from llminfer.units import GB, GiB, duration_unit, format_duration


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
    # large values keep plain seconds: issue 9 §4 "never 1.09e+04 s"
    assert format_duration(10_900) == "10,900 s"
    assert format_duration(999.4) == "999 s"
    assert format_duration(-2_500) == "-2,500 s"


def test_duration_unit_follows_the_median():
    # the article's chapter-6 log: TTFT 0.42/0.56/0.48 s → ms, E2E 3.10/4.21/2.52 s → s
    assert duration_unit([0.42, 0.56, 0.48]) == ("ms", 1e3)
    assert duration_unit([3.10, 4.21, 2.52]) == ("s", 1.0)
    # one long tail value does not change the unit of the body
    assert duration_unit([0.1, 0.2, 0.3, 11.2]) == ("ms", 1e3)
    assert duration_unit([12e-6, 30e-6, np.nan]) == ("µs", 1e6)
    assert duration_unit([]) == ("s", 1.0)
    assert duration_unit(0.0339) == ("ms", 1e3)
    with pytest.raises(ValueError, match="values_s="):
        duration_unit(["fast"])

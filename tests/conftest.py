"""Shared test settings.

Hypothesis runs derandomized (the same examples every run: the project seeds every random
generator) and without its per-example deadline: the suite runs on small shared machines where
a slow moment is not a failure of the code under test.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "llminfer",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("llminfer")

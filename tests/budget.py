"""How many examples a property test draws, chosen per test by what one example costs.

A pure-Python example (the reference processors) costs microseconds: most of those tests take
the profile's count (60 by default, 150 in CI). A Spark example runs micro-batches through the
runtime and costs a second or more: those tests name a small count. A test that names its own
count (a Spark test's few, a mutant search's thousands) writes it as `examples(n)`, which the
`long` profile multiplies for a thorough local run (`HYPOTHESIS_PROFILE=long ./tj test`,
hours). CI is derandomized: the examples are a function of the test, so a red CI run is red
again on any machine, and the failure prints the blob that replays it (`@reproduce_failure`).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
LONG_SCALE = 10


def register_profiles() -> None:
    settings.register_profile(
        "default", deadline=None, max_examples=60,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    base = settings.get_profile("default")
    settings.register_profile("ci", parent=base, max_examples=150, derandomize=True,
                              database=None, print_blob=True)
    settings.register_profile("long", parent=base, max_examples=60 * LONG_SCALE)
    settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """`n` examples, or `LONG_SCALE` times as many under the `long` profile."""
    return n * LONG_SCALE if PROFILE == "long" else n


def spark_examples(n: int) -> settings:
    """The settings of a property test whose examples run Spark on the shared session (a
    function-scoped fixture such as `spark` is safe to reuse across its examples)."""
    return settings(max_examples=examples(n), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def mutant_search(n: int) -> settings:
    """The settings of a search for a mutant's counterexample (`hypothesis.find`, which fails the
    test when it finds none within `n` examples). Derandomized on every profile: a random search
    misses now and then (the versioned store's `_NoReplace` mutant needed more than 2,000
    examples for 3 of 400 seeds), which made the default profile's run fail about once in a
    hundred. Only whether a counterexample exists matters, so nothing is shrunk or saved."""
    return settings(max_examples=examples(n), database=None, deadline=None, derandomize=True,
                    phases=[Phase.generate])

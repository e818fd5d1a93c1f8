"""The fuzz suite's one hypothesis profile: a modest number of examples, no deadline (a slow
example on a shared machine is not a failure), and no example database written into the
repository; hypothesis's other caches go to a temporary folder rather than ``.hypothesis/`` in the
working directory. ``KB_FUZZ_EXAMPLES`` raises the count for a longer local run."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:  # read by hypothesis on first use
    _storage = tempfile.mkdtemp(prefix="kb-fuzz-hypothesis-")
    atexit.register(shutil.rmtree, _storage, ignore_errors=True)
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = _storage

settings.register_profile(
    "kb-fuzz",
    max_examples=int(os.environ.get("KB_FUZZ_EXAMPLES", "60")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.load_profile("kb-fuzz")

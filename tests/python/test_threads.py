"""posenc.set_num_threads: counts outside [1, 1024] and a system that refuses
to start a worker are ValueError ("[threads] n = ..."), and the pool keeps
working afterwards (the next call gets a working pool, never a hang)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import posenc

SPEC = posenc.RopeSpec(head_dim=64)
X = np.random.default_rng(0).standard_normal((2, 40, 4, 64), dtype=np.float32)


@pytest.fixture
def restore_threads():
    before = posenc.num_threads()
    yield
    posenc.set_num_threads(before)


def check_pool_works():
    expected = posenc.reference.apply_rope(SPEC, X, offset=5, layout="bshd")
    np.testing.assert_allclose(posenc.apply_rope(SPEC, X, offset=5, layout="bshd"), expected, atol=1e-5)


@pytest.mark.parametrize("n", [0, -1, 1025, 10**6, 2**31, 2**40, 2**62])
def test_count_out_of_range(restore_threads, n):
    with pytest.raises(ValueError, match=rf"^\[threads\] n = {n}: must be"):
        posenc.set_num_threads(n)
    check_pool_works()
    posenc.set_num_threads(2)
    assert posenc.num_threads() == 2
    check_pool_works()


def test_counts_in_range(restore_threads):
    for n in (1, 3, 2):
        posenc.set_num_threads(n)
        assert posenc.num_threads() == n
        check_pool_works()


def test_worker_the_system_refuses_is_an_error_not_a_hang():
    # Address space for a few 8 MiB thread stacks only: starting 1024 workers
    # fails part way. Run in a child so the limit and any hang stay there.
    script = textwrap.dedent("""
        import resource
        import numpy as np
        import posenc

        x = np.ones((2, 64, 4, 64), np.float32)
        spec = posenc.RopeSpec(head_dim=64)
        expected = posenc.reference.apply_rope(spec, x, offset=3, layout="bshd")
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (vm + 96 * 2**20, hard))
        try:
            posenc.set_num_threads(1024)
        except ValueError as e:
            print("ERROR", e)
        else:
            print("NO ERROR")
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        assert np.allclose(posenc.apply_rope(spec, x, offset=3, layout="bshd"), expected, atol=1e-5)
        posenc.set_num_threads(2)
        assert posenc.num_threads() == 2
        assert np.allclose(posenc.apply_rope(spec, x, offset=3, layout="bshd"), expected, atol=1e-5)
        print("OK")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "OK"
    assert lines[0].startswith("ERROR [threads] n = 1024: "), lines[0]

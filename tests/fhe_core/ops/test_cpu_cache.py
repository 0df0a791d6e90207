"""FHE_CORE_CPU_CACHE_MB: the opt-in reuse of large CPU buffers (cpu/alloc.cpp).

Each check runs in a fresh interpreter because the cache is installed when the extension loads.
"""
import os
import subprocess
import sys
import textwrap

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

SCRIPT = textwrap.dedent("""
    import torch
    from fhe_core import ops  # loads the extension, which installs the cache
    from fhe_core.ring import RNSBasis, generate_primes

    def freed_block_comes_back(words):
        a = torch.empty(words, dtype=torch.int64).fill_(0x5A5A)
        ptr = a.data_ptr()
        del a
        b = torch.empty(words, dtype=torch.int64)
        return b.data_ptr() == ptr and bool((b == 0x5A5A).all())

    kept = freed_block_comes_back(2 << 20)        # 16 MiB: below the 64 MiB limit
    too_big = freed_block_comes_back(16 << 20)    # 128 MiB: above it, returned to the system
    n = 1 << 12
    basis = RNSBasis.get(generate_primes([60, 49, 40], n), n, "cpu")
    x = torch.randint(0, 2 ** 40, (3, n), dtype=torch.int64)
    round_trip = all(torch.equal(basis.intt(basis.ntt(x)), x) for _ in range(3))
    print(kept, too_big, round_trip)
""")


def run(env_value):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("FHE_CORE_CPU_CACHE_MB", None)
    if env_value is not None:
        env["FHE_CORE_CPU_CACHE_MB"] = env_value
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return out


def test_cache_keeps_blocks_up_to_its_limit():
    assert run("64") == ["True", "False", "True"]


def test_without_the_variable_large_blocks_go_back_to_the_system():
    """glibc unmaps blocks above its mmap threshold (at most 32 MiB): a new 128 MiB block is
    fresh, zero-filled memory, so the pattern written before the free is gone. (The 16 MiB
    case depends on glibc's dynamic threshold, so it is not asserted here.)"""
    assert run(None)[1:] == ["False", "True"]

"""Bounded fuzzing (hypothesis) of every reader of fhe_core.serialize: mutated valid records (some
re-sealed so the checks behind the checksum are reached) and random bytes give a
SerializationError or an object that round-trips, within the time and memory bounds of
tests/fuzz_targets.py. FHE_FUZZ_PROFILE=long (or FHE_FUZZ_EXAMPLES=n) runs more examples."""
from fuzz_targets import fuzz_test

test_fuzz_loads = fuzz_test("fhe_core.serialize.loads")
test_fuzz_loads_many = fuzz_test("fhe_core.serialize.loads_many")
test_fuzz_load_memory_mapped_file = fuzz_test("fhe_core.serialize.load")
test_fuzz_read_header = fuzz_test("fhe_core.serialize.read_header")
test_fuzz_peek = fuzz_test("fhe_core.serialize.peek")

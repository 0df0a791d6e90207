"""The service's own reader of raw upload bytes (the part-0 check of a key-set upload) under
bounded fuzzing (hypothesis; tests/fuzz_targets.py): an UnprocessableError, or acceptance only
of the start of an eval key set record of the declared parameters."""
from fuzz_targets import fuzz_test

test_fuzz_check_record_start = fuzz_test("server.uploads.check_record_start")

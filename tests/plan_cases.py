"""The kernel plans the tests compare (fhe_core.ops.KernelPlan): every choice gives the reference's words.

KERNEL_PLANS are the kernel choices an op can run with on CUDA: the reference kernels, the tuned ones with integer
butterflies (a context whose primes are all above 2^46 runs these), and the tuned ones with FP64 butterflies (the
default where a context has smaller primes). The CPU build has one implementation and ignores them.
"""
from fhe_core.ops import TUNED, KernelPlan

REFERENCE = KernelPlan.reference()
INTEGER = TUNED.replace(fp64_butterflies=False)
KERNEL_PLANS = {"reference": REFERENCE, "integer": INTEGER, "tuned": TUNED}

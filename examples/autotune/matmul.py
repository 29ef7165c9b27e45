"""A numpy program that multiplies matrices of three shapes, as a user's
script would: `tdg autotune` tunes the BLAS routine it calls (cblas_dgemm)
without a change to it or to numpy. Prints a checksum rounded to 9
significant digits: a tuned routine may add in another order."""
import sys

import numpy as np

scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
rng = np.random.default_rng(7)
shapes = [(256, 256, 256, 12), (96, 512, 96, 90), (512, 64, 256, 25)]
total = 0.0
for m, k, n, reps in shapes:
    a = rng.random((m, k))
    b = rng.random((k, n))
    for _ in range(max(1, int(reps * scale))):
        c = a @ b
        total += float(c.sum())
print(f"checksum {total:.9g}")

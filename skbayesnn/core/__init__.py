"""Method-independent Gaussian math on an array namespace (NumPy or CuPy)."""

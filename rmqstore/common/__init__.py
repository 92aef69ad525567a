"""What every layer uses: the error types, the configuration, the tracer and progress hooks, and the
switch between the compiled fast path and the pure one (native).
"""

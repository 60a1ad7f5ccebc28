"""The statistics and the rules that judge them: no onnxruntime, no pytest, no I/O."""

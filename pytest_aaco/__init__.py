"""pytest-aaco: performance-regression gate for ONNX Runtime models inside pytest.

AACO is the AMD AI Compute Observatory. Importing this package is cheap: onnxruntime,
scipy and GPU libraries are imported only when a benchmark needs them.
"""

__version__ = "0.1.0"

"""The model-zoo architectures of the registry's ``zoo:`` models, generated with seeded weights.

pytest-aaco's ``zoo:`` models first came from the onnx package's test data
(``onnx/backend/test/data/light/light_<name>.onnx``), which onnx is trimming. Each function here
builds the same graph in code with ``onnx.helper``: the same input and output names and shapes,
the same operators in the same order with the same attributes (opset 9, as those files), so the
compute cost is the same; only the weights differ. The light files fill every weight with a
``ConstantOfShape`` node (value 0.02); these get weights drawn from a seeded
``numpy.random.default_rng`` (He-normal convolutions, identity batch normalisation), stored as
initializers, so the outputs are finite and deterministic for a seed.

Architectures (all with input ``[1, 3, 224, 224]`` float32; the graphs are the Caffe2 exports of
the ONNX model zoo, https://github.com/onnx/models, that the light files were cut from):

* ``resnet50``: ResNet-50 v1 (stride on the 3x3 convolution), output ``gpu_0/softmax_1`` ``[1, 1000]``;
* ``squeezenet``: SqueezeNet 1.1, output ``softmaxout_1`` ``[1, 1000, 1, 1]``;
* ``densenet121``: DenseNet-121 (batch normalisation then a per-channel scale and bias),
  output ``fc6_1`` ``[1, 1000, 1, 1]``;
* ``inception_v1``: GoogLeNet (BVLC), output ``prob_1`` ``[1, 1000]``;
* ``shufflenet``: ShuffleNet v1, 4 groups, output ``gpu_0/softmax_1`` ``[1, 1000]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

#: the opset of the light files these graphs copy
ZOO_OPSET = 9
#: batch normalisation epsilon of the light files (float32 1e-5)
BN_EPSILON = 1e-5


class _Net:
    """A graph being built: nodes and seeded initializers, with the channel count tracked by the caller."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []
        self.count = 0

    def _name(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def const(self, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = f"w{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], output: str | None = None, outputs: int = 1, **attrs: Any) -> str:
        from onnx import helper

        out = output or self._name()
        names = [out] + [f"{out}.{i}" for i in range(1, outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, **attrs))
        return out

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = False, pads_attr: bool = True, output: str | None = None) -> str:
        fan_in = c_in // group * k * k
        w = (self.rng.standard_normal((c_out, c_in // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        inputs = [x, self.const(w)]
        if bias:
            inputs.append(self.const(np.zeros(c_out, np.float32)))
        attrs: dict[str, Any] = {"kernel_shape": [k, k], "strides": [stride, stride]}
        if pads_attr:
            p = k // 2 if pad is None else pad
            attrs["pads"] = [p] * 4
        if group > 1:
            attrs["group"] = group
        return self.node("Conv", inputs, output, **attrs)

    def bn(self, x: str, c: int, epsilon: bool = True) -> str:
        params = [np.ones(c, np.float32), np.zeros(c, np.float32), np.zeros(c, np.float32), np.ones(c, np.float32)]
        attrs: dict[str, Any] = {"epsilon": BN_EPSILON} if epsilon else {}
        return self.node("BatchNormalization", [x, *(self.const(p) for p in params)], **attrs)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def pool(self, op: str, x: str, k: int, stride: int, pads: list[int] | None = None) -> str:
        attrs: dict[str, Any] = {"kernel_shape": [k, k], "strides": [stride, stride]}
        if pads is not None:
            attrs["pads"] = pads
        return self.node(op, [x], **attrs)

    def fc(self, x: str, c_in: int, c_out: int, output: str | None = None) -> str:
        w = (self.rng.standard_normal((c_out, c_in)) * np.sqrt(1.0 / c_in)).astype(np.float32)
        return self.node("Gemm", [x, self.const(w), self.const(np.zeros(c_out, np.float32))], output, transB=1)

    def pooled_classifier(self, x: str, features: int) -> str:
        """The head of the Caffe2 exports (ResNet-50, ShuffleNet): 7x7 average pool, reshape to
        ``[1, features]``, a 1000-class fully connected layer, Softmax into ``gpu_0/softmax_1``."""
        x = self.pool("AveragePool", x, 7, 1)
        x = self.node("Reshape", [x, self.const(np.array([1, features], np.int64))])
        return self.node("Softmax", [self.fc(x, features, 1000)], "gpu_0/softmax_1")

    def model(self, name: str, feed: str, output: str, output_shape: list[int]) -> onnx.ModelProto:
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info(feed, TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)], initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ZOO_OPSET)],
                                  producer_name="pytest-aaco")
        model.ir_version = 4  # initializers need not be graph inputs (IR >= 4), so ONNX Runtime keeps them constant
        return model


def resnet50(seed: int = 0) -> onnx.ModelProto:
    """ResNet-50 as ``light_resnet50.onnx``: input ``gpu_0/data_0`` ``[1,3,224,224]``, output
    ``gpu_0/softmax_1`` ``[1,1000]``; 53 Conv (no bias), 53 BatchNormalization, 16 Sum. Seeded weights."""
    n = _Net(seed)
    x = n.relu(n.bn(n.conv("gpu_0/data_0", 3, 64, 7, stride=2), 64))
    x = n.pool("MaxPool", x, 3, 2, [1, 1, 1, 1])
    c_in = 64
    for stage, (mid, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        out = mid * 4
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            h = n.relu(n.bn(n.conv(x, c_in, mid, 1), mid))
            h = n.relu(n.bn(n.conv(h, mid, mid, 3, stride=stride), mid))
            h = n.bn(n.conv(h, mid, out, 1), out)
            shortcut = n.bn(n.conv(x, c_in, out, 1, stride=stride, pads_attr=False), out) if block == 0 else x
            x = n.relu(n.node("Sum", [h, shortcut]))
            c_in = out
    return n.model("resnet50", "gpu_0/data_0", n.pooled_classifier(x, 2048), [1, 1000])


def squeezenet(seed: int = 0) -> onnx.ModelProto:
    """SqueezeNet 1.1 as ``light_squeezenet.onnx``: input ``data_0`` ``[1,3,224,224]``, output
    ``softmaxout_1`` ``[1,1000,1,1]``; 26 Conv with bias, 8 fire modules. Seeded weights."""
    n = _Net(seed)
    x = n.pool("MaxPool", n.relu(n.conv("data_0", 3, 64, 3, stride=2, pad=0, bias=True)), 3, 2, [0] * 4)
    c_in = 64
    for index, (squeeze, expand) in enumerate(((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                               (64, 256), (64, 256))):
        s = n.relu(n.conv(x, c_in, squeeze, 1, bias=True))
        x = n.node("Concat", [n.relu(n.conv(s, squeeze, expand, 1, bias=True)),
                              n.relu(n.conv(s, squeeze, expand, 3, bias=True))], axis=1)
        c_in = 2 * expand
        if index in (1, 3):
            x = n.pool("MaxPool", x, 3, 2, [0] * 4)
    x = n.node("Dropout", [x], outputs=2, ratio=0.5)
    x = n.relu(n.conv(x, 512, 1000, 1, bias=True))
    x = n.node("Softmax", [n.node("GlobalAveragePool", [x])], "softmaxout_1")
    return n.model("squeezenet_old", "data_0", x, [1, 1000, 1, 1])


def densenet121(seed: int = 0) -> onnx.ModelProto:
    """DenseNet-121 as ``light_densenet121.onnx``: input ``data_0`` ``[1,3,224,224]``, output
    ``fc6_1`` ``[1,1000,1,1]``; every batch normalisation is followed by a per-channel scale
    (``Mul``) and bias (``Add``) from ``Unsqueeze``d vectors, as Caffe2 exported it. Seeded weights."""
    n = _Net(seed)

    def bn_scale_relu(x: str, c: int) -> str:
        y = n.bn(x, c)
        scale = n.node("Unsqueeze", [n.const(np.ones(c, np.float32))], axes=[1, 2])
        y = n.node("Mul", [y, scale])
        shift = n.node("Unsqueeze", [n.const(np.zeros(c, np.float32))], axes=[1, 2])
        return n.relu(n.node("Add", [y, shift]))

    x = bn_scale_relu(n.conv("data_0", 3, 64, 7, stride=2), 64)
    x = n.pool("MaxPool", x, 3, 2, [1, 1, 1, 1])
    c = 64
    for stage, layers in enumerate((6, 12, 24, 16)):
        for _ in range(layers):
            h = n.conv(bn_scale_relu(x, c), c, 128, 1, pad=0)
            h = n.conv(bn_scale_relu(h, 128), 128, 32, 3)
            x = n.node("Concat", [x, h], axis=1)
            c += 32
        if stage < 3:
            x = n.conv(bn_scale_relu(x, c), c, c // 2, 1, pad=0)
            c //= 2
            x = n.pool("AveragePool", x, 2, 2, [0] * 4)
    x = n.node("GlobalAveragePool", [bn_scale_relu(x, c)])
    x = n.conv(x, c, 1000, 1, pad=0, bias=True, output="fc6_1")
    return n.model("densenet121", "data_0", x, [1, 1000, 1, 1])


#: GoogLeNet's inception modules: 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection
_INCEPTION = {
    "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64), "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64), "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128),
}


def inception_v1(seed: int = 0) -> onnx.ModelProto:
    """GoogLeNet as ``light_inception_v1.onnx``: input ``data_0`` ``[1,3,224,224]``, output
    ``prob_1`` ``[1,1000]``; 57 Conv with bias, 2 LRN, 9 inception modules. Seeded weights."""
    n = _Net(seed)
    lrn: dict[str, Any] = {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}
    x = n.pool("MaxPool", n.relu(n.conv("data_0", 3, 64, 7, stride=2, bias=True)), 3, 2, [0] * 4)
    x = n.node("LRN", [x], **lrn)
    x = n.relu(n.conv(x, 64, 64, 1, bias=True))
    x = n.node("LRN", [n.relu(n.conv(x, 64, 192, 3, bias=True))], **lrn)
    x = n.pool("MaxPool", x, 3, 2, [0] * 4)
    c = 192
    for name, (b1, r3, b3, r5, b5, bp) in _INCEPTION.items():
        one = n.relu(n.conv(x, c, b1, 1, bias=True))
        three = n.relu(n.conv(n.relu(n.conv(x, c, r3, 1, bias=True)), r3, b3, 3, bias=True))
        five = n.relu(n.conv(n.relu(n.conv(x, c, r5, 1, bias=True)), r5, b5, 5, bias=True))
        proj = n.relu(n.conv(n.pool("MaxPool", x, 3, 1, [1, 1, 1, 1]), c, bp, 1, bias=True))
        x = n.node("Concat", [one, three, five, proj], axis=1)
        c = b1 + b3 + b5 + bp
        if name in ("3b", "4e"):
            x = n.pool("MaxPool", x, 3, 2, [0] * 4)
    x = n.pool("AveragePool", x, 7, 1, [0, 0, 1, 1])
    x = n.node("Reshape", [n.node("Dropout", [x], outputs=2, ratio=0.4), n.const(np.array([1, 1024], np.int64))])
    w = (n.rng.standard_normal((1, 1, 1000, 1024)) * np.sqrt(1.0 / 1024)).astype(np.float32)
    w2 = n.node("Reshape", [n.const(w), n.const(np.array([1000, 1024], np.int64))])
    x = n.node("Gemm", [x, w2, n.const(np.zeros(1000, np.float32))], transB=1)
    x = n.node("Softmax", [x], "prob_1")
    return n.model("inception_v1", "data_0", x, [1, 1000])


def shufflenet(seed: int = 0, groups: int = 4) -> onnx.ModelProto:
    """ShuffleNet v1 as ``light_shufflenet.onnx``: input ``gpu_0/data_0`` ``[1,3,224,224]``,
    output ``gpu_0/softmax_1`` ``[1,1000]``; stages of 136, 272 and 544 channels (4, 8 and 4
    units), group convolutions with a channel shuffle (Reshape, Transpose, Reshape). Seeded weights."""
    n = _Net(seed)
    x = n.relu(n.bn(n.conv("gpu_0/data_0", 3, 24, 3, stride=2, bias=True), 24, epsilon=False))
    x = n.pool("MaxPool", x, 3, 2, [1, 1, 1, 1])
    c, size = 24, 56
    for out, units in ((136, 4), (272, 8), (544, 4)):
        for unit in range(units):
            down = unit == 0
            mid = out - c if down else out
            h = n.relu(n.bn(n.conv(x, c, mid, 1, group=groups, pad=0), mid, epsilon=False))
            h = n.node("Reshape", [h, n.const(np.array([1, groups, mid // groups, size, size], np.int64))])
            h = n.node("Transpose", [h], perm=[0, 2, 1, 3, 4])
            h = n.node("Reshape", [h, n.const(np.array([1, mid, size, size], np.int64))])
            if down:
                size //= 2
            h = n.bn(n.conv(h, mid, mid, 3, stride=2 if down else 1, group=mid), mid, epsilon=False)
            h = n.bn(n.conv(h, mid, mid, 1, group=groups, pad=0), mid, epsilon=False)
            if down:
                x = n.relu(n.node("Concat", [h, n.pool("AveragePool", x, 3, 2, [1, 1, 1, 1])], axis=1))
            else:
                x = n.relu(n.node("Sum", [h, x]))
            c = out
    return n.model("shufflenet", "gpu_0/data_0", n.pooled_classifier(x, 544), [1, 1000])


#: ``zoo:`` names built in code, to their generator
ZOO_GENERATORS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet50": resnet50, "squeezenet": squeezenet, "densenet121": densenet121,
    "inception_v1": inception_v1, "shufflenet": shufflenet,
}

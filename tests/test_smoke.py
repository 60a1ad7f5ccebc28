"""--aaco-smoke: each session built, each model run once, outputs checked finite; no measurement,
no gate, no baseline written."""

from __future__ import annotations

from onnx import TensorProto, helper

from tests.conftest import save_test_model


def nan_model(path):
    """Y = (X - X) / (X - X): every output is NaN."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Sub", ["X", "X"], ["Z"]), helper.make_node("Div", ["Z", "Z"], ["Y"])],
                              "nan", [x], [y])
    return save_test_model(graph, path)


def test_smoke_runs_each_model_once_and_writes_nothing(aaco_project, monkeypatch):
    import onnxruntime as ort

    calls = []
    real_run = ort.InferenceSession.run

    def counting_run(self, *args, **kwargs):
        calls.append(1)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "run", counting_run)  # the run is in-process (pytester)
    result = aaco_project.run("--aaco-smoke", "--aaco-save-baseline", "--aaco-rounds=30", "--aaco-warmup=1000")
    assert len(calls) < 30, len(calls)  # not 1000 warmup iterations and 30 rounds: a count, not a clock
    result.assert_outcomes(passed=1)
    assert not (aaco_project.pytester.path / "baselines").exists()  # --aaco-save-baseline ignored
    assert "regression" not in result.stdout.str().lower()


def test_smoke_fails_an_item_whose_outputs_are_not_finite(aaco_project):
    nan_model(aaco_project.pytester.path / "nan.onnx")
    aaco_project.registry("""
        models:
          tiny:
            path: tiny.onnx
          nan:
            path: nan.onnx
    """)
    result = aaco_project.run("--aaco-smoke", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*nan[[]cpu[]]: output 'Y' has 4 of 4 values that are NaN or infinite*"])


def test_smoke_ini_twin(aaco_project):
    aaco_project.pytester.makeini("[pytest]\naaco_smoke = true\n")
    result = aaco_project.run()
    result.assert_outcomes(passed=1)

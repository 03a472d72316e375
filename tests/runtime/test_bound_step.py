"""An executor's subgraph step on fixed buffers (runtime.bound_step.BoundStep,
abi.loaded_model.BoundInference): once its model is loaded, a step whose inputs are
bound arguments and whose outputs are executor outputs on the device runs
as the plugin's infer() alone. These tests check that it is used and that
it gives what the general path gives (the CPU path is the oracle) through
everything that can change between forwards: new data, written weights,
close and reload, freed buffers, both engines."""

from __future__ import annotations

import numpy as np
import pytest
from support.conv_fc_net import bind as _bind
from support.conv_fc_net import image as _image
from support.conv_fc_net import weights as _weights

import acc_host as mx
from acc_host.abi.memory import DeviceBuffer
from acc_host.errors import InvalidArgumentError, TensorError
from acc_host.runtime.bound_step import BoundStep

RTOL, ATOL = 1e-4, 1e-5
ACCELERATORS = ["cpu_ref", "mlu"]


@pytest.mark.usefixtures("offload_everything", "engine_kind")
@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_bound_step_runs_and_follows_data_and_weights(accelerator: str) -> None:
    weights = _weights(0)
    exe, cpu = _bind(mx.Context(accelerator, 0), weights), _bind(mx.cpu(), weights)
    assert exe.plan.single_subgraph  # one subgraph, computing the executor outputs
    for seed in range(3):  # the first forward compiles, the others run bound
        image = _image(seed)
        np.testing.assert_allclose(exe.forward(data=image)[0].asnumpy(),
                                   cpu.forward(data=image)[0].asnumpy(), rtol=RTOL, atol=ATOL)
    (operator,) = exe.subgraphs
    bound = exe.bound_step(operator)
    assert isinstance(bound, BoundStep)
    # Written weights reach the model once, then the bound step runs again.
    for target in (exe, cpu):
        target.arg_dict["conv_weight"][:] = target.arg_dict["conv_weight"].asnumpy() * -2.0
        target.arg_dict["fc_bias"] += 1.0
    image = _image(7)
    for _ in range(2):
        np.testing.assert_allclose(exe.forward(data=image)[0].asnumpy(),
                                   cpu.forward(data=image)[0].asnumpy(), rtol=RTOL, atol=ATOL)
    assert operator.loads == 1 and operator.weight_refreshes == 1
    assert exe.bound_step(operator) is bound
    # Closed: the next forward loads the model again and binds anew.
    exe.close()
    for _ in range(2):
        np.testing.assert_allclose(exe.forward(data=image)[0].asnumpy(),
                                   cpu.forward(data=image)[0].asnumpy(), rtol=RTOL, atol=ATOL)
    assert operator.loads == 2
    exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_no_bound_step_where_another_step_reads_the_outputs() -> None:
    # cpu_ref declines float64 arithmetic: arcsinh runs on the CPU, reading
    # what the subgraph computes.
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=2, kernel=(1, 1), name="conv")
    net = mx.sym.Cast(mx.sym.arcsinh(mx.sym.Cast(conv, dtype="float64"), name="bent"),
                      dtype="float32")
    exe = net.simple_bind(mx.cpu_ref(0), data=(1, 2, 3, 3))
    cpu = net.simple_bind(mx.cpu(), data=(1, 2, 3, 3))
    weight = np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1)
    for target in (exe, cpu):
        target.arg_dict["conv_weight"][:] = weight
        target.arg_dict["conv_bias"][:] = 0.5
    image = _image(1)[:1, :2, :3, :3].copy()
    for _ in range(3):
        np.testing.assert_allclose(exe.forward(data=image)[0].asnumpy(),
                                   cpu.forward(data=image)[0].asnumpy(), rtol=RTOL)
    assert exe.placement()["conv"] == "cpu_ref(0)" and exe.placement()["bent"] == "cpu(0)"
    assert not exe.plan.single_subgraph
    assert exe.subgraphs and all(exe.bound_step(operator) is None for operator in exe.subgraphs)
    exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_bound_inference_refuses_freed_buffers_and_unloaded_models() -> None:
    exe = _bind(mx.cpu_ref(0), _weights(1))
    exe.forward(data=_image(0))[0].wait_to_read()
    (operator,) = exe.subgraphs
    model = operator.model
    spec_in = model.signature.data
    spec_out = model.signature.outputs
    library = operator.library
    inputs = {name: DeviceBuffer(library, 0, spec) for name, spec in spec_in.items()}
    outputs = {name: DeviceBuffer(library, 0, spec) for name, spec in spec_out.items()}
    for name, buffer in inputs.items():
        buffer.copy_from_host(_image(3).reshape(spec_in[name].shape))
    bound = model.bind(inputs, outputs)
    bound()
    expected = exe.forward(data=_image(3))[0].asnumpy()
    np.testing.assert_array_equal(next(iter(outputs.values())).to_host(), expected)
    with pytest.raises(InvalidArgumentError, match="do not match"):
        model.bind({}, outputs)
    with pytest.raises(TensorError, match="expected a DeviceBuffer"):
        model.bind({name: buffer.to_host() for name, buffer in inputs.items()}, outputs)
    next(iter(outputs.values())).free()
    with pytest.raises(TensorError, match="was freed"):
        bound()
    exe.close()
    with pytest.raises(InvalidArgumentError, match="unloaded"):
        bound()

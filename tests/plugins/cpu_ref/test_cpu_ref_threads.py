"""Two devices driven from two threads at once: each thread's models,
device memory and error messages stay its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import threading
    import numpy as np
    import acc_host as mx
    from acc_host.abi.annotate import annotate_symbol
    from acc_host.abi.memory import DeviceBuffer
    from acc_host.abi.loaded_model import LoadedModel
    from acc_host.abi.tensor import TensorSpec

    library = mx.get_library("cpu_ref")
    assert mx.test_utils.list_acc(mx.cpu_ref()) == [0, 1]
    total = mx.sym.elemwise_add(mx.sym.Variable("data"), mx.sym.Variable("w"), name="add")
    out = mx.sym.Activation(total, act_type="tanh", name="act")
    spec = TensorSpec((64, 64), np.float32)
    graph = annotate_symbol(out, {"data": (64, 64), "w": (64, 64)}, weights=["w"])
    failures = []

    def work(dev_id):
        try:
            rng = np.random.default_rng(dev_id)
            weight = rng.standard_normal((64, 64)).astype(np.float32)
            with LoadedModel(library, graph, {"w": weight}, dev_id) as model:
                for step in range(200):
                    data = rng.standard_normal((64, 64)).astype(np.float32)
                    result = model.infer({"data": data})["act_output"]
                    np.testing.assert_allclose(result, np.tanh(data + weight), rtol=1e-5,
                                               atol=1e-6)
                    buffer = DeviceBuffer(library, dev_id, spec)
                    buffer.copy_from_host(data)
                    np.testing.assert_array_equal(buffer.to_host(), data)
                    buffer.free()
                    try:
                        mx.Context("cpu_ref", dev_id).configure(query=f"nothing{dev_id}")
                    except mx.PluginError as error:
                        assert f"unknown query \\"nothing{dev_id}\\"" in str(error), error
        except Exception as error:  # reported by the main thread
            failures.append(repr(error))

    threads = [threading.Thread(target=work, args=(dev_id,)) for dev_id in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    for dev_id in (0, 1):
        assert mx.cpu_ref(dev_id).configure(query="memory")["allocations"] == "0"
    print("ok")
''')


def test_two_devices_from_two_threads() -> None:
    env = dict(os.environ, CPU_REF_NUM_DEVICES="2")
    env.pop("MXNET_ACC_LIBRARIES", None)
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok"

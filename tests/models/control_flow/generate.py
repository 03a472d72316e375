"""Makes the control-flow checkpoints of this folder with MXNet 1.9.1.

Run with the side environment's Python (MXNet 1.9.1, numpy < 1.24):
``/work/mxenv/bin/python tests/models/control_flow/generate.py``. Each model
is a symbol made with mx.sym.contrib.foreach / while_loop / cond, saved
with mx.model.save_checkpoint, with random weights (fixed seeds), input
cases and MXNet's own outputs for them (symbolic executor, inference):

* ``foreach_rnn``: an Elman RNN cell run by foreach over the sequence,
  h = tanh(FC(x) + FC(h)); outputs: every step's h, the last h.
* ``while_loop``: x = tanh(FC(x)) while i < limit (an input), at most
  max_iterations = 8 times; outputs: 2 * x of every step (MXNet leaves the
  rows past the last step unset: only the first ``steps`` rows are kept
  meaningful, see meta.json), the final i and x.
* ``cond``: FC(x, W1) then ReLU when sum(x) > 0, else -FC(x, W2).

Also ``built_*.json``: symbols MXNet builds with the same body functions
(every operator named), which acc_host's mx.sym.contrib must reproduce
byte for byte.
"""

import json
import os
import sys

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HIDDEN, FEATURES = 16, 8


def save(name, symbol, params, cases, notes):
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    arg_params = {key: mx.nd.array(value) for key, value in params.items()}
    mx.model.save_checkpoint(os.path.join(folder, "model"), 0, symbol, arg_params, {})
    meta = {"source": "tests/models/control_flow/generate.py", "writer": "mxnet " + mx.__version__,
            "expected_by": "mxnet symbolic executor, sym.bind(mx.cpu()), forward(is_train=False)",
            "outputs": symbol.list_outputs(), "cases": [], "notes": notes}
    for number, inputs in enumerate(cases):
        args = {key: mx.nd.array(value) for key, value in {**params, **inputs}.items()}
        executor = symbol.bind(mx.cpu(), args)
        outputs = [output.asnumpy() for output in executor.forward(is_train=False)]
        np.savez(os.path.join(folder, f"inputs_{number}.npz"), **inputs)
        np.savez(os.path.join(folder, f"expected_{number}.npz"),
                 **{f"output{k}": value for k, value in enumerate(outputs)})
        meta["cases"].append({"inputs": {key: list(value.shape) for key, value in inputs.items()},
                              "outputs": [list(value.shape) for value in outputs]})
        if name == "while_loop":
            meta["cases"][-1]["steps"] = int(outputs[1].reshape(-1)[0])
    with open(os.path.join(folder, "meta.json"), "w") as file:
        json.dump(meta, file, indent=1, sort_keys=True)


def foreach_rnn(rng):
    data, h0 = mx.sym.var("data"), mx.sym.var("h0")
    wx, bx, wh = mx.sym.var("wx"), mx.sym.var("bx"), mx.sym.var("wh")

    def step(x, states):
        ix = mx.sym.FullyConnected(x, weight=wx, bias=bx, num_hidden=HIDDEN, name="ix")
        hh = mx.sym.FullyConnected(states[0], weight=wh, no_bias=True, num_hidden=HIDDEN,
                                   name="hh")
        h = mx.sym.Activation(mx.sym.elemwise_add(ix, hh, name="sum"), act_type="tanh",
                              name="h")
        return h, [h]

    outputs, states = mx.sym.contrib.foreach(step, data, [h0])
    params = {"wx": rng.standard_normal((HIDDEN, FEATURES)) * 0.3,
              "bx": rng.standard_normal(HIDDEN) * 0.1,
              "wh": rng.standard_normal((HIDDEN, HIDDEN)) * 0.3}
    cases = [{"data": rng.standard_normal((length, 2, FEATURES)), "h0": np.zeros((2, HIDDEN))}
             for length in (6, 3)]
    cases.append({"data": rng.standard_normal((4, 2, FEATURES)),
                  "h0": rng.standard_normal((2, HIDDEN)) * 0.5})
    return mx.sym.Group([outputs] + states), params, cases, "T x N x C data, N x H state"


def while_loop(rng):
    i, x, limit = mx.sym.var("i"), mx.sym.var("x"), mx.sym.var("limit")
    w = mx.sym.var("w")

    def cond(i, x):
        return mx.sym.broadcast_lesser(i, limit, name="before_limit")

    def func(i, x):
        new_x = mx.sym.Activation(mx.sym.FullyConnected(x, weight=w, no_bias=True,
                                                        num_hidden=HIDDEN, name="fc"),
                                  act_type="tanh", name="new_x")
        return [mx.sym.elemwise_add(new_x, new_x, name="twice")], [
            mx.sym.elemwise_add(i, mx.sym.ones_like(i, name="one"), name="next_i"), new_x]

    outputs, states = mx.sym.contrib.while_loop(cond, func, [i, x], max_iterations=8)
    params = {"w": rng.standard_normal((HIDDEN, HIDDEN)) * 0.4}
    cases = [{"i": np.zeros(1), "x": rng.standard_normal((2, HIDDEN)), "limit": np.array([n])}
             for n in (5.0, 2.0, 8.0, 1.0)]
    return (mx.sym.Group(outputs + states), params, cases,
            "output 0 has max_iterations rows; rows at and past meta's steps are unset by MXNet")


def cond_model(rng):
    x, w1, w2 = mx.sym.var("x"), mx.sym.var("w1"), mx.sym.var("w2")
    positive = mx.sym.sum(x, name="total") > 0
    result = mx.sym.contrib.cond(
        positive,
        lambda: mx.sym.Activation(mx.sym.FullyConnected(x, weight=w1, no_bias=True,
                                                        num_hidden=HIDDEN, name="fc1"),
                                  act_type="relu", name="relu"),
        lambda: mx.sym.negative(mx.sym.FullyConnected(x, weight=w2, no_bias=True,
                                                      num_hidden=HIDDEN, name="fc2"),
                                name="neg"))
    params = {"w1": rng.standard_normal((HIDDEN, FEATURES)) * 0.3,
              "w2": rng.standard_normal((HIDDEN, FEATURES)) * 0.3}
    cases = [{"x": np.abs(rng.standard_normal((4, FEATURES)))},
             {"x": -np.abs(rng.standard_normal((4, FEATURES)))}]
    return result, params, cases, "then when sum(x) > 0"


def built():
    """Symbols of named bodies, for the construction test."""
    data, h0, w = mx.sym.var("data"), mx.sym.var("h0"), mx.sym.var("w")

    def step(d, states):
        fc = mx.sym.FullyConnected(d, weight=w, no_bias=True, num_hidden=4, name="fc")
        t = mx.sym.tanh(mx.sym.elemwise_add(fc, states[0], name="add"), name="t")
        return t, [t]

    outputs, states = mx.sym.contrib.foreach(step, data, [h0])
    texts = {"foreach": mx.sym.Group([outputs] + states).tojson()}
    i, a, b = mx.sym.var("i"), mx.sym.var("a"), mx.sym.var("b")
    outputs, states = mx.sym.contrib.while_loop(
        lambda i, a: mx.sym.broadcast_lesser(i, mx.sym.sum(b, name="sb"), name="lt"),
        lambda i, a: ([mx.sym.elemwise_mul(a, a, name="sq")],
                      [mx.sym.elemwise_add(i, mx.sym.ones_like(i, name="one"), name="inc"),
                       mx.sym.broadcast_add(a, b, name="ab")]),
        [i, a], max_iterations=6)
    texts["while_loop"] = mx.sym.Group(outputs + states).tojson()
    p, q = mx.sym.var("p"), mx.sym.var("q")
    result = mx.sym.contrib.cond(mx.sym.sum(p, name="ps") > 0,
                                 lambda: mx.sym.elemwise_mul(p, q, name="m"),
                                 lambda: [mx.sym.elemwise_sub(p, q, name="s")])
    texts["cond"] = (result if isinstance(result, mx.sym.Symbol)
                     else mx.sym.Group(result)).tojson()
    for name, text in texts.items():
        with open(os.path.join(HERE, f"built_{name}.json"), "w") as file:
            file.write(text)


def main():
    if not mx.__version__.startswith("1.9"):
        sys.exit(f"needs MXNet 1.9, this is {mx.__version__}")
    built()  # first: its automatic names count from 0, as in a new process
    for seed, (name, make) in enumerate((("foreach_rnn", foreach_rnn),
                                         ("while_loop", while_loop), ("cond", cond_model))):
        rng = np.random.RandomState(seed)
        symbol, params, cases, notes = make(rng)
        params = {key: np.asarray(value, np.float32) for key, value in params.items()}
        cases = [{key: np.asarray(value, np.float32) for key, value in case.items()}
                 for case in cases]
        save(name, symbol, params, cases, notes)


if __name__ == "__main__":
    main()

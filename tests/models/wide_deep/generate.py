"""Generates the wide-and-deep reference model with MXNet 1.9.1.

Run with the side environment that has MXNet (numpy < 1.24):
    /work/mxenv/bin/python tests/models/wide_deep/generate.py

The model: a CSR batch of 10,000 binary-ish features into FullyConnected
(the wide part), plus an Embedding of 3 categorical ids per row (a
row-sparse table: only the rows listed are stored) flattened into a 2-layer
MLP (the deep part); the two 2-way scores are summed. Weights are random
(fixed seeds). Writes model-symbol.json and model-0000.params with MXNet's
own save_checkpoint (the embedding table is saved as a row_sparse array),
io.npz with the inputs (csr_data.data/.indices/.indptr, cat_ids) and
MXNet's outputs (expected), and meta.json.
"""

import json
import os

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, FEATURES, DENSITY = 8, 10000, 0.01
VOCAB, EMBED, IDS, HIDDEN, CLASSES = 1000, 8, 3, 32, 2


def symbol():
    csr = mx.sym.Variable("csr_data", stype="csr")
    ids = mx.sym.Variable("cat_ids")
    table = mx.sym.Variable("emb_weight", stype="row_sparse")
    wide = mx.sym.FullyConnected(csr, num_hidden=CLASSES, name="wide")
    embedded = mx.sym.Embedding(ids, table, input_dim=VOCAB, output_dim=EMBED, name="emb")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.Flatten(embedded), num_hidden=HIDDEN,
                                                     name="deep1"), act_type="relu",
                               name="relu1")
    deep = mx.sym.FullyConnected(hidden, num_hidden=CLASSES, name="deep2")
    return mx.sym.elemwise_add(wide, deep, name="score")


def main():
    rng = np.random.RandomState(39)
    net = symbol()
    params = {
        "wide_weight": mx.nd.array(rng.randn(CLASSES, FEATURES).astype(np.float32) * 0.1),
        "wide_bias": mx.nd.array(rng.randn(CLASSES).astype(np.float32)),
        "deep1_weight": mx.nd.array(rng.randn(HIDDEN, IDS * EMBED).astype(np.float32) * 0.3),
        "deep1_bias": mx.nd.array(rng.randn(HIDDEN).astype(np.float32) * 0.1),
        "deep2_weight": mx.nd.array(rng.randn(CLASSES, HIDDEN).astype(np.float32) * 0.3),
        "deep2_bias": mx.nd.array(rng.randn(CLASSES).astype(np.float32) * 0.1),
    }
    rows = np.sort(rng.choice(VOCAB, 300, replace=False)).astype(np.int64)
    table = rng.randn(rows.size, EMBED).astype(np.float32)
    params["emb_weight"] = mx.nd.sparse.row_sparse_array((table, rows), shape=(VOCAB, EMBED))
    mx.model.save_checkpoint(os.path.join(HERE, "model"), 0, net, params, {})

    mask = rng.rand(BATCH, FEATURES) < DENSITY
    dense = np.where(mask, rng.rand(BATCH, FEATURES), 0).astype(np.float32)
    csr = mx.nd.sparse.csr_matrix(dense)
    ids = rng.randint(0, VOCAB, size=(BATCH, IDS)).astype(np.float32)
    ids[0, 0] = rows[0]  # at least one stored row and (most likely) absent ones
    args = dict(params, csr_data=csr, cat_ids=mx.nd.array(ids))
    exe = net.bind(mx.cpu(), args=args, grad_req="null")
    expected = exe.forward(is_train=False)[0].asnumpy()
    exe_dense = net.bind(mx.cpu(), args=dict(args, csr_data=mx.nd.array(dense),
                                             emb_weight=params["emb_weight"].tostype("default")),
                         grad_req="null")
    dense_out = exe_dense.forward(is_train=False)[0].asnumpy()
    np.savez(os.path.join(HERE, "io.npz"), csr_data_data=csr.data.asnumpy(),
             csr_data_indices=csr.indices.asnumpy(), csr_data_indptr=csr.indptr.asnumpy(),
             csr_data_shape=np.array(csr.shape, np.int64), cat_ids=ids, expected=expected)
    meta = {
        "writer": f"mxnet {mx.__version__} mx.model.save_checkpoint",
        "expected_by": f"mxnet {mx.__version__} Symbol.bind(cpu, CSR csr_data, row_sparse "
                       "emb_weight), forward(is_train=False)",
        "inputs": {"csr_data": {"stype": "csr", "shape": [BATCH, FEATURES],
                                "nnz": int(csr.data.shape[0])},
                   "cat_ids": {"stype": "default", "shape": [BATCH, IDS]}},
        "params": {"emb_weight": {"stype": "row_sparse", "shape": [VOCAB, EMBED],
                                  "stored_rows": int(rows.size)}},
        "outputs": [{"name": "score_output", "shape": list(expected.shape)}],
        "sparse_vs_dense_max_abs_diff": float(np.abs(expected - dense_out).max()),
        "tolerance": {"rtol": 1e-4, "atol": 1e-5},
    }
    with open(os.path.join(HERE, "meta.json"), "w") as out:
        json.dump(meta, out, indent=1, sort_keys=True)
        out.write("\n")
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()

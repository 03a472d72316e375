"""An MXNet 1.x evaluation loop: a checkpoint, an ImageRecordIter, Module.score.

    python evaluate_records.py MODULE CONTEXT REC PREFIX

MODULE is the package to use as mx (mxnet or acc_host: the only
difference between the two runs), CONTEXT a context name (cpu, cpu_ref,
mlu: device 0). Prints the metrics and the predictions as JSON.
"""

import importlib
import json
import sys

mx = importlib.import_module(sys.argv[1])
ctx = mx.cpu() if sys.argv[2] == "cpu" else getattr(mx, sys.argv[2])(0)
rec, prefix = sys.argv[3], sys.argv[4]

it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=1,
                           mean_r=123.0, mean_g=117.0, mean_b=104.0,
                           std_r=58.0, std_g=57.0, std_b=57.5)
mod = mx.mod.Module.load(prefix, 0, context=ctx)
mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label, for_training=False)
metrics = [mx.metric.Accuracy(), mx.metric.TopKAccuracy(top_k=2), mx.metric.CrossEntropy()]
score = mod.score(it, metrics)
predictions = mod.predict(it)
print(json.dumps({"score": [[name, float(value)] for name, value in score],
                  "predictions": predictions.asnumpy().tolist()}))

"""Operator cases for cpu_ref: (operator, attributes, input shapes)."""

from __future__ import annotations

from typing import Any

Case = tuple[str, dict[str, Any], list[tuple[int, ...]]]

CASES: list[Case] = [
    ("Convolution", {"kernel": (3, 3), "num_filter": 4}, [(2, 3, 7, 6), (4, 3, 3, 3), (4,)]),
    ("Convolution", {"kernel": (3, 2), "num_filter": 5, "stride": (2, 1), "pad": (1, 2),
                     "dilate": (2, 1)}, [(1, 3, 9, 8), (5, 3, 3, 2), (5,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 6, "num_group": 2, "pad": (1, 1)},
     [(1, 4, 5, 5), (6, 2, 3, 3), (6,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 4, "num_group": 4, "pad": (1, 1),
                     "stride": (2, 2)}, [(2, 4, 8, 8), (4, 1, 3, 3), (4,)]),
    ("Convolution", {"kernel": (1, 1), "num_filter": 3, "no_bias": True},
     [(1, 5, 4, 4), (3, 5, 1, 1)]),
    ("Convolution", {"kernel": (3,), "num_filter": 2, "pad": (1,), "stride": (2,)},
     [(2, 3, 10), (2, 3, 3), (2,)]),
    ("Convolution", {"kernel": (2, 2, 2), "num_filter": 2, "pad": (1, 0, 1)},
     [(1, 2, 4, 5, 3), (2, 2, 2, 2, 2), (2,)]),
    ("FullyConnected", {"num_hidden": 7}, [(3, 2, 2, 3), (7, 12), (7,)]),
    ("FullyConnected", {"num_hidden": 5, "flatten": False}, [(2, 3, 4), (5, 4), (5,)]),
    ("FullyConnected", {"num_hidden": 4, "no_bias": True}, [(1, 9), (4, 9)]),
    ("Activation", {"act_type": "relu"}, [(2, 3, 4)]),
    ("Activation", {"act_type": "sigmoid"}, [(2, 3, 4)]),
    ("Activation", {"act_type": "tanh"}, [(5, 7)]),
    ("Activation", {"act_type": "softrelu"}, [(5, 7)]),
    ("Activation", {"act_type": "softsign"}, [(5, 7)]),
    ("Pooling", {"kernel": (2, 2), "stride": (2, 2)}, [(2, 3, 6, 7)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": "avg",
                 "pooling_convention": "full"}, [(1, 2, 8, 8)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg",
                 "count_include_pad": False}, [(1, 2, 7, 7)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"},
     [(1, 2, 7, 7)]),
    ("Pooling", {"kernel": (2, 3), "stride": (1, 2), "pool_type": "sum"}, [(1, 3, 5, 7)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full",
                 "pad": (1, 1)}, [(1, 2, 6, 6)]),
    ("Pooling", {"global_pool": True, "kernel": (1, 1)}, [(2, 3, 5, 4)]),
    ("Pooling", {"global_pool": True, "pool_type": "avg", "kernel": (1, 1)}, [(2, 3, 5, 4)]),
    ("Pooling", {"kernel": (2,), "stride": (2,)}, [(2, 3, 9)]),
    ("Pooling", {"kernel": (2, 2, 2), "pool_type": "avg"}, [(1, 2, 3, 4, 5)]),
    ("BatchNorm", {"fix_gamma": False, "eps": 1e-5}, [(2, 3, 4, 5), (3,), (3,), (3,), (3,)]),
    ("BatchNorm", {}, [(2, 3, 4, 5), (3,), (3,), (3,), (3,)]),
    ("BatchNorm", {"axis": -1, "fix_gamma": False}, [(6, 4), (4,), (4,), (4,), (4,)]),
    ("elemwise_add", {}, [(2, 3, 4), (2, 3, 4)]),
    ("Flatten", {}, [(2, 3, 4, 5)]),
    ("Flatten", {}, [(4, 6)]),
    ("softmax", {}, [(3, 10)]),
    ("softmax", {"axis": 1}, [(2, 5, 3)]),
    ("softmax", {"axis": 0, "temperature": 2.5}, [(4, 3)]),
]


def case_id(case: Case) -> str:
    op, attrs, shapes = case
    details = ",".join(f"{key}={value}" for key, value in attrs.items())
    return f"{op}[{details}]{shapes[0]}"

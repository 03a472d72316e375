"""The partitioner: convex, deterministic segments, and subgraphs that
compute the same function as the graph they came from."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import acc_host as mx
from acc_host.ops import get as get_op
from acc_host.partition.segment import CPU, partition_graph, segment

ACC = 1


def _check_segments(num_nodes, predecessors, classes, segments) -> None:
    seen = [node for seg in segments for node in seg.nodes]
    assert sorted(seen) == list(range(num_nodes))  # every node exactly once
    position = {node: i for i, node in enumerate(seen)}
    segment_of = {node: k for k, seg in enumerate(segments) for node in seg.nodes}
    for seg in segments:
        assert {classes[node] for node in seg.nodes} == {seg.device_class}
    for node, preds in enumerate(predecessors):
        for pred in preds:
            # The segment order is a topological order of the partitioned
            # graph, so the quotient graph has no cycle and every segment is
            # convex.
            assert position[pred] < position[node]
            assert segment_of[pred] <= segment_of[node]
    for left, right in zip(segments, segments[1:]):
        assert left.device_class != right.device_class  # runs are maximal


def test_diamond_is_not_merged_into_a_cycle() -> None:
    #      A (acc)
    #     /      \
    #  B (cpu)   C (acc)
    #     \      /
    #      D (acc)
    # Merging D with {A, C} would need B inside the subgraph's past and
    # future at once.
    predecessors = [[], [0], [0], [1, 2]]
    classes = [ACC, CPU, ACC, ACC]
    segments = segment(4, predecessors, classes)
    assert [(seg.device_class, seg.nodes) for seg in segments] == [
        (ACC, (0, 2)), (CPU, (1,)), (ACC, (3,))]
    _check_segments(4, predecessors, classes, segments)


def test_independent_branches_share_one_subgraph() -> None:
    predecessors = [[], [], [0], [1], [2, 3]]
    classes = [ACC, ACC, ACC, ACC, CPU]
    segments = segment(5, predecessors, classes)
    assert [(seg.device_class, seg.nodes) for seg in segments] == [(ACC, (0, 1, 2, 3)),
                                                                    (CPU, (4,))]


@st.composite
def random_dags(draw):
    size = draw(st.integers(1, 60))
    predecessors = []
    for node in range(size):
        if node == 0:
            predecessors.append([])
            continue
        count = draw(st.integers(0, min(3, node)))
        predecessors.append(draw(st.lists(st.integers(0, node - 1), min_size=count,
                                          max_size=count)))
    classes = draw(st.lists(st.integers(0, 2), min_size=size, max_size=size))
    return size, predecessors, classes


@settings(max_examples=300, deadline=None)
@given(random_dags())
def test_segments_are_convex_and_deterministic(dag) -> None:
    size, predecessors, classes = dag
    segments = segment(size, predecessors, classes)
    _check_segments(size, predecessors, classes, segments)
    assert segments == segment(size, predecessors, classes)


# ---- same function -----------------------------------------------------------------

UNARY = [("Activation", {"act_type": "tanh"}), ("Activation", {"act_type": "sigmoid"}),
         ("_mul_scalar", {"scalar": 1.5}), ("_plus_scalar", {"scalar": -0.25})]


@st.composite
def random_symbols(draw):
    """A random graph of element-wise operators over two inputs, and a
    random set of node names an imaginary accelerator supports."""
    entries = [mx.sym.Variable("x"), mx.sym.Variable("y")]
    for number in range(draw(st.integers(1, 14))):
        if draw(st.booleans()):
            op, attrs = draw(st.sampled_from(UNARY))
            source = draw(st.sampled_from(entries))
            entries.append(getattr(mx.sym, op)(source, name=f"n{number}", **attrs))
        else:
            lhs, rhs = draw(st.sampled_from(entries)), draw(st.sampled_from(entries))
            entries.append(mx.sym.elemwise_add(lhs, rhs, name=f"n{number}"))
    outputs = draw(st.lists(st.sampled_from(entries[2:]), min_size=1, max_size=3))
    names = [entry.name for entry in entries[2:]]
    supported = draw(st.sets(st.sampled_from(names)))
    return mx.sym.Group(outputs), supported


def _run_partitioned(symbol, supported_names, values):
    """Executes the partition the way an executor does, with every
    subgraph run from its own extracted JSON on the CPU."""
    graph = symbol.graph
    shapes = graph.infer_shapes({name: value.shape for name, value in values.items()})
    dtypes = graph.infer_dtypes({})
    ids = [k for k, node in enumerate(graph.nodes) if node.name in supported_names]
    partition = partition_graph(graph, "sim", lambda _: ids, [0], shapes, dtypes, frozenset())
    subgraphs = {spec.nodes: spec for spec in partition.subgraphs}
    entries = {graph.entry_start[k]: values[node.name] for k, node in enumerate(graph.nodes)
               if node.is_variable}
    for seg in partition.segments:
        spec = subgraphs.get(seg.nodes)
        if spec is None:
            for k in seg.nodes:
                op, attrs = get_op(graph.nodes[k].op), graph.attrs[k]
                results = op.compute(attrs, [entries[e] for e in graph.input_entries(k)])
                entries.update(zip(range(graph.entry_start[k], graph.entry_start[k] + 1),
                                   results))
            continue
        sub = mx.sym.load_json(json.dumps(spec.graph))
        exe = sub.bind(mx.cpu(), {name: mx.nd.array(entries[entry])
                                  for name, entry in spec.inputs.items()})
        outputs = exe.forward()
        for name, output in zip(sub.list_outputs(), outputs):
            entries[spec.outputs[name]] = output.asnumpy()
    return [entries[graph.entry(node, output)] for node, output in graph.heads], partition


@settings(max_examples=150, deadline=None)
@given(random_symbols(), st.integers(0, 2 ** 31 - 1))
def test_partitioned_graph_computes_the_same_function(case, seed) -> None:
    symbol, supported = case
    rng = np.random.default_rng(seed)
    values = {name: rng.standard_normal((2, 3)).astype(np.float32)
              for name in symbol.list_arguments()}
    expected = symbol.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in values.items()}).forward()
    results, partition = _run_partitioned(symbol, supported, values)
    for result, reference in zip(results, expected):
        np.testing.assert_allclose(result, reference.asnumpy(), rtol=1e-6)
    accelerated = {symbol.graph.nodes[k].name for spec in partition.subgraphs
                   for k in spec.nodes}
    assert accelerated == supported & accelerated
    assert accelerated == {name for name in supported
                           if name in {node.name for node in symbol.graph.nodes}}


def test_views_of_a_partition() -> None:
    sym, _, _ = mx.model.load_checkpoint("tests/models/squeezenet1_1/model", 0)
    graph = sym.graph
    shapes = graph.infer_shapes({"data": (1, 3, 224, 224)})
    ids = [k for k, node in enumerate(graph.nodes) if node.op in ("Convolution", "Activation")]
    partition = partition_graph(graph, "convonly", lambda _: ids, [0], shapes,
                                graph.infer_dtypes({}), frozenset())
    assert len(partition.subgraphs) == 10
    summary = partition.summary().splitlines()
    assert summary[0].startswith("segment 0: convonly(0) subgraph 0")
    assert any("cpu(0)" in line and "Concat" in line for line in summary)
    document = partition.to_json()
    ops = [node["op"] for node in document["nodes"]]
    assert ops.count("_acc_subgraph") == 10 and "Convolution" not in ops
    first = next(node for node in document["nodes"] if node["op"] == "_acc_subgraph")
    assert first["subgraphs"][0]["nodes"][-1]["op"] == "Activation"
    dot = partition.to_dot()
    assert dot.startswith("digraph partition {") and dot.count("subgraph cluster_") == 20

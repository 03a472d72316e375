"""The forward's planner (acc_host.runtime.plan) on hand-built graphs and
partitions: no plugin is loaded, nothing is run or allocated."""

from __future__ import annotations

import acc_host as mx
from acc_host.graph import Graph
from acc_host.partition.segment import Partition, Segment, SubgraphSpec
from acc_host.runtime.plan import make_plan

CPU, ACC = 0, 1


def _chain() -> tuple[Graph, list[int], dict[str, int]]:
    """data -> fc -> relu -> tanh: the graph, its heads, each node's index by name."""
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    out = mx.sym.Activation(mx.sym.Activation(fc, act_type="relu", name="relu"),
                            act_type="tanh", name="tanh")
    graph = out.graph
    heads = [graph.entry(node, index) for node, index in graph.heads]
    return graph, heads, {node.name: k for k, node in enumerate(graph.nodes)}


def _entry(graph: Graph, k: int) -> int:
    return graph.entry_start[k]


def _spec(graph: Graph, index: int, nodes: tuple[int, ...], inputs: dict[str, int],
          outputs: dict[str, int]) -> SubgraphSpec:
    return SubgraphSpec(index, ACC, nodes, {"nodes": []}, inputs, outputs,
                        frozenset(name for name in inputs if name.startswith("fc_")))


def _partition(graph: Graph, segments: list[Segment], specs: list[SubgraphSpec]) -> Partition:
    return Partition(graph, tuple(segments), tuple(specs), "hand_made", (0,))


def test_cpu_only_plan_runs_each_operator_and_frees_after_last_reader() -> None:
    graph, heads, k = _chain()
    plan = make_plan(graph, None, heads)
    assert [step.node for step in plan.steps] == [k["fc"], k["relu"], k["tanh"]]
    assert all(step.subgraph is None and step.nodes == (step.node,) for step in plan.steps)
    fc, relu, tanh = (_entry(graph, k[name]) for name in ("fc", "relu", "tanh"))
    assert plan.steps[0].inputs == (_entry(graph, k["data"]), _entry(graph, k["fc_weight"]),
                                    _entry(graph, k["fc_bias"]))
    assert [step.outputs for step in plan.steps] == [(fc,), (relu,), (tanh,)]
    # fc's result is dropped once relu read it, relu's once tanh did; the
    # output and the arguments are never released.
    assert [step.release for step in plan.steps] == [(), (fc,), (relu,)]
    assert dict(plan.readers) == {fc: 1, relu: 1}
    assert dict(plan.producer) == {fc: 0, relu: 1, tanh: 2}
    assert plan.variables == {_entry(graph, k[name]): name
                              for name in ("data", "fc_weight", "fc_bias")}
    assert not plan.single_subgraph


def test_planned_memory_counts_intermediates_alive_at_once() -> None:
    graph, heads, _ = _chain()
    plan = make_plan(graph, None, heads)
    # fc's result (10 bytes) is alive with relu's: 20 at most; the output is
    # not an intermediate.
    assert plan.memory(lambda entry: 10) == (20, 20)


def test_a_branch_keeps_a_value_until_its_last_reader() -> None:
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    out = (mx.sym.Activation(fc, act_type="relu", name="relu")
           + mx.sym.Activation(fc, act_type="tanh", name="tanh"))
    graph = out.graph
    heads = [graph.entry(node, index) for node, index in graph.heads]
    plan = make_plan(graph, None, heads)
    fc_entry = _entry(graph, [node.name for node in graph.nodes].index("fc"))
    readers = [index for index, step in enumerate(plan.steps) if fc_entry in step.inputs]
    assert len(readers) == 2 and plan.readers[fc_entry] == 2
    assert [index for index, step in enumerate(plan.steps)
            if fc_entry in step.release] == [max(readers)]
    peak, total = plan.memory(lambda entry: 1)
    assert (peak, total) == (3, 3)  # fc, relu and tanh's results before the sum


def test_one_subgraph_covering_the_graph_is_a_single_subgraph_plan() -> None:
    graph, heads, k = _chain()
    nodes = (k["fc"], k["relu"], k["tanh"])
    inputs = {name: _entry(graph, k[name]) for name in ("data", "fc_weight", "fc_bias")}
    spec = _spec(graph, 0, nodes, inputs, {"tanh_output": heads[0]})
    plan = make_plan(graph, _partition(graph, [Segment(ACC, nodes)], [spec]), heads)
    (step,) = plan.steps
    assert step.subgraph is spec and step.nodes == nodes and step.node == k["fc"]
    assert step.inputs == tuple(inputs.values()) and step.outputs == tuple(heads)
    assert step.release == () and dict(plan.readers) == {}
    assert plan.single_subgraph


def test_a_single_subgraph_whose_outputs_are_not_all_executor_outputs_is_not_one_call() -> None:
    graph, heads, k = _chain()
    nodes = (k["fc"], k["relu"], k["tanh"])
    inputs = {name: _entry(graph, k[name]) for name in ("data", "fc_weight", "fc_bias")}
    extra = _spec(graph, 0, nodes, inputs, {"relu_output": _entry(graph, k["relu"]),
                                            "tanh_output": heads[0]})
    partition = _partition(graph, [Segment(ACC, nodes)], [extra])
    assert not make_plan(graph, partition, heads).single_subgraph
    # An executor output that is an argument is copied by an operation of its own.
    spec = _spec(graph, 0, nodes, inputs, {"tanh_output": heads[0]})
    partition = _partition(graph, [Segment(ACC, nodes)], [spec])
    assert not make_plan(graph, partition, [*heads, inputs["data"]]).single_subgraph
    # The same output twice: one buffer cannot be two executor outputs.
    assert not make_plan(graph, partition, [*heads, *heads]).single_subgraph


def test_cpu_subgraph_cpu_plan() -> None:
    graph, heads, k = _chain()
    fc, relu = _entry(graph, k["fc"]), _entry(graph, k["relu"])
    spec = _spec(graph, 0, (k["relu"],), {"fc": fc}, {"relu_output": relu})
    partition = _partition(graph, [Segment(CPU, (k["fc"],)), Segment(ACC, (k["relu"],)),
                                   Segment(CPU, (k["tanh"],))], [spec])
    plan = make_plan(graph, partition, heads)
    assert [(step.node, step.subgraph) for step in plan.steps] == [
        (k["fc"], None), (k["relu"], spec), (k["tanh"], None)]
    assert plan.steps[1].inputs == (fc,) and plan.steps[1].outputs == (relu,)
    assert [step.release for step in plan.steps] == [(), (fc,), (relu,)]
    assert dict(plan.producer) == {fc: 0, relu: 1, heads[0]: 2}
    assert not plan.single_subgraph


def test_a_plan_is_a_value() -> None:
    graph, heads, _ = _chain()
    assert make_plan(graph, None, heads) == make_plan(graph, None, heads)

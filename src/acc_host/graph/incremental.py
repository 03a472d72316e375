"""Shape inference over a graph that grows, each node inferred once.

A translator (the ONNX importer's MatMul, Add, LayerNormalization) asks for
the shape of a value while the graph is still being built. Inferring the
whole graph built so far at each question makes an import quadratic in the
number of nodes (a 12-layer transformer: 1,300 nodes, 2,000 questions).
:class:`IncrementalShapes` keeps the shapes (and the small values of shape
computations, see :mod:`acc_host.graph.dynamic`) of every node it has
inferred, and infers only the nodes a question adds: the ones between the
asked value and nodes inferred before, which it reads as variables of known
shape and value. Each node is inferred once per set of leaf shapes, so the
questions of an import cost time linear in its node count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .symbol_json import Node

__all__ = ["IncrementalShapes"]

Shape = tuple[int, ...]
# (a leaf variable's name) -> its shape, or None when it is unknown
LeafShape = Callable[[str], "Shape | None"]


class IncrementalShapes:
    """Shapes of symbol outputs, reusing what earlier questions inferred.

    leaf_shape(name) gives the shape of a variable of the graph (None:
    unknown); value_of(name) the value of a constant (see
    ``Graph.infer_shapes_values``). A node's result, known or not, is kept:
    a later node cannot change it (the graph only grows downstream).
    ``inferred`` counts the nodes inferred, for tests that check the work
    done is linear."""

    def __init__(self, leaf_shape: LeafShape, value_of: Callable[[str], Any]) -> None:
        self.leaf_shape = leaf_shape
        self.value_of = value_of
        # id(node) -> (node, shapes of its visible outputs, their known values)
        self._known: dict[int, tuple[Node, list[Shape | None], dict[int, Any]]] = {}
        self.inferred = 0

    def shape(self, node: Node, output: int) -> Shape | None:
        """The shape of output output of node, or None when unknown or when
        inference fails (an inconsistent graph: the caller's translator
        then takes its general path)."""
        from ..errors import AccHostError

        if node.is_variable:
            return self.leaf_shape(node.name)
        known = self._known.get(id(node))
        if known is None:
            try:
                self._infer(node)
            except (AccHostError, ArithmeticError, AttributeError, IndexError, KeyError,
                    RuntimeError, TypeError, ValueError):
                return None
            known = self._known.get(id(node))
            if known is None:
                return None
        shapes = known[1]
        return shapes[output] if output < len(shapes) else None

    def _infer(self, head: Node) -> None:
        """Infers head and every node above it not inferred before."""
        from . import Graph

        new = self._new_nodes(head)
        copies: dict[int, Node] = {}
        boundary: dict[str, tuple[Shape | None, Any]] = {}
        variables: dict[str, Node] = {}  # one per boundary entry, however many read it
        leaves: dict[str, Shape] = {}
        for node in new:  # inputs before their readers
            inputs = []
            for producer, output, version in node.inputs:
                if producer.is_variable:
                    shape = self.leaf_shape(producer.name)
                    if shape is not None:
                        leaves[producer.name] = shape
                    inputs.append((producer, output, version))
                elif id(producer) in copies:
                    inputs.append((copies[id(producer)], output, version))
                else:  # inferred before: a variable of its known shape and value
                    name = f"\x00known{id(producer)}:{output}"
                    if name not in variables:
                        _, shapes, values = self._known[id(producer)]
                        boundary[name] = (shapes[output] if output < len(shapes) else None,
                                          values.get(output))
                        variables[name] = Node("null", name)
                    inputs.append((variables[name], 0, 0))
            copies[id(node)] = Node(node.op, node.name, node.attrs, inputs, node.extra,
                                    node.num_outputs, node.subgraphs)
        given = dict(leaves)
        given.update((name, shape) for name, (shape, _) in boundary.items() if shape is not None)

        def value_of(name: str) -> Any:
            if name in boundary:
                return boundary[name][1]
            return self.value_of(name)

        graph = Graph([(copies[id(head)], 0)])
        # only the names the cut graph has (a variable can be cut off by
        # the copies: a boundary input replaced it)
        present = {node.name for node in graph.nodes if node.is_variable}
        shapes, values = graph.infer_shapes_values(
            {name: shape for name, shape in given.items() if name in present}, value_of)
        for node in new:
            k = graph.index[id(copies[id(node)])]
            entries = graph.output_entries(k)
            self._known[id(node)] = (
                node, [shapes[entry] for entry in entries],
                {position: values[entry] for position, entry in enumerate(entries)
                 if entry in values})
        self.inferred += len(new)

    def _new_nodes(self, head: Node) -> list[Node]:
        """The operator nodes above head (head included) not inferred
        before, each after its inputs."""
        order: list[Node] = []
        seen = {id(head)}
        stack: list[tuple[Node, int]] = [(head, 0)]
        while stack:
            node, next_input = stack[-1]
            if next_input < len(node.inputs):
                stack[-1] = (node, next_input + 1)
                producer = node.inputs[next_input][0]
                if (id(producer) not in seen and not producer.is_variable
                        and id(producer) not in self._known):
                    seen.add(id(producer))
                    stack.append((producer, 0))
            else:
                stack.pop()
                order.append(node)
        return order
